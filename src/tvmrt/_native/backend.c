/*
 * The CPython glue of tvmrt's native library (tvmrt._native_backend): the module init and
 * KernelCall, one prepared tvm-ffi kernel call run from C (py_call.c adds the Python faces' Handle
 * and FastCall, every call of a C runtime function from Python). Everything else native (the
 * services kernels call, the C runtime) is libtvmrt_runtime, the one native library of the
 * process, which Python loads with ctypes: this file links nothing of it and calls it only
 * through the addresses Python gives (bind_runtime, make_kernel_call, configure, make_fast_call),
 * so the process holds one copy of the services whether Python, a C program or both loaded them.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

#include "native.h"
#include "py_call.h"

/* ------------------------------------------------------------------------------------ */
/* Python side: KernelCall, one prepared tvm-ffi kernel call                             */
/*                                                                                        */
/* The library is mostly used through ctypes. The exception is the per-node call of the  */
/* graph executor: a ctypes call costs ~280 ns (~350 ns with an errcheck), so prepared     */
/* tvm-ffi calls are objects of this type instead. Calling one (no arguments) releases    */
/* the GIL, runs f(NULL, args, num_args, result) and, if the kernel fails, calls the       */
/* Python `on_error` callable, which raises. The argument memory is owned by `keep`.       */

/* libtvmrt_runtime's tvmrt_clear_last_error, from bind_runtime (NULL: not bound yet) */
static void (*g_clear_last_error)(void);

typedef struct {
  PyObject_HEAD TVMFFISafeCallType func;
  const TVMFFIAny* args;
  int32_t num_args;
  TVMFFIAny* result;
  PyObject* on_error;
  PyObject* keep;
} KernelCall;

static PyObject* kernel_call_call(PyObject* self_obj, PyObject* args, PyObject* kwargs) {
  KernelCall* self = (KernelCall*)self_obj;
  PyThreadState* saved;
  int rc;
  if ((args != NULL && PyTuple_Size(args) != 0) || (kwargs != NULL && PyDict_Size(kwargs) != 0)) {
    PyErr_SetString(PyExc_TypeError, "a prepared kernel call takes no arguments");
    return NULL;
  }
  self->result->type_index = 0;
  self->result->zero_padding = 0;
  self->result->v_int64 = 0;
  if (g_clear_last_error != NULL) g_clear_last_error();
  saved = PyEval_SaveThread();
  rc = self->func(NULL, self->args, self->num_args, self->result);
  PyEval_RestoreThread(saved);
  if (rc == 0) Py_RETURN_NONE;
  {
    PyObject* out = PyObject_CallObject(self->on_error, NULL);
    if (out == NULL) return NULL; /* the usual case: on_error raised */
    Py_DECREF(out);
    PyErr_SetString(PyExc_RuntimeError, "the kernel failed and its error handler did not raise");
    return NULL;
  }
}

static void kernel_call_dealloc(PyObject* self_obj) {
  KernelCall* self = (KernelCall*)self_obj;
  PyTypeObject* tp = Py_TYPE(self_obj);
  freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
  Py_XDECREF(self->on_error);
  Py_XDECREF(self->keep);
  tp_free(self_obj);
  Py_DECREF(tp);
}

static PyObject* kernel_call_parts(PyObject* self_obj, PyObject* unused) {
  KernelCall* self = (KernelCall*)self_obj;
  return Py_BuildValue("(KKiK)", (unsigned long long)(uintptr_t)self->func,
                       (unsigned long long)(uintptr_t)self->args, (int)self->num_args,
                       (unsigned long long)(uintptr_t)self->result);
}

