// The results of vramgym.vm.execute as Python values, in C: one pass over the run_batch arrays
// that builds each run's int, bool, list or Trap. The Python version (vm/execute.py,
// _decode_python) does the same with numpy masks and slices, about 1 to 2 us each, which cost
// more than running a small program on its 32 inputs.
//
// decode(status, value, steps, out_words, out_off, kinds, m, traps, fallback, long_lists, with_steps)
//   status, value, steps: int32 buffers of R = len(kinds) * m runs, program-major;
//   out_words, out_off: None, or run_batch's list results (the first out_cap elements of run r's
//   list are out_words[out_off[r]:out_off[r + 1]]: an int32 buffer and an int64 one of R + 1);
//   kinds: bytes, each program's result kind (0 int, 1 bool, 2 list, as vm/opcodes.py);
//   traps: a tuple, traps[code] the Trap of a status code (None: `fallback`);
//   long_lists: None or a dict {run: list} of the list results longer than out_cap (whose
//     elements in out_words are fewer than their length);
//   with_steps: (result, steps) pairs instead of results.
// Returns one list of results per program. A TypeError or ValueError names a malformed call
// (never a read outside the buffers).
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>

namespace {

constexpr int KIND_INT = 0, KIND_BOOL = 1, KIND_LIST = 2;

// A C-contiguous buffer of int32 (or int64: wide) items, released on scope exit.
struct IntView {
  Py_buffer view{};
  bool held = false;
  bool get(PyObject* o, const char* name, Py_ssize_t n, bool wide = false) {
    if (PyObject_GetBuffer(o, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return false;
    held = true;
    const char* f = view.format ? view.format : "B";
    if (*f == '<' || *f == '=' || *f == '@') f++;
    const Py_ssize_t size = wide ? 8 : 4;
    const bool kind = wide ? (f[0] == 'q' || (f[0] == 'l' && sizeof(long) == 8)) : (f[0] == 'i' || (f[0] == 'l' && sizeof(long) == 4));
    if (view.itemsize != size || !kind || f[1] != '\0' || (n >= 0 && (n > PY_SSIZE_T_MAX / size || view.len != n * size))) {
      if (n >= 0) PyErr_Format(PyExc_ValueError, "decode: %s must hold %zd %s values", name, n, wide ? "int64" : "int32");
      else PyErr_Format(PyExc_ValueError, "decode: %s must hold %s values", name, wide ? "int64" : "int32");
      return false;
    }
    return true;
  }
  Py_ssize_t size() const { return view.len / view.itemsize; }
  const int32_t* data() const { return static_cast<const int32_t*>(view.buf); }
  const int64_t* data64() const { return static_cast<const int64_t*>(view.buf); }
  ~IntView() {
    if (held) PyBuffer_Release(&view);
  }
};

PyObject* int_list(const int32_t* v, Py_ssize_t n) {
  PyObject* out = PyList_New(n);
  if (!out) return nullptr;
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject* x = PyLong_FromLong(v[i]);
    if (!x) {
      Py_DECREF(out);
      return nullptr;
    }
    PyList_SET_ITEM(out, i, x);
  }
  return out;
}

// The result of run r (a new reference), or null with an exception set. Its list elements (when
// it returned a list) are words[lo, hi), all of them unless the list is in long_lists.
PyObject* result(int kind, int32_t s, int32_t v, Py_ssize_t r, const int32_t* words, int64_t lo, int64_t hi,
                 PyObject* traps, PyObject* fallback, PyObject* long_lists) {
  if (s != 0) {
    PyObject* t = (s > 0 && s < PyTuple_GET_SIZE(traps)) ? PyTuple_GET_ITEM(traps, s) : Py_None;
    if (t == Py_None) t = fallback;
    Py_INCREF(t);
    return t;
  }
  if (kind == KIND_BOOL) return PyBool_FromLong(v != 0);
  if (kind != KIND_LIST) return PyLong_FromLong(v);
  if (v < 0) {
    PyErr_Format(PyExc_ValueError, "decode: run %zd returned a list of length %d", r, (int)v);
    return nullptr;
  }
  if (v == hi - lo) return int_list(words + lo, v);
  PyObject* key = PyLong_FromSsize_t(r);
  if (!key) return nullptr;
  PyObject* got = long_lists ? PyDict_GetItemWithError(long_lists, key) : nullptr;  // (borrowed)
  Py_DECREF(key);
  if (!got) {
    if (!PyErr_Occurred())
      PyErr_Format(PyExc_ValueError, "decode: run %zd returned a list of %d elements, out_words holds %lld of "
                   "them, and long_lists does not hold it", r, (int)v, (long long)(hi - lo));
    return nullptr;
  }
  Py_INCREF(got);
  return got;
}

PyObject* decode(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 11) {
    PyErr_SetString(PyExc_TypeError,
                    "decode(status, value, steps, out_words, out_off, kinds, m, traps, fallback, long_lists, with_steps)");
    return nullptr;
  }
  PyObject *kinds = args[5], *traps = args[7], *fallback = args[8], *long_lists = args[9];
  const Py_ssize_t m = PyLong_AsSsize_t(args[6]);
  if (m == -1 && PyErr_Occurred()) return nullptr;
  const int with_steps = PyObject_IsTrue(args[10]);
  if (with_steps < 0) return nullptr;
  if (!PyBytes_Check(kinds) || !PyTuple_Check(traps) || (long_lists != Py_None && !PyDict_Check(long_lists)) || m < 0) {
    PyErr_SetString(PyExc_TypeError, "decode: kinds bytes, traps a tuple, long_lists None or a dict, m >= 0");
    return nullptr;
  }
  if (long_lists == Py_None) long_lists = nullptr;
  const Py_ssize_t n_prog = PyBytes_GET_SIZE(kinds);
  const unsigned char* kind = reinterpret_cast<const unsigned char*>(PyBytes_AS_STRING(kinds));
  if (m && n_prog > PY_SSIZE_T_MAX / m) return PyErr_NoMemory();
  const Py_ssize_t runs = n_prog * m;
  IntView status, value, steps, out, off;
  if (!status.get(args[0], "status", runs) || !value.get(args[1], "value", runs) ||
      !steps.get(args[2], "steps", runs))
    return nullptr;
  if ((args[3] == Py_None) != (args[4] == Py_None)) {
    PyErr_SetString(PyExc_ValueError, "decode: out_words and out_off must both be None or both be given");
    return nullptr;
  }
  if (args[3] != Py_None && (!out.get(args[3], "out_words", -1) || !off.get(args[4], "out_off", runs + 1, true)))
    return nullptr;
  static const int32_t none_words = 0;
  const int32_t* words = out.held ? out.data() : &none_words;
  const int64_t* offs = off.held ? off.data64() : nullptr;  // (none: lists of no elements read nothing)
  const int64_t n_words = out.held ? (int64_t)out.size() : 0;
  if (offs && offs[0] != 0) {
    PyErr_SetString(PyExc_ValueError, "decode: out_off must start at 0");
    return nullptr;
  }

