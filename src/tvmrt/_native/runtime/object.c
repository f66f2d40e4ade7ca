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

int tvmrt_fail(const char* kind, const char* fmt, ...) {
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

void tvmrt_retain(tvmrt_object* obj) {
  if (obj != NULL) __atomic_add_fetch(&obj->refs, 1, __ATOMIC_RELAXED);
}

void tvmrt_release(tvmrt_object* obj) {
  if (obj == NULL) return;
  if (__atomic_sub_fetch(&obj->refs, 1, __ATOMIC_ACQ_REL) == 0) obj->destroy(obj);
}

/* The object behind a handle of type code `code` (module, function, array), or NULL. */
static tvmrt_object* object_of(void* handle, int code) {
  if (handle == NULL) return NULL;
  switch (code) {
    case kTVMModuleHandle:
    case kTVMPackedFuncHandle:
    case kTVMObjectHandle:
      return (tvmrt_object*)handle;
    case kTVMNDArrayHandle:
      return &((tvmrt_ndarray*)handle)->hdr;
    default:
      return NULL;
  }
}

/* ---------------------------------------------------------------------------------- */
/* packed functions                                                                    */

static void func_destroy(tvmrt_object* obj) {
  tvmrt_func* f = (tvmrt_func*)obj;
  if (f->kind == RT_FN_C && f->fin != NULL) f->fin(f->self);
  tvmrt_release(f->owner);
  f->hdr.magic = 0;
  free(f);
}

static tvmrt_func* func_alloc(int kind, tvmrt_object* owner) {
  tvmrt_func* f = (tvmrt_func*)calloc(1, sizeof(tvmrt_func));
  if (f == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate a packed function");
    return NULL;
  }
  f->hdr.magic = RT_MAGIC_FUNC;
  f->hdr.refs = 1;
  f->hdr.destroy = func_destroy;
  f->kind = kind;
  f->owner = owner;
  tvmrt_retain(owner);
  return f;
}

tvmrt_func* tvmrt_func_new(tvmrt_fn fn, void* self, tvmrt_object* owner) {
  tvmrt_func* f = func_alloc(RT_FN_INTERNAL, owner);
  if (f != NULL) {
    f->fn = fn;
    f->self = self;
  }
  return f;
}

tvmrt_func* tvmrt_func_backend(TVMBackendPackedCFunc fn, tvmrt_object* owner) {
  tvmrt_func* f = func_alloc(RT_FN_BACKEND, owner);
  if (f != NULL) f->backend = fn;
  return f;
}

tvmrt_func* tvmrt_func_check(void* handle) {
  tvmrt_func* f = (tvmrt_func*)handle;
  if (f == NULL || f->hdr.magic != RT_MAGIC_FUNC) {
    tvmrt_fail("ArgumentTypeError", "expected a PackedFunc handle, got %p", handle);
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
  tvmrt_func* f = tvmrt_func_check(handle);
  if (f == NULL) return -1;
  if (num_args < 0 || (num_args > 0 && (args == NULL || codes == NULL))) {
    return tvmrt_fail("InvalidArgumentError", "TVMFuncCall: %d arguments without their arrays",
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
    return tvmrt_fail("InvalidArgumentError", "TVMCFuncSetReturn: expected one return value");
  }
  *slot->code = type_code[0];
  if (type_code[0] == kTVMStr || type_code[0] == kTVMBytes) {
    /* as TVM: the text is copied, valid until the thread's next such return */
    static __thread char* text;
    static __thread TVMByteArray bytes;
    const TVMByteArray* in = (const TVMByteArray*)value[0].v_handle;
    const char* src = type_code[0] == kTVMStr ? value[0].v_str : in != NULL ? in->data : NULL;
    size_t n = src == NULL ? 0 : type_code[0] == kTVMStr ? strlen(src) : in->size;
    char* copy;
    if (src == NULL) return tvmrt_fail("InvalidArgumentError", "TVMCFuncSetReturn: null text");
    copy = (char*)malloc(n + 1);
    if (copy == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot copy a return value");
    memcpy(copy, src, n);
    copy[n] = '\0';
    free(text);
    text = copy;
    bytes.data = text;
    bytes.size = n;
    if (type_code[0] == kTVMStr) {
      slot->value->v_str = text;
    } else {
      slot->value->v_handle = &bytes;
    }
    return 0;
  }
  /* the caller keeps its reference; the receiver of the result gets one of its own */
  tvmrt_retain(object_of(value[0].v_handle, type_code[0]));
  *slot->value = value[0];
  return 0;
}

RT_API int TVMCbArgToReturn(TVMValue* value, int* code) {
  (void)value;
  (void)code;
  return 0; /* arguments are handles already; nothing to convert */
}

RT_API int TVMFuncCreateFromCFunc(TVMPackedCFunc func, void* resource_handle,
                                  TVMPackedCFuncFinalizer fin, TVMFunctionHandle* out) {
  tvmrt_func* f;
  tvmrt_init();
  if (func == NULL || out == NULL) {
    return tvmrt_fail("InvalidArgumentError", "TVMFuncCreateFromCFunc: func and out are required");
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
  tvmrt_func* f;
  if (func == NULL) return 0;
  f = tvmrt_func_check(func);
  if (f == NULL) return -1;
  tvmrt_release(&f->hdr);
  return 0;
}

RT_API int TVMObjectRetain(TVMObjectHandle obj) {
  tvmrt_object* o = (tvmrt_object*)obj;
  if (o == NULL) return 0;
  if (o->magic != RT_MAGIC_FUNC && o->magic != RT_MAGIC_MODULE) {
    return tvmrt_fail("ArgumentTypeError", "TVMObjectRetain: %p is not a module or function", obj);
  }
  tvmrt_retain(o);
  return 0;
}

RT_API int TVMObjectFree(TVMObjectHandle obj) {
  tvmrt_object* o = (tvmrt_object*)obj;
  if (o == NULL) return 0;
  if (o->magic != RT_MAGIC_FUNC && o->magic != RT_MAGIC_MODULE) {
    return tvmrt_fail("ArgumentTypeError", "TVMObjectFree: %p is not a module or function", obj);
  }
  tvmrt_release(o);
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
  tvmrt_module* mod = (tvmrt_module*)mod_ctx;
  tvmrt_env_entry* e;
  tvmrt_func* f;
  const void* native;
  if (out == NULL || name == NULL) {
    return tvmrt_fail("InvalidArgumentError", "TVMBackendGetFuncFromEnv: name and out required");
  }
  native = tvmrt_native_function(name); /* C-implemented contrib functions: no wrapper */
  if (native != NULL) {
    *out = (void*)native;
    return 0;
  }
  if (mod == NULL || mod->hdr.magic != RT_MAGIC_MODULE) {
    return tvmrt_fail("FunctionNotFoundError",
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
  f = tvmrt_module_get(mod, name, 1);
  if (f != NULL && f->owner == &mod->hdr) { /* no cycle: the cache lives in mod */
    f->owner = NULL;
    tvmrt_release(&mod->hdr);
  }
  if (f == NULL) f = tvmrt_registry_get(name);
  if (f == NULL) {
    pthread_mutex_unlock(&mod->env_mu);
    return tvmrt_fail("FunctionNotFoundError", "Cannot find %s in the module or its imports", name);
  }
  e = (tvmrt_env_entry*)calloc(1, sizeof(tvmrt_env_entry));
  if (e == NULL || (e->name = strdup(name)) == NULL) {
    free(e);
    tvmrt_release(&f->hdr);
    pthread_mutex_unlock(&mod->env_mu);
    return tvmrt_fail("DeviceOutOfMemoryError", "cannot cache function %s", name);
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

void tvmrt_init(void) { pthread_once(&g_once, init_once); }
