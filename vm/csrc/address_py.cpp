// The data address of a C-contiguous buffer (a numpy array) for the ctypes calls into the C++
// core (vm/cpu.py's ptr, envs/grammar_native.py). ndarray.ctypes.data builds a helper object
// on every call, about 2 us; run_batch passes 17 arrays, so for one program on a few inputs it
// cost more than running them. Through the buffer protocol it is a small fraction of that.
//
// address(obj) -> int. BufferError (from the exporter) where obj is not C-contiguous; TypeError
// where it has no buffer. Read-only buffers are fine: the address is only read here.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

namespace {

PyObject* address(PyObject*, PyObject* obj) {
  Py_buffer view;
  if (PyObject_GetBuffer(obj, &view, PyBUF_C_CONTIGUOUS) != 0) return nullptr;
  PyObject* out = PyLong_FromVoidPtr(view.buf);
  PyBuffer_Release(&view);
  return out;
}

PyMethodDef methods[] = {
    {"address", address, METH_O, "address(obj) -> the address of a C-contiguous buffer's first byte"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "_address", "Buffer addresses for the ctypes calls.", -1, methods,
                      nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__address() { return PyModule_Create(&module); }