  PyObject* rows = PyList_New(n_prog);
  if (!rows) return nullptr;
  for (Py_ssize_t p = 0; p < n_prog; p++) {
    PyObject* row = PyList_New(m);
    if (!row) {
      Py_DECREF(rows);
      return nullptr;
    }
    PyList_SET_ITEM(rows, p, row);
    for (Py_ssize_t j = 0; j < m; j++) {
      const Py_ssize_t r = p * m + j;
      const int64_t lo = offs ? offs[r] : 0, hi = offs ? offs[r + 1] : 0;
      if (hi < lo || hi > n_words) {  // (lo >= 0: the offsets before it were checked alike)
        Py_DECREF(rows);
        return PyErr_Format(PyExc_ValueError, "decode: out_off[%zd:%zd + 2] does not bound a part of out_words", r, r);
      }
      PyObject* x = result(kind[p], status.data()[r], value.data()[r], r, words, lo, hi, traps, fallback, long_lists);
      if (x && with_steps) {
        PyObject* s = PyLong_FromLong(steps.data()[r]);
        PyObject* pair = s ? PyTuple_Pack(2, x, s) : nullptr;
        Py_DECREF(x);
        Py_XDECREF(s);
        x = pair;
      }
      if (!x) {
        Py_DECREF(rows);
        return nullptr;
      }
      PyList_SET_ITEM(row, j, x);
    }
  }
  return rows;
}

PyMethodDef methods[] = {
    {"decode", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(decode)), METH_FASTCALL,
     "decode(status, value, steps, out_words, out_off, kinds, m, traps, fallback, long_lists, with_steps) -> "
     "one list of results per program"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "_decode", "execute()'s results as Python values, in C.", -1, methods,
                      nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__decode() { return PyModule_Create(&module); }
