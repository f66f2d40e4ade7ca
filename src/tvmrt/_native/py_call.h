/*
 * py_call.c's part of the CPython glue: the Handle and FastCall types and make_fast_call,
 * added to tvmrt._native_backend by its module init (backend.c).
 */
#ifndef TVMRT_NATIVE_PY_CALL_H_
#define TVMRT_NATIVE_PY_CALL_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* add the types and functions to `module`; 0, or -1 with a Python error set */
int tvmrt_py_call_init(PyObject* module);

#endif /* TVMRT_NATIVE_PY_CALL_H_ */
