/*
 * The rest of TVM v0.19's C API over the object layer (src/runtime/object.cc,
 * c_runtime_api.cc, registry.cc, relax_vm/builtin.cc):
 *   - type indices: TVMObjectGetTypeIndex, TVMObjectTypeKey2Index, TVMObjectTypeIndex2Key,
 *     TVMObjectDerivedFrom over TVM's static type table (indices 0 to 11, TVM's keys);
 *     the types TVM numbers at start-up (12 and up, per build) are not in this runtime;
 *   - errors: TVMGetLastBacktrace (no C++ stack trace here: NULL), TVMThrowLastError (C has
 *     no exceptions: the error on stderr, then abort, as an uncaught throw ends a program);
 *   - backend: TVMBackendRunOnce, TVMBackendRegisterEnvCAPI (TVM's Python hooks, refused:
 *     no Python runs here), the TVMBackendAnyList* helpers.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relax.h"
#include "rt.h"

/* TVM's TypeIndex (include/tvm/runtime/object.h): index -> key; every type's parent is the
   root (0). The root's key is not found by name in TVM (TypeKey2Index("runtime.Object")
   fails), so the search starts at 1. */
static const char* const k_type_keys[] = {"runtime.Object",
                                          "runtime.Module",
                                          "runtime.NDArray",
                                          "runtime.String",
                                          "Array",
                                          "Map",
                                          "runtime.ShapeTuple",
                                          "runtime.PackedFunc",
                                          "runtime.disco.DRef",
                                          "runtime.RPCObjectRef",
                                          "runtime.Closure",
                                          "runtime.ADT"};
#define NUM_TYPES ((unsigned)(sizeof(k_type_keys) / sizeof(k_type_keys[0])))

static int unknown_index(unsigned tindex, const char* fn) {
  return tvmrt_fail("TypeError",
                    "%s: unknown type index %u; this runtime has TVM's static types 0 to %u "
                    "(runtime.Object to runtime.ADT)",
                    fn, tindex, NUM_TYPES - 1);
}

TVM_DLL int TVMObjectGetTypeIndex(TVMObjectHandle obj, unsigned* out_tindex) {
  if (out_tindex == NULL) {
    return tvmrt_fail("InvalidArgumentError", "TVMObjectGetTypeIndex: out_tindex is required");
  }
  switch (tvmrt_object_live_magic(obj)) {
    case RT_MAGIC_MODULE: *out_tindex = 1; return 0;      /* kRuntimeModule */
    case RT_MAGIC_RX_STR: *out_tindex = 3; return 0;      /* kRuntimeString */
    case RT_MAGIC_RX_TUPLE: *out_tindex = 4; return 0;    /* kRuntimeArray: a Relax tuple */
    case RT_MAGIC_RX_MAP: *out_tindex = 5; return 0;      /* kRuntimeMap */
    case RT_MAGIC_RX_SHAPE: *out_tindex = 6; return 0;    /* kRuntimeShapeTuple */
    case RT_MAGIC_FUNC: *out_tindex = 7; return 0;        /* kRuntimePackedFunc */
    case RT_MAGIC_RX_CLOSURE: *out_tindex = 10; return 0; /* kRuntimeClosure: a VMClosure */
    case RT_MAGIC_ADT: *out_tindex = 11; return 0; /* kRuntimeADT: a Relay VM tuple or value */
    default:
      return tvmrt_fail(
          "ArgumentTypeError",
          "TVMObjectGetTypeIndex: %p is not a live module, function or ADT, a "
          "map, or a Relax VM string, tuple, shape or closure (freed already? an array's "
          "type index comes from TVMArrayGetTypeIndex)",
          obj);
  }
}

TVM_DLL int TVMObjectTypeKey2Index(const char* type_key, unsigned* out_tindex) {
  unsigned i;
  if (type_key == NULL || out_tindex == NULL) {
    return tvmrt_fail("InvalidArgumentError",
                      "TVMObjectTypeKey2Index: type_key and out_tindex are required");
  }
  for (i = 1; i < NUM_TYPES; ++i) {
    if (strcmp(type_key, k_type_keys[i]) == 0) {
      *out_tindex = i;
      return 0;
    }
  }
  return tvmrt_fail("TypeError",
                    "Cannot find type %.128s; this runtime has TVM's static types "
                    "(runtime.Module, runtime.NDArray, runtime.String, Array, Map, "
                    "runtime.ShapeTuple, runtime.PackedFunc, runtime.disco.DRef, "
                    "runtime.RPCObjectRef, runtime.Closure, runtime.ADT)",
                    type_key);
}

