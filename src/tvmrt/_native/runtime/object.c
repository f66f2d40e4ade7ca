/*
 * The object layer of the C runtime: reference counting, packed functions
 * (TVMFuncCall, TVMFuncCreateFromCFunc, TVMCFuncSetReturn, TVMFuncFree), the error text
 * (TVMGetLastError) and the one-time set-up that points the shared backend services'
 * function environment (TVMFuncCall, TVMBackendGetFuncFromEnv) at this layer.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

/* ---------------------------------------------------------------------------------- */
/* errors                                                                              */

int rt_fail(const char* kind, const char* fmt, ...) {
  char buf[2048];
  int n = snprintf(buf, sizeof(buf), "%s: ", kind);
  va_list ap;
  if (n < 0 || (size_t)n >= sizeof(buf)) n = 0;
  va_start(ap, fmt);
  vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
  va_end(ap);
  TVMAPISetLastError(buf);
  return -1;
}

RT_API const char* TVMGetLastError(void) { return tvmrt_peek_last_error(); }

/* ---------------------------------------------------------------------------------- */
/* reference counting                                                                  */

void rt_retain(rt_object* obj) {
  if (obj != NULL) __atomic_add_fetch(&obj->refs, 1, __ATOMIC_RELAXED);
}

void rt_release(rt_object* obj) {
  if (obj == NULL) return;
  if (__atomic_sub_fetch(&obj->refs, 1, __ATOMIC_ACQ_REL) == 0) obj->destroy(obj);
}

/* The object behind a handle of type code `code` (module, function, array), or NULL. */
static rt_object* object_of(void* handle, int code) {
  if (handle == NULL) return NULL;
  switch (code) {
    case kTVMModuleHandle:
    case kTVMPackedFuncHandle:
    case kTVMObjectHandle:
      return (rt_object*)handle;
    case kTVMNDArrayHandle:
      return &((rt_ndarray*)handle)->hdr;
    default:
      return NULL;
  }
}

/* ---------------------------------------------------------------------------------- */
/* packed functions                                                                    */

static void func_destroy(rt_object* obj) {
  rt_func* f = (rt_func*)obj;
  if (f->kind == RT_FN_C && f->fin != NULL) f->fin(f->self);
  rt_release(f->owner);
  f->hdr.magic = 0;
  free(f);
}

static rt_func* func_alloc(int kind, rt_object* owner) {
  rt_func* f = (rt_func*)calloc(1, sizeof(rt_func));
  if (f == NULL) {
    rt_fail("DeviceOutOfMemoryError", "cannot allocate a packed function");
    return NULL;
  }
  f->hdr.magic = RT_MAGIC_FUNC;
  f->hdr.refs = 1;
  f->hdr.destroy = func_destroy;
  f->kind = kind;
  f->owner = owner;
  rt_retain(owner);
  return f;
}

rt_func* rt_func_new(rt_fn fn, void* self, rt_object* owner) {
  rt_func* f = func_alloc(RT_FN_INTERNAL, owner);
  if (f != NULL) {
    f->fn = fn;
    f->self = self;
  }
  return f;
}

rt_func* rt_func_backend(TVMBackendPackedCFunc fn, rt_object* owner) {
  rt_func* f = func_alloc(RT_FN_BACKEND, owner);
  if (f != NULL) f->backend = fn;
  return f;
}

rt_func* rt_func_check(void* handle) {
  rt_func* f = (rt_func*)handle;
  if (f == NULL || f->hdr.magic != RT_MAGIC_FUNC) {
    rt_fail("ArgumentTypeError", "expected a PackedFunc handle, got %p", handle);
    return NULL;
  }
  return f;
}

/* TVMCFuncSetReturn's target: where a C function's result goes. */
typedef struct {
  TVMValue* value;
  int* code;
} ret_slot;

static int func_call(void* handle, TVMValue* args, int* codes, int num_args, TVMValue* ret,
                     int* ret_code) {
  rt_func* f = rt_func_check(handle);
  if (f == NULL) return -1;
  if (num_args < 0 || (num_args > 0 && (args == NULL || codes == NULL))) {
    return rt_fail("InvalidArgumentError", "TVMFuncCall: %d arguments without their arrays",
                   num_args);
  }
  *ret_code = kTVMNullptr;
  ret->v_handle = NULL;
  switch (f->kind) {
    case RT_FN_INTERNAL:
      return f->fn(f->self, args, codes, num_args, ret, ret_code);
    case RT_FN_BACKEND:
      return f->backend(args, codes, num_args, ret, ret_code, NULL);
    default: {
      ret_slot slot = {ret, ret_code};
      return f->cfunc(args, codes, num_args, &slot, f->self);
    }
  }
}

RT_API int TVMCFuncSetReturn(TVMRetValueHandle ret, TVMValue* value, int* type_code,
                             int num_ret) {
  ret_slot* slot = (ret_slot*)ret;
  if (slot == NULL || value == NULL || type_code == NULL || num_ret != 1) {
    return rt_fail("InvalidArgumentError", "TVMCFuncSetReturn: expected one return value");
  }
  /* the caller keeps its reference; the receiver of the result gets one of its own */
  rt_retain(object_of(value[0].v_handle, type_code[0]));
  *slot->value = value[0];
  *slot->code = type_code[0];
  return 0;
}

