// The results of vramgym.vm.execute as Python values, in C: one pass over the run_batch arrays
// that builds each run's int, bool, list or Trap. The Python version (vm/execute.py,
// _decode_python) does the same with numpy masks and slices, about 1 to 2 us each, which cost
// more than running a small program on its 32 inputs.
//
// decode(status, value, steps, out_list, out_cap, kinds, m, traps, fallback, long_lists, with_steps)
//   status, value, steps: int32 buffers of R = len(kinds) * m runs, program-major;
//   out_list: None or an int32 buffer of R * out_cap (list results' first out_cap elements);
//   kinds: bytes, each program's result kind (0 int, 1 bool, 2 list, as vm/opcodes.py);
//   traps: a tuple, traps[code] the Trap of a status code (None: `fallback`);
//   long_lists: None or a dict {run: list} of the list results longer than out_cap;
//   with_steps: (result, steps) pairs instead of results.
// Returns one list of results per program. A TypeError or ValueError names a malformed call
// (never a read outside the buffers).
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>

namespace {

constexpr int KIND_INT = 0, KIND_BOOL = 1, KIND_LIST = 2;

// A C-contiguous buffer of 4-byte items, released on scope exit.
struct Int32View {
  Py_buffer view{};
  bool held = false;
  bool get(PyObject* o, const char* name, Py_ssize_t n) {
    if (PyObject_GetBuffer(o, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return false;
    held = true;
    const char* f = view.format ? view.format : "B";
    if (*f == '<' || *f == '=' || *f == '@') f++;
    if (view.itemsize != 4 || (f[0] != 'i' && f[0] != 'l') || f[1] != '\0' || n > PY_SSIZE_T_MAX / 4 ||
        view.len != n * 4) {
      PyErr_Format(PyExc_ValueError, "decode: %s must hold %zd int32 values", name, n);
      return false;
    }
    return true;
  }
  const int32_t* data() const { return static_cast<const int32_t*>(view.buf); }
  ~Int32View() {
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

// The result of run r (a new reference), or null with an exception set.
PyObject* result(int kind, int32_t s, int32_t v, Py_ssize_t r, const int32_t* out, Py_ssize_t cap, PyObject* traps,
                 PyObject* fallback, PyObject* long_lists) {
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
  if (v <= cap) return int_list(out + r * cap, v);
  PyObject* key = PyLong_FromSsize_t(r);
  if (!key) return nullptr;
  PyObject* got = long_lists ? PyDict_GetItemWithError(long_lists, key) : nullptr;  // (borrowed)
  Py_DECREF(key);
  if (!got) {
    if (!PyErr_Occurred())
      PyErr_Format(PyExc_ValueError, "decode: run %zd returned a list of %d elements, more than out_cap, and "
                   "long_lists does not hold it", r, (int)v);
    return nullptr;
  }
  Py_INCREF(got);
  return got;
}

PyObject* decode(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 11) {
    PyErr_SetString(PyExc_TypeError,
                    "decode(status, value, steps, out_list, out_cap, kinds, m, traps, fallback, long_lists, with_steps)");
    return nullptr;
  }
  PyObject *kinds = args[5], *traps = args[7], *fallback = args[8], *long_lists = args[9];
  const Py_ssize_t cap = PyLong_AsSsize_t(args[4]), m = PyLong_AsSsize_t(args[6]);
  if ((cap == -1 || m == -1) && PyErr_Occurred()) return nullptr;
  const int with_steps = PyObject_IsTrue(args[10]);
  if (with_steps < 0) return nullptr;
  if (!PyBytes_Check(kinds) || !PyTuple_Check(traps) || (long_lists != Py_None && !PyDict_Check(long_lists)) ||
      cap < 0 || m < 0) {
    PyErr_SetString(PyExc_TypeError, "decode: kinds bytes, traps a tuple, long_lists None or a dict, out_cap and "
                    "m >= 0");
    return nullptr;
  }
  if (long_lists == Py_None) long_lists = nullptr;
  const Py_ssize_t n_prog = PyBytes_GET_SIZE(kinds);
  const unsigned char* kind = reinterpret_cast<const unsigned char*>(PyBytes_AS_STRING(kinds));
  if (m && n_prog > PY_SSIZE_T_MAX / m) return PyErr_NoMemory();
  const Py_ssize_t runs = n_prog * m;
  Int32View status, value, steps, out;
  if (!status.get(args[0], "status", runs) || !value.get(args[1], "value", runs) ||
      !steps.get(args[2], "steps", runs))
    return nullptr;
  if (cap && runs > PY_SSIZE_T_MAX / cap) return PyErr_NoMemory();
  if (args[3] == Py_None && cap != 0)
    return PyErr_Format(PyExc_ValueError, "decode: out_list is None but out_cap is %zd", cap);
  if (args[3] != Py_None && !out.get(args[3], "out_list", runs * cap)) return nullptr;
  const int32_t* out_words = out.held ? out.data() : nullptr;
  static const int32_t none = 0;
  if (!out_words) out_words = &none;  // (cap is 0 then: lists of length 0 read nothing)

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
      PyObject* x = result(kind[p], status.data()[r], value.data()[r], r, out_words, cap, traps, fallback,
                           long_lists);
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
     "decode(status, value, steps, out_list, out_cap, kinds, m, traps, fallback, long_lists, with_steps) -> "
     "one list of results per program"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "_decode", "execute()'s results as Python values, in C.", -1, methods,
                      nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__decode() { return PyModule_Create(&module); }
