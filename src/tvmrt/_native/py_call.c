/*
 * The CPython glue of the C runtime's Python faces (tvmrt.runtime.native_module): Handle, a
 * reference to one of libtvmrt_runtime's objects, released with the free function it was
 * given when Python drops it, and FastCall, TVMFuncCall of one C function with its
 * arguments converted here rather than through ctypes (which costs about a microsecond a
 * call, as much as the C Relax VM's whole run of a small model).
 *
 * A FastCall takes what a call usually passes: ints (and bools), floats, None, strings
 * (without a NUL inside), writable C-contiguous numpy arrays of ints and floats (a DLTensor
 * of their memory for the call: the C side copies it, or writes it as an out argument), and
 * arrays that are a C array or have one (an object whose `_c` attribute is a Handle: an NDArray of
 * native_module; a host NDArray whose `_c` is None gets one here, host_twin). For anything else it
 * returns NotImplemented before calling, and the Python face converts the call itself. Results are
 * unpacked here too: a C array is a native_module._CArray whose `_owner` and `_c` are its Handle; a
 * tuple an Array of its items, a shape a ShapeTuple, a string a String (read with tvmrt_value_peek
 * and tvmrt_value_tuple_item, no packed call per item); anything else (closures, functions,
 * modules) is what `on_value(code, raw)` makes of it. A failed call calls `on_error()`,
 * which raises the C runtime's error. The classes and functions are configure()'s.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <stdint.h>
#include <string.h>

#include "native.h"
#include "py_call.h"

/* ------------------------------------------------------------------------------------ */
/* Handle                                                                                 */

typedef int (*free_fn)(void*);

typedef struct {
  PyObject_HEAD void* value;
  free_fn free;
  PyObject* array_interface; /* numpy's view of an array's memory (native_module._fill) */
} Handle;

static PyObject* g_handle_type;

static PyObject* handle_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  unsigned long long value, free;
  Handle* self;
  if (kwargs != NULL && PyDict_Size(kwargs) != 0) {
    PyErr_SetString(PyExc_TypeError, "Handle(value, free) takes no keyword arguments");
    return NULL;
  }
  if (!PyArg_ParseTuple(args, "KK:Handle", &value, &free)) return NULL;
  self = (Handle*)PyType_GenericAlloc(type, 0);
  if (self == NULL) return NULL;
  self->value = (void*)(uintptr_t)value;
  self->free = (free_fn)(uintptr_t)free;
  return (PyObject*)self;
}

static PyObject* handle_make(void* value, free_fn free) {
  Handle* self = (Handle*)PyType_GenericAlloc((PyTypeObject*)g_handle_type, 0);
  if (self == NULL) return NULL;
  self->value = value;
  self->free = free;
  return (PyObject*)self;
}

static void handle_dealloc(PyObject* self_obj) {
  Handle* self = (Handle*)self_obj;
  PyTypeObject* tp = Py_TYPE(self_obj);
  freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
  if (self->value != NULL && self->free != NULL) self->free(self->value);
  self->value = NULL;
  Py_CLEAR(self->array_interface);
  tp_free(self_obj);
  Py_DECREF(tp);
}

static PyObject* handle_value(PyObject* self_obj, void* unused) {
  (void)unused;
  return PyLong_FromVoidPtr(((Handle*)self_obj)->value);
}

static PyObject* g_str_array_struct; /* "__array_struct__" */

/* numpy's array interface in C (the __array_struct__ capsule's PyArrayInterface, numpy's
   documented layout) and the flags read here */
typedef struct {
  int two; /* 2: the layout's check */
  int nd;
  char typekind;
  int itemsize;
  int flags;
  Py_intptr_t* shape;
  Py_intptr_t* strides;
  void* data;
  PyObject* descr;
} array_interface;
enum { NPY_C_CONTIGUOUS = 0x1, NPY_NOTSWAPPED = 0x200, NPY_WRITEABLE = 0x400 };

/* obj's array interface when it has every flag of `want` (*capsule then holds it: release
   it after use), else NULL, with a Python error set where getting it failed */