RT_API int TVMCbArgToReturn(TVMValue* value, int* code) {
  (void)value;
  (void)code;
  return 0; /* arguments are handles already; nothing to convert */
}

RT_API int TVMFuncCreateFromCFunc(TVMPackedCFunc func, void* resource_handle,
                                  TVMPackedCFuncFinalizer fin, TVMFunctionHandle* out) {
  rt_func* f;
  rt_init();
  if (func == NULL || out == NULL) {
    return rt_fail("InvalidArgumentError", "TVMFuncCreateFromCFunc: func and out are required");
  }
  f = func_alloc(RT_FN_C, NULL);
  if (f == NULL) return -1;
  f->cfunc = func;
  f->fin = fin;
  f->self = resource_handle;
  *out = f;
  return 0;
}

RT_API int TVMFuncFree(TVMFunctionHandle func) {
  rt_func* f;
  if (func == NULL) return 0;
  f = rt_func_check(func);
  if (f == NULL) return -1;
  rt_release(&f->hdr);
  return 0;
}

RT_API int TVMObjectRetain(TVMObjectHandle obj) {
  rt_object* o = (rt_object*)obj;
  if (o == NULL) return 0;
  if (o->magic != RT_MAGIC_FUNC && o->magic != RT_MAGIC_MODULE) {
    return rt_fail("ArgumentTypeError", "TVMObjectRetain: %p is not a module or function", obj);
  }
  rt_retain(o);
  return 0;
}

RT_API int TVMObjectFree(TVMObjectHandle obj) {
  rt_object* o = (rt_object*)obj;
  if (o == NULL) return 0;
  if (o->magic != RT_MAGIC_FUNC && o->magic != RT_MAGIC_MODULE) {
    return rt_fail("ArgumentTypeError", "TVMObjectFree: %p is not a module or function", obj);
  }
  rt_release(o);
  return 0;
}

RT_API int TVMByteArrayFree(TVMByteArray* arr) {
  if (arr == NULL) return 0;
  free((void*)arr->data);
  free(arr);
  return 0;
}

/* ---------------------------------------------------------------------------------- */
/* TVMBackendGetFuncFromEnv: the module, its imports, then the global functions         */

static int env_lookup(void* mod_ctx, const char* name, void** out) {
  rt_module* mod = (rt_module*)mod_ctx;
  rt_env_entry* e;
  rt_func* f;
  const void* native;
  if (out == NULL || name == NULL) {
    return rt_fail("InvalidArgumentError", "TVMBackendGetFuncFromEnv: name and out required");
  }
  native = tvmrt_native_function(name); /* C-implemented contrib functions: no wrapper */
  if (native != NULL) {
    *out = (void*)native;
    return 0;
  }
  if (mod == NULL || mod->hdr.magic != RT_MAGIC_MODULE) {
    return rt_fail("FunctionNotFoundError",
                   "Cannot find %s: the kernel library's module context is not set", name);
  }
  pthread_mutex_lock(&mod->env_mu);
  for (e = mod->env; e != NULL; e = e->next) {
    if (strcmp(e->name, name) == 0) {
      *out = e->func;
      pthread_mutex_unlock(&mod->env_mu);
      return 0;
    }
  }
  f = rt_module_get(mod, name, 1);
  if (f != NULL && f->owner == &mod->hdr) { /* no cycle: the cache lives in mod */
    f->owner = NULL;
    rt_release(&mod->hdr);
  }
  if (f == NULL) f = rt_registry_get(name);
  if (f == NULL) {
    pthread_mutex_unlock(&mod->env_mu);
    return rt_fail("FunctionNotFoundError", "Cannot find %s in the module or its imports", name);
  }
  e = (rt_env_entry*)calloc(1, sizeof(rt_env_entry));
  if (e == NULL || (e->name = strdup(name)) == NULL) {
    free(e);
    rt_release(&f->hdr);
    pthread_mutex_unlock(&mod->env_mu);
    return rt_fail("DeviceOutOfMemoryError", "cannot cache function %s", name);
  }
  e->func = f;
  e->next = mod->env;
  mod->env = e;
  *out = f;
  pthread_mutex_unlock(&mod->env_mu);
  return 0;
}

/* ---------------------------------------------------------------------------------- */
/* set-up                                                                              */

static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void init_once(void) {
  const char* env = getenv("TVM_NUM_THREADS");
  if (env == NULL || *env == '\0') env = getenv("OMP_NUM_THREADS");
  tvmrt_set_env_callbacks(env_lookup, func_call);
  if (env != NULL && *env != '\0') {
    char* end = NULL;
    long n = strtol(env, &end, 10);
    if (end != env && *end == '\0' && n > 0 && n <= 1024) tvmrt_set_num_threads((int)n);
  }
}

void rt_init(void) { pthread_once(&g_once, init_once); }