TVM_DLL int TVMObjectTypeIndex2Key(unsigned tindex, char** out_type_key) {
  size_t n;
  if (out_type_key == NULL) {
    return tvmrt_fail("InvalidArgumentError", "TVMObjectTypeIndex2Key: out_type_key is required");
  }
  if (tindex >= NUM_TYPES) return unknown_index(tindex, "TVMObjectTypeIndex2Key");
  n = strlen(k_type_keys[tindex]) + 1;
  *out_type_key = (char*)malloc(n); /* the caller's to free, as TVM's */
  if (*out_type_key == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot copy a type key");
  memcpy(*out_type_key, k_type_keys[tindex], n);
  return 0;
}

TVM_DLL int TVMObjectDerivedFrom(uint32_t child_type_index, uint32_t parent_type_index,
                                 int* is_derived) {
  if (is_derived == NULL) {
    return tvmrt_fail("InvalidArgumentError", "TVMObjectDerivedFrom: is_derived is required");
  }
  /* TVM: a child's index is never below its parent's, so these two need no table */
  if (child_type_index < parent_type_index) {
    *is_derived = 0;
    return 0;
  }
  if (child_type_index == parent_type_index) {
    *is_derived = 1;
    return 0;
  }
  if (child_type_index >= NUM_TYPES) return unknown_index(child_type_index, "TVMObjectDerivedFrom");
  *is_derived = parent_type_index == 0;
  return 0;
}

TVM_DLL const char* TVMGetLastBacktrace(void) { return NULL; }

TVM_DLL void TVMThrowLastError(void) {
  fprintf(stderr,
          "TVMThrowLastError: C has no exceptions; the last error was: %s\n"
          "(libtvmrt_runtime aborts, as an uncaught throw would)\n",
          tvmrt_peek_last_error());
  fflush(stderr);
  abort();
}

/* TVMBackendRunOnce, as pthread_once: *handle is NULL until f has succeeded once, then
   ONCE_DONE (TVM's mark); ONCE_RUNNING while a caller runs f, and other callers wait for it
   (one mutex and condition for every handle: a kernel's init runs once per process). A failed
   f puts NULL back, so the next caller, or a waiting one, runs it again. A thread whose f
   calls it again for the same handle returns 0 at once, as TVM does, not waiting on itself. */
#define ONCE_DONE ((void*)1)
#define ONCE_RUNNING ((void*)2)

typedef struct once_frame {
  void** handle;
  const struct once_frame* outer;
} once_frame;

static pthread_mutex_t g_once_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_once_cv = PTHREAD_COND_INITIALIZER;
static _Thread_local const once_frame* t_once; /* the handles this thread is running f for */

TVM_DLL int TVMBackendRunOnce(void** handle, int (*f)(void*), void* cdata, int nbytes) {
  const once_frame* fr;
  once_frame mine;
  void* state;
  int rc;
  (void)nbytes;
  if (handle == NULL || f == NULL) {
    return tvmrt_fail("InvalidArgumentError", "TVMBackendRunOnce: handle and f are required");
  }
  state = __atomic_load_n(handle, __ATOMIC_ACQUIRE);
  if (state != NULL && state != ONCE_RUNNING) return 0; /* done (any mark but ours: TVM's) */
  for (fr = t_once; fr != NULL; fr = fr->outer) {
    if (fr->handle == handle) return 0; /* f is running on this thread: do not wait on it */
  }
  pthread_mutex_lock(&g_once_mu);
  while ((state = __atomic_load_n(handle, __ATOMIC_ACQUIRE)) == ONCE_RUNNING)
    pthread_cond_wait(&g_once_cv, &g_once_mu);
  if (state != NULL) {
    pthread_mutex_unlock(&g_once_mu);
    return 0;
  }
  __atomic_store_n(handle, ONCE_RUNNING, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&g_once_mu);
  mine.handle = handle;
  mine.outer = t_once;
  t_once = &mine;
  rc = f(cdata);
  t_once = mine.outer;
  pthread_mutex_lock(&g_once_mu);
  __atomic_store_n(handle, rc == 0 ? ONCE_DONE : NULL, __ATOMIC_RELEASE);
  pthread_cond_broadcast(&g_once_cv);
  pthread_mutex_unlock(&g_once_mu);
  return rc;
}

TVM_DLL int TVMBackendRegisterEnvCAPI(const char* name, void* ptr) {
  static const char* const known[] = {"PyErr_CheckSignals", "Py_IncRef", "Py_DecRef",
                                      "PyGILState_Ensure", "PyGILState_Release"};
  size_t i;
  (void)ptr;
  for (i = 0; name != NULL && i < sizeof(known) / sizeof(known[0]); ++i) {
    if (strcmp(name, known[i]) == 0) {
      return tvmrt_fail("UnsupportedError",
                        "TVMBackendRegisterEnvCAPI: %s is one of TVM's Python environment hooks "
                        "(signals, the GIL, Python errors); the C runtime runs no Python and "
                        "calls none of them",
                        name);
    }
  }
  return tvmrt_fail("InvalidArgumentError",
                    "Unknown env API %.128s; TVM's are PyErr_CheckSignals, Py_IncRef, Py_DecRef, "
                    "PyGILState_Ensure, PyGILState_Release",
                    name != NULL ? name : "(null)");
}

/* ---------------------------------------------------------------------------------- */
/* any-lists: arrays of values, each TVMRetValue's layout (a TVMValue, then its type code);
   an item owns what it holds: a reference to an object, a copy of a string               */

typedef tvmrt_any_item any_item;

static int item_index(void* anylist, int index, const char* fn) {
  if (anylist == NULL || index < 0) {
    return tvmrt_fail("InvalidArgumentError",
                      "%s: anylist %p, index %d: expected a list and an "
                      "index >= 0",
                      fn, anylist, index);
  }
  return 0;
}

/* the object behind an owned handle, or NULL for a value that owns nothing */
static tvmrt_object* item_object(const any_item* it) {
  switch (it->code) {
    case kTVMModuleHandle:
    case kTVMPackedFuncHandle:
    case kTVMObjectHandle: return (tvmrt_object*)it->value.v_handle;
    case kTVMNDArrayHandle:
      return it->value.v_handle != NULL ? &((tvmrt_ndarray*)it->value.v_handle)->hdr : NULL;
    default: return NULL;
  }
}

void tvmrt_any_item_clear(tvmrt_any_item* it) {
  if (it->code == kTVMStr || it->code == kTVMBytes) {
    free(it->value.v_handle);
  } else {
    tvmrt_release(item_object(it));
  }
  it->code = kTVMNullptr;
  it->value.v_handle = NULL;
}

TVM_DLL int TVMBackendAnyListResetItem(void* anylist, int index) {
  if (item_index(anylist, index, "TVMBackendAnyListResetItem") != 0) return -1;
  tvmrt_any_item_clear((any_item*)anylist + index);
  return 0;
}

TVM_DLL int TVMBackendAnyListSetPackedArg(void* anylist, int index, TVMValue* args, int* type_codes,
                                          int arg_offset) {
  any_item* it;
  if (item_index(anylist, index, "TVMBackendAnyListSetPackedArg") != 0) return -1;
  if (args == NULL || type_codes == NULL || arg_offset < 0) {
    return tvmrt_fail("InvalidArgumentError",
                      "TVMBackendAnyListSetPackedArg: the argument arrays and an offset >= 0 "
                      "are required");
  }
  it = (any_item*)anylist + index;
  if (it->code == kTVMBytes) { /* TVM's TVMArgsSetter: "not handled" */
    return tvmrt_fail("UnsupportedError",
                      "TVMBackendAnyListSetPackedArg: item %d holds bytes, which TVM does not pass "
                      "as an argument",
                      index);
  }
  args[arg_offset] = it->value; /* borrowed: the item keeps it */
  type_codes[arg_offset] = it->code;
  return 0;
}

TVM_DLL int TVMBackendAnyListMoveFromPackedReturn(void* anylist, int index, TVMValue* args,
                                                  int* type_codes, int ret_offset) {
  any_item* it;
  any_item in;
  if (item_index(anylist, index, "TVMBackendAnyListMoveFromPackedReturn") != 0) return -1;
  if (args == NULL || type_codes == NULL || ret_offset < 0) {
    return tvmrt_fail("InvalidArgumentError",
                      "TVMBackendAnyListMoveFromPackedReturn: the return arrays and an offset >= 0 "
                      "are required");
  }
  it = (any_item*)anylist + index;
  memset(&in, 0, sizeof(in));
  in.value = args[ret_offset];
  in.code = type_codes[ret_offset];
  if (in.code == kTVMStr || in.code == kTVMBytes) { /* copied, as TVM's TVMArgValue */
    const TVMByteArray* b = (const TVMByteArray*)in.value.v_handle;
    const char* src = in.code == kTVMStr ? in.value.v_str : b != NULL ? b->data : NULL;
    size_t n = src == NULL ? 0 : in.code == kTVMStr ? strlen(src) : b->size;
    char* copy;
    if (src == NULL) {
      return tvmrt_fail("InvalidArgumentError", "TVMBackendAnyListMoveFromPackedReturn: null text");
    }
    if (in.code == kTVMStr) {
      copy = (char*)malloc(n + 1);
      if (copy != NULL) in.value.v_handle = copy;
    } else { /* one block: the TVMByteArray, then its bytes */
      TVMByteArray* held = (TVMByteArray*)malloc(sizeof(TVMByteArray) + n + 1);
      copy = held != NULL ? (char*)(held + 1) : NULL;
      if (held != NULL) {
        held->data = copy;
        held->size = n;
        in.value.v_handle = held;
      }
    }
    if (copy == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot copy a return value");
    memcpy(copy, src, n);
    copy[n] = '\0';
  } else {
    tvmrt_object* obj = item_object(&in);
    uint32_t magic = in.code == kTVMModuleHandle    ? RT_MAGIC_MODULE
                     : in.code == kTVMNDArrayHandle ? RT_MAGIC_ARRAY
                                                    : RT_MAGIC_FUNC;
    uint32_t live = obj != NULL ? tvmrt_object_live_magic(obj) : magic;
    if (live != magic &&
        !(in.code == kTVMObjectHandle && (live == RT_MAGIC_ADT || tvmrt_rx_is_value_magic(live)))) {
      return tvmrt_fail("ArgumentTypeError",
                        "TVMBackendAnyListMoveFromPackedReturn: return value %p (type code %d) is "
                        "not a live object of this runtime",
                        in.value.v_handle, in.code);
    }
  }
  tvmrt_any_item_clear(it);
  *it = in; /* the return value's reference moves into the item */
  return 0;
}
