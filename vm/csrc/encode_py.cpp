// The common case of vramgym.vm.values.encode_tuples in C: rows that are exact lists or tuples
// of exact ints, bools and lists (or tuples) of exact ints, encoded as [kind, value] or
// [KIND_LIST, n, e1 .. en] per value. The Python version walks every value several times
// (type scans, a transpose, a flatten, numpy's conversion); this walks each once.
//
// encode(rows, kinds, single) -> (words bytearray of int32, offsets bytearray of int64) or None.
// kinds: a tuple of kind codes (0 int, 1 bool, 2 list, as vm/opcodes.py). single: each row is one
// value rather than a tuple of len(kinds) values (expected results). None means "not the common
// case": another type (numpy scalars and arrays, subclasses), a value out of int32, a wrong arity.
// The caller then runs the Python version, which also words every error, so both give the same
// words for the same rows and the same errors.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>
#include <vector>

namespace {

constexpr int32_t KIND_INT = 0, KIND_BOOL = 1, KIND_LIST = 2;

// An exact int in int32 into *v; false otherwise (bool is not an exact int).
bool small_int(PyObject* o, int32_t* v) {
  if (!PyLong_CheckExact(o)) return false;
  int overflow = 0;
  long long x = PyLong_AsLongLongAndOverflow(o, &overflow);
  if (overflow || x < INT32_MIN || x > INT32_MAX) return false;
  *v = (int32_t)x;
  return true;
}

bool encode_value(PyObject* o, int32_t kind, std::vector<int32_t>& w) {
  int32_t v = 0;
  switch (kind) {
    case KIND_INT:
      if (!small_int(o, &v)) return false;
      w.push_back(KIND_INT);
      w.push_back(v);
      return true;
    case KIND_BOOL:
      if (!PyBool_Check(o)) return false;
      w.push_back(KIND_BOOL);
      w.push_back(o == Py_True ? 1 : 0);
      return true;
    case KIND_LIST: {
      if (!PyList_CheckExact(o) && !PyTuple_CheckExact(o)) return false;
      Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
      if (n > INT32_MAX) return false;
      PyObject** items = PySequence_Fast_ITEMS(o);
      w.push_back(KIND_LIST);
      w.push_back((int32_t)n);
      for (Py_ssize_t i = 0; i < n; i++) {
        if (!small_int(items[i], &v)) return false;
        w.push_back(v);
      }
      return true;
    }
    default:
      return false;
  }
}

PyObject* encode(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3) {
    PyErr_SetString(PyExc_TypeError, "encode(rows, kinds, single)");
    return nullptr;
  }
  PyObject *rows = args[0], *kinds_obj = args[1];
  const int single = PyObject_IsTrue(args[2]);
  if (single < 0) return nullptr;
  if (!PyTuple_CheckExact(kinds_obj)) {
    PyErr_SetString(PyExc_TypeError, "kinds must be a tuple of kind codes");
    return nullptr;
  }
  const Py_ssize_t k = PyTuple_GET_SIZE(kinds_obj);
  std::vector<int32_t> kinds(k);
  for (Py_ssize_t j = 0; j < k; j++) {
    long c = PyLong_AsLong(PyTuple_GET_ITEM(kinds_obj, j));
    if (c == -1 && PyErr_Occurred()) return nullptr;
    if (c < KIND_INT || c > KIND_LIST) {
      PyErr_SetString(PyExc_ValueError, "unknown kind code");
      return nullptr;
    }
    kinds[j] = (int32_t)c;
  }
  if ((single && k != 1) || (!PyList_CheckExact(rows) && !PyTuple_CheckExact(rows))) Py_RETURN_NONE;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(rows);
  PyObject** items = PySequence_Fast_ITEMS(rows);
  std::vector<int32_t> words;
  std::vector<int64_t> offsets;
  try {
    words.reserve((size_t)n * 2);  // (not n * k * 2: k comes from the caller, rows may be short)
    offsets.reserve((size_t)n + 1);
    offsets.push_back(0);
    for (Py_ssize_t i = 0; i < n; i++) {
      PyObject* row = items[i];
      if (single) {
        if (!encode_value(row, kinds[0], words)) Py_RETURN_NONE;
      } else {
        if (!PyList_CheckExact(row) && !PyTuple_CheckExact(row)) Py_RETURN_NONE;
        if (PySequence_Fast_GET_SIZE(row) != k) Py_RETURN_NONE;
        PyObject** vals = PySequence_Fast_ITEMS(row);
        for (Py_ssize_t j = 0; j < k; j++)
          if (!encode_value(vals[j], kinds[j], words)) Py_RETURN_NONE;
      }
      offsets.push_back((int64_t)words.size());
    }
  } catch (const std::bad_alloc&) {
    return PyErr_NoMemory();
  }
  PyObject* w = PyByteArray_FromStringAndSize(reinterpret_cast<const char*>(words.data()),
                                              (Py_ssize_t)(words.size() * sizeof(int32_t)));
  if (!w) return nullptr;
  PyObject* o = PyByteArray_FromStringAndSize(reinterpret_cast<const char*>(offsets.data()),
                                              (Py_ssize_t)(offsets.size() * sizeof(int64_t)));
  if (!o) {
    Py_DECREF(w);
    return nullptr;
  }
  PyObject* out = PyTuple_Pack(2, w, o);
  Py_DECREF(w);
  Py_DECREF(o);
  return out;
}

PyMethodDef methods[] = {
    {"encode", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(encode)), METH_FASTCALL,
     "encode(rows, kinds, single) -> (words, offsets) bytearrays, or None outside the common case"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "_encode", "The common case of encode_tuples in C.", -1, methods,
                      nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__encode() { return PyModule_Create(&module); }