static const array_interface* array_struct(PyObject* obj, int want, PyObject** capsule) {
  const array_interface* a;
  if ((*capsule = PyObject_GetAttr(obj, g_str_array_struct)) == NULL) return NULL;
  a = (const array_interface*)PyCapsule_GetPointer(*capsule, NULL);
  if (a == NULL || a->two != 2 || (a->flags & want) != want || a->nd < 0) {
    Py_CLEAR(*capsule);
    return NULL;
  }
  return a;
}

/* array_info(): an array handle's (data, byte_offset, shape, dtype code, bits, lanes,
   device type, device id), read from its DLTensor (the handle must be an array's) */
static PyObject* shape_tuple(const DLTensor* t) {
  PyObject* shape = PyTuple_New(t->ndim);
  int i;
  if (shape == NULL) return NULL;
  for (i = 0; i < t->ndim; ++i) {
    PyObject* d = PyLong_FromLongLong((long long)t->shape[i]);
    if (d == NULL) {
      Py_DECREF(shape);
      return NULL;
    }
    PyTuple_SetItem(shape, i, d);
  }
  return shape;
}

static PyObject* handle_array_info(PyObject* self_obj, PyObject* unused) {
  const DLTensor* t = (const DLTensor*)((Handle*)self_obj)->value;
  PyObject* shape;
  (void)unused;
  if (t == NULL || t->ndim < 0 || t->ndim > 64) {
    PyErr_SetString(PyExc_ValueError, "array_info: not an array handle");
    return NULL;
  }
  if ((shape = shape_tuple(t)) == NULL) return NULL;
  return Py_BuildValue("(KKNiiiii)", (unsigned long long)(uintptr_t)t->data,
                       (unsigned long long)t->byte_offset, shape, (int)t->dtype.code,
                       (int)t->dtype.bits, (int)t->dtype.lanes, (int)t->device.device_type,
                       (int)t->device.device_id);
}

/* copy_to(out): a host array handle's bytes into `out`, a writable C-contiguous numpy array
   of as many bytes (numpy() of a C result: one copy, no view made first) */
static PyObject* handle_copy_to(PyObject* self_obj, PyObject* out) {
  const int want = NPY_C_CONTIGUOUS | NPY_WRITEABLE;
  const DLTensor* t = (const DLTensor*)((Handle*)self_obj)->value;
  PyObject* capsule;
  const array_interface* a;
  size_t n = 1, have = 1;
  int i;
  if (t == NULL || t->ndim < 0 || t->ndim > 64 || t->device.device_type != kDLCPU ||
      t->strides != NULL) {
    PyErr_SetString(PyExc_ValueError, "copy_to: not a compact host array handle");
    return NULL;
  }
  if ((a = array_struct(out, want, &capsule)) == NULL) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "copy_to: out is not writable");
    return NULL;
  }
  for (i = 0; i < t->ndim; ++i) n *= (size_t)t->shape[i];
  n *= ((size_t)t->dtype.bits * t->dtype.lanes + 7) / 8;
  for (i = 0; i < a->nd; ++i) have *= (size_t)a->shape[i];
  have *= (size_t)a->itemsize;
  if (have == n && n != 0) memcpy(a->data, (const char*)t->data + t->byte_offset, n);
  Py_DECREF(capsule);
  if (have != n) {
    PyErr_SetString(PyExc_ValueError, "copy_to: out has another byte size");
    return NULL;
  }
  Py_RETURN_NONE;
}

/* what host_copy makes its arrays with: numpy.empty, and the numpy dtypes it may make by
   code | bits << 8 | lanes << 16 (a dict Python fills); set by configure_host_copy */
static PyObject *g_np_empty, *g_host_dtypes;

/* host_copy(): a numpy copy of a compact host array handle in one call (numpy() of a C
   result): numpy.empty(shape, dtype) filled by copy_to; None where the handle is not a compact
   host array, its dtype is not a key of the dict yet, or configure_host_copy was not called
   (Python then takes the long way, and adds the key) */