static PyMethodDef kernel_call_methods[] = {
    {"parts", kernel_call_parts, METH_NOARGS,
     "(function, TVMFFIAny* args, num_args, TVMFFIAny* result) addresses."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot kernel_call_slots[] = {
    {Py_tp_call, (void*)kernel_call_call},
    {Py_tp_dealloc, (void*)kernel_call_dealloc},
    {Py_tp_methods, (void*)kernel_call_methods},
    {Py_tp_doc, (void*)"A prepared tvm-ffi kernel call: calling it (no arguments) runs the "
                       "kernel."},
    {0, NULL},
};

static PyType_Spec kernel_call_spec = {
    "tvmrt._native_backend.KernelCall",
    sizeof(KernelCall),
    0,
    Py_TPFLAGS_DEFAULT,
    kernel_call_slots,
};

static PyObject* g_kernel_call_type;

/* bind_runtime(clear_last_error): the runtime's entry point a kernel call clears errors with */
static PyObject* bind_runtime(PyObject* module, PyObject* args) {
  unsigned long long clear;
  if (!PyArg_ParseTuple(args, "K:bind_runtime", &clear)) return NULL;
  if (clear == 0) {
    PyErr_SetString(PyExc_ValueError, "bind_runtime: NULL tvmrt_clear_last_error");
    return NULL;
  }
  g_clear_last_error = (void (*)(void))(uintptr_t)clear;
  Py_RETURN_NONE;
}

/* make_kernel_call(func, args, num_args, result, on_error, keep) -> KernelCall */
static PyObject* make_kernel_call(PyObject* module, PyObject* args) {
  unsigned long long func, argv, result;
  int num_args;
  PyObject *on_error, *keep;
  KernelCall* self;
  if (!PyArg_ParseTuple(args, "KKiKOO:make_kernel_call", &func, &argv, &num_args, &result,
                        &on_error, &keep))
    return NULL;
  if (func == 0 || result == 0 || (argv == 0 && num_args > 0) || num_args < 0) {
    PyErr_SetString(PyExc_ValueError, "make_kernel_call: NULL function, arguments or result");
    return NULL;
  }
  if (!PyCallable_Check(on_error)) {
    PyErr_SetString(PyExc_TypeError, "make_kernel_call: on_error must be callable");
    return NULL;
  }
  self = (KernelCall*)PyType_GenericAlloc((PyTypeObject*)g_kernel_call_type, 0);
  if (self == NULL) return NULL;
  self->func = (TVMFFISafeCallType)(uintptr_t)func;
  self->args = (const TVMFFIAny*)(uintptr_t)argv;
  self->num_args = (int32_t)num_args;
  self->result = (TVMFFIAny*)(uintptr_t)result;
  Py_INCREF(on_error);
  self->on_error = on_error;
  Py_INCREF(keep);
  self->keep = keep;
  return (PyObject*)self;
}

static PyMethodDef native_backend_methods[] = {
    {"bind_runtime", bind_runtime, METH_VARARGS,
     "bind_runtime(clear_last_error): the address of libtvmrt_runtime's error clearing."},
    {"make_kernel_call", make_kernel_call, METH_VARARGS,
     "make_kernel_call(func, args, num_args, result, on_error, keep): a prepared tvm-ffi "
     "kernel call."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef native_backend_module = {
    PyModuleDef_HEAD_INIT,
    "_native_backend",
    "CPython glue over libtvmrt_runtime: prepared kernel calls, handles and fast packed calls.",
    -1,
    native_backend_methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__native_backend(void) {
  PyObject* module = PyModule_Create(&native_backend_module);
  if (module == NULL) return NULL;
  if (g_kernel_call_type == NULL) {
    g_kernel_call_type = PyType_FromSpec(&kernel_call_spec);
    if (g_kernel_call_type == NULL) {
      Py_DECREF(module);
      return NULL;
    }
  }
  Py_INCREF(g_kernel_call_type);
  if (PyModule_AddObject(module, "KernelCall", g_kernel_call_type) != 0) {
    Py_DECREF(g_kernel_call_type);
    Py_DECREF(module);
    return NULL;
  }
  if (tvmrt_py_call_init(module) != 0) { /* Handle, FastCall (py_call.c) */
    Py_DECREF(module);
    return NULL;
  }
  return module;
}