static PyObject* handle_host_copy(PyObject* self_obj, PyObject* unused) {
  const DLTensor* t = (const DLTensor*)((Handle*)self_obj)->value;
  PyObject *key, *dtype, *shape, *out, *done;
  (void)unused;
  if (g_np_empty == NULL || t == NULL || t->ndim < 0 || t->ndim > 64 ||
      t->device.device_type != kDLCPU || t->strides != NULL)
    Py_RETURN_NONE;
  key = PyLong_FromUnsignedLong((unsigned long)t->dtype.code | (unsigned long)t->dtype.bits << 8 |
                                (unsigned long)t->dtype.lanes << 16);
  if (key == NULL) return NULL;
  dtype = PyDict_GetItemWithError(g_host_dtypes, key); /* borrowed */
  Py_DECREF(key);
  if (dtype == NULL) {
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
  }
  if ((shape = shape_tuple(t)) == NULL) return NULL;
  out = PyObject_CallFunctionObjArgs(g_np_empty, shape, dtype, NULL);
  Py_DECREF(shape);
  if (out == NULL) return NULL;
  if ((done = handle_copy_to(self_obj, out)) == NULL) {
    Py_DECREF(out);
    return NULL;
  }
  Py_DECREF(done);
  return out;
}

/* configure_host_copy(numpy.empty, dtypes) */
static PyObject* configure_host_copy(PyObject* module, PyObject* args) {
  PyObject *empty, *dtypes;
  (void)module;
  if (!PyArg_ParseTuple(args, "OO!:configure_host_copy", &empty, &PyDict_Type, &dtypes))
    return NULL;
  if (!PyCallable_Check(empty)) {
    PyErr_SetString(PyExc_TypeError, "configure_host_copy: empty must be callable");
    return NULL;
  }
  Py_INCREF(empty);
  Py_INCREF(dtypes);
  Py_XDECREF(g_np_empty);
  Py_XDECREF(g_host_dtypes);
  g_np_empty = empty;
  g_host_dtypes = dtypes;
  Py_RETURN_NONE;
}

static PyMethodDef handle_methods[] = {
    {"host_copy", handle_host_copy, METH_NOARGS,
     "A numpy copy of a compact host array (configure_host_copy's dtypes), or None."},
    {"array_info", handle_array_info, METH_NOARGS,
     "(data, byte_offset, shape, code, bits, lanes, device_type, device_id) of an array."},
    {"copy_to", handle_copy_to, METH_O,
     "Copy a host array's bytes into a writable C-contiguous numpy array of its size."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef handle_getset[] = {
    {"value", handle_value, NULL, "The object's address (0 for none).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef handle_members[] = {
    {"__array_interface__", T_OBJECT_EX, offsetof(Handle, array_interface), 0,
     "numpy's description of an array's memory, where one was set."},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot handle_slots[] = {
    {Py_tp_new, (void*)handle_new},
    {Py_tp_dealloc, (void*)handle_dealloc},
    {Py_tp_getset, (void*)handle_getset},
    {Py_tp_methods, (void*)handle_methods},
    {Py_tp_members, (void*)handle_members},
    {Py_tp_doc, (void*)"Handle(value, free): a C runtime object reference; free(value) runs "
                       "when Python drops it."},
    {0, NULL},
};

static PyType_Spec handle_spec = {
    "tvmrt._native_backend.Handle", sizeof(Handle), 0, Py_TPFLAGS_DEFAULT, handle_slots,
};

/* ------------------------------------------------------------------------------------ */
/* FastCall                                                                               */

typedef int (*tvm_func_call_fn)(void*, TVMValue*, int*, int, TVMValue*, int*);

#define FAST_MAX_ARGS 32
enum {
  CODE_INT = 0,
  CODE_FLOAT = 2,
  CODE_NULL = 4,
  CODE_DLTENSOR = 7,
  CODE_OBJECT = 8,
  CODE_STR = 11,
  CODE_NDARRAY = 13
};
/* numpy arrays of one call passed as DLTensors of their memory (at most this many, of at
   most FAST_MAX_NDIM dimensions; more go through the Python face) */
#define FAST_MAX_HOST 4
#define FAST_MAX_NDIM 16

typedef struct {
  DLTensor dl;
  int64_t shape[FAST_MAX_NDIM];
} host_arg;

typedef struct {
  PyObject_HEAD tvm_func_call_fn call;
  void* handle; /* the function (not a reference: the Python face holds one) */
} FastCall;

static PyObject* g_fast_call_type;
static PyObject* g_object_new; /* object.__new__ */
static PyObject* g_tuple_new;  /* tuple.__new__ */
static PyObject* g_str_new;    /* str.__new__ */
static PyObject* g_str_c;
static PyObject* g_str_owner;
static PyObject* g_str_np;
static PyObject* g_str_dtype;
static PyObject* g_str_dlpack;
static PyObject* g_ndarray_type; /* numpy.ndarray, at the first call that may take one */

/* configure(): what results become (set once by native_module) */
static struct {
  free_fn array_free, object_free;
  int (*from_dlpack)(DLManagedTensor*, void**); /* TVMArrayFromDLPack */
  tvmrt_value_peek_fn peek;
  tvmrt_value_tuple_item_fn tuple_item;
  PyObject *carray_type, *array_type, *shape_type, *string_type, *on_value, *on_error;
} g_values;

/* whether an NDArray's dtype attribute (a DataType) says (code, bits, lanes) */
static int same_dtype(PyObject* arr, const DLDataType* t) {
  static const char* const names[3] = {"type_code", "bits", "lanes"};
  PyObject* dt = PyObject_GetAttr(arr, g_str_dtype);
  long want[3];
  int i, ok = dt != NULL;
  want[0] = t->code, want[1] = t->bits, want[2] = t->lanes;
  for (i = 0; ok && i < 3; ++i) {
    PyObject* v = PyObject_GetAttrString(dt, names[i]);
    ok = v != NULL && PyLong_AsLong(v) == want[i];
    Py_XDECREF(v);
  }
  Py_XDECREF(dt);
  PyErr_Clear();
  return ok;
}

/* The C array that views a host NDArray's bytes (TVMArrayFromDLPack of numpy's own export:
   its deleter lets go of them when the C side does), made at its first call and kept in its
   `_c`; False there when the C runtime cannot view them (read-only, not compact or aligned,
   a dtype numpy exports otherwise: bool, lanes, sub-byte). A new reference, or NULL (no
   error set) to convert the call in Python. */
static PyObject* host_twin(PyObject* arr) {
  PyObject *np = PyObject_GetAttr(arr, g_str_np), *capsule = NULL, *handle;
  DLManagedTensor* managed = NULL;
  void* out = NULL;
  if (np == NULL || np == Py_None) goto refused;
  capsule = PyObject_CallMethodObjArgs(np, g_str_dlpack, NULL);
  if (capsule != NULL) managed = (DLManagedTensor*)PyCapsule_GetPointer(capsule, "dltensor");
  if (managed == NULL || managed->dl_tensor.dtype.code > kDLFloat ||
      !same_dtype(arr, &managed->dl_tensor.dtype) || g_values.from_dlpack(managed, &out) != 0)
    goto refused; /* the capsule still owns its tensor: its destructor frees it */
  PyCapsule_SetName(capsule, "used_dltensor"); /* the C array owns it now */
  Py_DECREF(capsule);
  Py_DECREF(np);
  if ((handle = handle_make(out, g_values.array_free)) == NULL) {
    g_values.array_free(out);
    PyErr_Clear();
    return NULL;
  }
  if (PyObject_SetAttr(arr, g_str_c, handle) != 0) PyErr_Clear();
  return handle;
refused:
  PyErr_Clear();
  Py_XDECREF(capsule);
  Py_XDECREF(np);
  if (PyObject_SetAttr(arr, g_str_c, Py_False) != 0) PyErr_Clear();
  return NULL;
}

/* the DLDataType of an array interface's kind and item size; 0 for one the C side takes
   otherwise (bool, complex, records, ...) */
static int interface_dtype(const array_interface* a, DLDataType* out) {
  int size = a->itemsize;
  if (size != 1 && size != 2 && size != 4 && size != 8) return 0;
  if (a->typekind == 'i') out->code = kDLInt;
  else if (a->typekind == 'u') out->code = kDLUInt;
  else if (a->typekind == 'f' && size >= 2) out->code = kDLFloat;
  else return 0;
  out->bits = (uint8_t)(size * 8);
  out->lanes = 1;
  return 1;
}

/* A writable, C-contiguous, native-order numpy array (exactly numpy.ndarray) as a DLTensor
   of its memory (read from its __array_struct__: the limited API has no buffers), which the
   C side copies, or writes as an out argument, as TVM does a DLTensor it did not make; the
   call's tuple keeps the array. 0 for any other array: the Python face converts it */
static int host_arg_of(PyObject* item, host_arg* out, TVMValue* value, int* code) {
  const int want = NPY_C_CONTIGUOUS | NPY_NOTSWAPPED | NPY_WRITEABLE;
  PyObject* capsule;
  const array_interface* a;
  int ok = 0, i;
  if (g_ndarray_type == NULL) { /* numpy is tvmrt's one dependency: imported already */
    PyObject* numpy = PyImport_ImportModule("numpy");
    g_ndarray_type = numpy != NULL ? PyObject_GetAttrString(numpy, "ndarray") : NULL;
    Py_XDECREF(numpy);
    if (g_ndarray_type == NULL) {
      PyErr_Clear();
      return 0;
    }
  }
  if ((PyObject*)Py_TYPE(item) != g_ndarray_type) return 0;
  if ((a = array_struct(item, want, &capsule)) == NULL) {
    PyErr_Clear();
    return 0;
  }
  if (a->nd <= FAST_MAX_NDIM && interface_dtype(a, &out->dl.dtype)) {
    for (i = 0; i < a->nd; ++i) out->shape[i] = (int64_t)a->shape[i];
    out->dl.data = a->data;
    out->dl.device.device_type = kDLCPU;
    out->dl.device.device_id = 0;
    out->dl.ndim = a->nd;
    out->dl.shape = out->shape;
    out->dl.strides = NULL;
    out->dl.byte_offset = 0;
    value->v_handle = &out->dl;
    *code = CODE_DLTENSOR;
    ok = 1;
  }
  PyErr_Clear();
  Py_DECREF(capsule); /* the array, which the call's tuple holds, keeps its memory */
  return ok;
}

/* args[i] as a packed argument; 0 when it is none of the kinds taken here */
static int fast_arg(PyObject* item, TVMValue* value, int* code) {
  if (item == Py_None) {
    value->v_handle = NULL;
    *code = CODE_NULL;
    return 1;
  }
  if (PyLong_Check(item)) {
    int overflow = 0;
    value->v_int64 = PyLong_AsLongLongAndOverflow(item, &overflow);
    if (overflow || (value->v_int64 == -1 && PyErr_Occurred())) {
      PyErr_Clear();
      return 0;
    }
    *code = CODE_INT;
    return 1;
  }
  if (PyFloat_Check(item)) {
    value->v_float64 = PyFloat_AsDouble(item);
    *code = CODE_FLOAT;
    return 1;
  }
  if (PyUnicode_Check(item)) { /* UTF-8 kept by the str, which the call's tuple holds */
    Py_ssize_t len;
    const char* text = PyUnicode_AsUTF8AndSize(item, &len);
    if (text == NULL || (Py_ssize_t)strlen(text) != len) { /* a NUL inside: Python's words */
      PyErr_Clear();
      return 0;
    }
    value->v_str = text;
    *code = CODE_STR;
    return 1;
  }
  {
    PyObject* c = PyObject_GetAttr(item, g_str_c);
    int ok;
    if (c == NULL) {
      PyErr_Clear();
      return 0;
    }
    if (c == Py_None) { /* a host NDArray's first call: its twin */
      Py_DECREF(c);
      if ((c = host_twin(item)) == NULL) return 0;
    }
    ok = Py_TYPE(c) == (PyTypeObject*)g_handle_type && ((Handle*)c)->value != NULL;
    if (ok) value->v_handle = ((Handle*)c)->value; /* item keeps c, args keeps item */
    Py_DECREF(c);
    *code = CODE_NDARRAY;
    return ok;
  }
}

static PyObject* c_array(void* address) {
  PyObject* handle = handle_make(address, g_values.array_free);
  PyObject* arr;
  if (handle == NULL) {
    g_values.array_free(address);
    return NULL;
  }
  arr = PyObject_CallFunctionObjArgs(g_object_new, g_values.carray_type, NULL);
  if (arr == NULL || PyObject_SetAttr(arr, g_str_owner, handle) != 0 ||
      PyObject_SetAttr(arr, g_str_c, handle) != 0) {
    Py_XDECREF(arr);
    Py_DECREF(handle);
    return NULL;
  }
  Py_DECREF(handle);
  return arr;
}

#define UNPACK_MAX_DEPTH 64

static PyObject* unpack(int code, TVMValue value, int depth);

/* the object a result holds (its reference is taken: released here) */
static PyObject* unpack_object(void* obj, int depth) {
  int64_t size = 0, i;
  const void* data = NULL;
  PyObject *items = NULL, *out = NULL;
  int kind = g_values.peek(obj, &size, &data);
  if (kind == TVMRT_VALUE_OTHER || depth > UNPACK_MAX_DEPTH || size > PY_SSIZE_T_MAX) {
    return PyObject_CallFunction(g_values.on_value, "iK", 8 /* kTVMObjectHandle */,
                                 (unsigned long long)(uintptr_t)obj);
  }
  if (kind == TVMRT_VALUE_STR) {
    PyObject* text = PyUnicode_DecodeUTF8((const char*)data, (Py_ssize_t)size, "replace");
    if (text != NULL)
      out = PyObject_CallFunctionObjArgs(g_str_new, g_values.string_type, text, NULL);
    Py_XDECREF(text);
    g_values.object_free(obj);
    return out;
  }
  items = PyList_New((Py_ssize_t)size);
  for (i = 0; items != NULL && i < size; ++i) {
    PyObject* item;
    if (kind == TVMRT_VALUE_SHAPE) {
      item = PyLong_FromLongLong(((const int64_t*)data)[i]);
    } else {
      TVMValue v;
      int c;
      if (g_values.tuple_item(obj, i, &v, &c) != 0) {
        PyObject* raised = PyObject_CallObject(g_values.on_error, NULL);
        Py_XDECREF(raised);
        item = NULL;
      } else {
        item = unpack(c, v, depth + 1);
      }
    }
    if (item == NULL) {
      Py_CLEAR(items);
      break;
    }
    PyList_SetItem(items, (Py_ssize_t)i, item); /* steals item */
  }
  if (items != NULL) {
    PyObject* type = kind == TVMRT_VALUE_SHAPE ? g_values.shape_type : g_values.array_type;
    out = PyObject_CallFunctionObjArgs(g_tuple_new, type, items, NULL);
    Py_DECREF(items);
  }
  g_values.object_free(obj);
  return out;
}

/* a result (a reference for handles) as a Python value */
static PyObject* unpack(int code, TVMValue value, int depth) {
  switch (code) {
    case CODE_NDARRAY:
      if (value.v_handle != NULL) return c_array(value.v_handle);
      break;
    case CODE_OBJECT:
      if (value.v_handle != NULL) return unpack_object(value.v_handle, depth);
      break;
    case CODE_INT: return PyLong_FromLongLong((long long)value.v_int64);
    case CODE_FLOAT: return PyFloat_FromDouble(value.v_float64);
    case CODE_NULL: Py_RETURN_NONE;
    default: break;
  }
  return PyObject_CallFunction(g_values.on_value, "iL", code, (long long)value.v_int64);
}

static PyObject* fast_call_call(PyObject* self_obj, PyObject* args, PyObject* kwargs) {
  FastCall* self = (FastCall*)self_obj;
  TVMValue values[FAST_MAX_ARGS], ret;
  int codes[FAST_MAX_ARGS], ret_code = CODE_NULL, rc, num_hosts = 0;
  host_arg hosts[FAST_MAX_HOST];
  Py_ssize_t n = PyTuple_Size(args), i;
  PyThreadState* saved;
  if (n < 0) return NULL;
  if ((kwargs != NULL && PyDict_Size(kwargs) != 0) || n > FAST_MAX_ARGS) {
    Py_INCREF(Py_NotImplemented);
    return Py_NotImplemented;
  }
  for (i = 0; i < n; ++i) {
    PyObject* item = PyTuple_GetItem(args, i);
    if (fast_arg(item, &values[i], &codes[i])) continue;
    if (num_hosts < FAST_MAX_HOST && host_arg_of(item, &hosts[num_hosts], &values[i], &codes[i])) {
      ++num_hosts;
      continue;
    }
    Py_INCREF(Py_NotImplemented);
    return Py_NotImplemented;
  }
  ret.v_int64 = 0;
  saved = PyEval_SaveThread();
  rc = self->call(self->handle, values, codes, (int)n, &ret, &ret_code);
  PyEval_RestoreThread(saved);
  if (rc != 0) {
    PyObject* out = PyObject_CallObject(g_values.on_error, NULL);
    if (out == NULL) return NULL; /* the usual case: on_error raised */
    Py_DECREF(out);
    PyErr_SetString(PyExc_RuntimeError, "the call failed and its error handler did not raise");
    return NULL;
  }
  return unpack(ret_code, ret, 0);
}

static void fast_call_dealloc(PyObject* self_obj) {
  PyTypeObject* tp = Py_TYPE(self_obj);
  freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
  tp_free(self_obj);
  Py_DECREF(tp);
}

static PyType_Slot fast_call_slots[] = {
    {Py_tp_call, (void*)fast_call_call},
    {Py_tp_dealloc, (void*)fast_call_dealloc},
    {Py_tp_doc, (void*)"TVMFuncCall of one C function with its arguments converted in C."},
    {0, NULL},
};

static PyType_Spec fast_call_spec = {
    "tvmrt._native_backend.FastCall", sizeof(FastCall), 0, Py_TPFLAGS_DEFAULT, fast_call_slots,
};

/* configure(array_free, object_free, from_dlpack, peek, tuple_item, carray_type, array_type,
             shape_type, string_type, on_value, on_error) */
static PyObject* configure(PyObject* module, PyObject* args) {
  unsigned long long array_free, object_free, from_dlpack, peek, tuple_item;
  PyObject* objs[6];
  PyObject** slots[6] = {&g_values.carray_type, &g_values.array_type, &g_values.shape_type,
                         &g_values.string_type, &g_values.on_value,   &g_values.on_error};
  int i;
  (void)module;
  if (!PyArg_ParseTuple(args, "KKKKKOOOOOO:configure", &array_free, &object_free, &from_dlpack,
                        &peek, &tuple_item, &objs[0], &objs[1], &objs[2], &objs[3], &objs[4],
                        &objs[5]))
    return NULL;
  if (array_free == 0 || object_free == 0 || from_dlpack == 0 || peek == 0 || tuple_item == 0) {
    PyErr_SetString(PyExc_ValueError, "configure: a NULL function address");
    return NULL;
  }
  for (i = 0; i < 6; ++i) {
    if (i < 4 ? !PyType_Check(objs[i]) : !PyCallable_Check(objs[i])) {
      PyErr_SetString(PyExc_TypeError, "configure: expected four classes and two callables");
      return NULL;
    }
  }
  g_values.array_free = (free_fn)(uintptr_t)array_free;
  g_values.object_free = (free_fn)(uintptr_t)object_free;
  g_values.from_dlpack = (int (*)(DLManagedTensor*, void**))(uintptr_t)from_dlpack;
  g_values.peek = (tvmrt_value_peek_fn)(uintptr_t)peek;
  g_values.tuple_item = (tvmrt_value_tuple_item_fn)(uintptr_t)tuple_item;
  for (i = 0; i < 6; ++i) {
    PyObject* old = *slots[i];
    Py_INCREF(objs[i]);
    *slots[i] = objs[i];
    Py_XDECREF(old);
  }
  Py_RETURN_NONE;
}

/* make_fast_call(tvm_func_call, handle) */
static PyObject* make_fast_call(PyObject* module, PyObject* args) {
  unsigned long long call, handle;
  FastCall* self;
  (void)module;
  if (!PyArg_ParseTuple(args, "KK:make_fast_call", &call, &handle)) return NULL;
  if (call == 0 || handle == 0 || g_values.peek == NULL) {
    PyErr_SetString(PyExc_ValueError,
                    "make_fast_call: a NULL function or handle, or configure() not called");
    return NULL;
  }
  self = (FastCall*)PyType_GenericAlloc((PyTypeObject*)g_fast_call_type, 0);
  if (self == NULL) return NULL;
  self->call = (tvm_func_call_fn)(uintptr_t)call;
  self->handle = (void*)(uintptr_t)handle;
  return (PyObject*)self;
}

static PyMethodDef py_call_methods[] = {
    {"configure_host_copy", configure_host_copy, METH_VARARGS,
     "configure_host_copy(numpy.empty, dtypes): what Handle.host_copy makes arrays with."},
    {"configure", configure, METH_VARARGS,
     "configure(array_free, object_free, from_dlpack, peek, tuple_item, carray_type, "
     "array_type, shape_type, string_type, on_value, on_error): what FastCall arguments "
     "and results become."},
    {"make_fast_call", make_fast_call, METH_VARARGS,
     "make_fast_call(tvm_func_call, handle): TVMFuncCall of one C function, its arguments "
     "converted in C."},
    {NULL, NULL, 0, NULL},
};

static int add_type(PyObject* module, PyObject** slot, PyType_Spec* spec, const char* name) {
  if (*slot == NULL && (*slot = PyType_FromSpec(spec)) == NULL) return -1;
  Py_INCREF(*slot);
  if (PyModule_AddObject(module, name, *slot) != 0) {
    Py_DECREF(*slot);
    return -1;
  }
  return 0;
}

int tvmrt_py_call_init(PyObject* module) {
  if (g_object_new == NULL &&
      (g_object_new = PyObject_GetAttrString((PyObject*)&PyBaseObject_Type, "__new__")) == NULL)
    return -1;
  if (g_tuple_new == NULL &&
      (g_tuple_new = PyObject_GetAttrString((PyObject*)&PyTuple_Type, "__new__")) == NULL)
    return -1;
  if (g_str_new == NULL &&
      (g_str_new = PyObject_GetAttrString((PyObject*)&PyUnicode_Type, "__new__")) == NULL)
    return -1;
  if (g_str_c == NULL && (g_str_c = PyUnicode_InternFromString("_c")) == NULL) return -1;
  if (g_str_owner == NULL && (g_str_owner = PyUnicode_InternFromString("_owner")) == NULL)
    return -1;
  if (g_str_np == NULL && (g_str_np = PyUnicode_InternFromString("_np")) == NULL) return -1;
  if (g_str_array_struct == NULL &&
      (g_str_array_struct = PyUnicode_InternFromString("__array_struct__")) == NULL)
    return -1;
  if (g_str_dtype == NULL && (g_str_dtype = PyUnicode_InternFromString("dtype")) == NULL) return -1;
  if (g_str_dlpack == NULL && (g_str_dlpack = PyUnicode_InternFromString("__dlpack__")) == NULL)
    return -1;
  if (add_type(module, &g_handle_type, &handle_spec, "Handle") != 0 ||
      add_type(module, &g_fast_call_type, &fast_call_spec, "FastCall") != 0)
    return -1;
  return PyModule_AddFunctions(module, py_call_methods);
}
