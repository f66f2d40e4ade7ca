/*
 * The function environment kernels see: TVMBackendGetFuncFromEnv and TVMFuncCall,
 * answered by the C runtime for what it made and by the host (Python) for the rest, the
 * tables of functions implemented in C (sort.c), the blocks of C objects called with
 * themselves (cuda_launch.c's launchers), and the tvm-ffi lookups and calls, which
 * go to the same environment (see services.c for the whole picture).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "services.h"

/* ------------------------------------------------------------------------------------ */
/* Function environment: the C runtime's own contexts and handles, then the host's        */

static tvmrt_getfunc_cb g_getfunc; /* the host (Python) */
static tvmrt_funccall_cb g_funccall;
static tvmrt_owns_cb g_rt_owns_ctx, g_rt_owns_func; /* the C runtime (globals.c) */
static tvmrt_getfunc_cb g_rt_getfunc;
static tvmrt_funccall_cb g_rt_funccall;
static void (*g_rt_publish)(void* object);

void tvmrt_set_runtime_publish(void (*publish)(void* object)) { g_rt_publish = publish; }

TVM_DLL void tvmrt_set_env_callbacks(tvmrt_getfunc_cb getfunc, tvmrt_funccall_cb funccall) {
  g_getfunc = getfunc;
  g_funccall = funccall;
}

void tvmrt_set_runtime_env(tvmrt_owns_cb owns_ctx, tvmrt_getfunc_cb getfunc,
                           tvmrt_owns_cb owns_func, tvmrt_funccall_cb funccall) {
  g_rt_owns_ctx = owns_ctx;
  g_rt_getfunc = getfunc;
  g_rt_owns_func = owns_func;
  g_rt_funccall = funccall;
}

TVM_DLL int TVMBackendGetFuncFromEnv(void* mod_node, const char* func_name, void** out) {
  /* the runtime's context; anything else is the host's, and with no host, the runtime
     says what is wrong with it */
  if (g_rt_getfunc != NULL && (g_getfunc == NULL || g_rt_owns_ctx(mod_node))) {
    static const char k_not_found[] = "FunctionNotFoundError:";
    if (g_rt_getfunc(mod_node, func_name, out) == 0) return 0;
    if (g_getfunc == NULL || strncmp(tvmrt_peek_last_error(), k_not_found, sizeof(k_not_found) - 1))
      return -1;
    /* neither the module, its imports nor the runtime's globals have it: the host's
       registry may (a function registered in Python, tvm.contrib.cblas.matmul), as TVM has
       one registry for both; a context of none, so only its global functions answer */
    return g_getfunc(NULL, func_name, out);
  }
  if (g_getfunc == NULL) {
    tvmrt_fail("", "%s", "TVMBackendGetFuncFromEnv: the tvmrt function environment is not set up");
    return -1;
  }
  return g_getfunc(mod_node, func_name, out);
}

/* Tables of packed functions implemented in C (sort.c registers its own). A table is
   written before the count that publishes it, and never removed. */
static const tvmrt_native_entry* g_native_tables[TVMRT_NATIVE_TABLES];
static int g_native_sizes[TVMRT_NATIVE_TABLES];
static int g_native_count = 0;
static pthread_mutex_t g_native_mu = PTHREAD_MUTEX_INITIALIZER;

int tvmrt_register_native_table(const tvmrt_native_entry* table, int count) {
  int i, n, status = 0;
  pthread_mutex_lock(&g_native_mu);
  n = __atomic_load_n(&g_native_count, __ATOMIC_RELAXED);
  for (i = 0; i < n; ++i)
    if (g_native_tables[i] == table) break;
  if (i == n) {
    if (n == TVMRT_NATIVE_TABLES || table == NULL || count <= 0) {
      status = -1;
    } else {
      g_native_tables[n] = table;
      g_native_sizes[n] = count;
      __atomic_store_n(&g_native_count, n + 1, __ATOMIC_RELEASE);
    }
  }
  pthread_mutex_unlock(&g_native_mu);
  return status;
}

/* The entry `handle` points to, or NULL if it is not a registered native function. */
static const tvmrt_native_entry* native_entry_of(const void* handle) {
  int i, n = __atomic_load_n(&g_native_count, __ATOMIC_ACQUIRE);
  const char* h = (const char*)handle;
  for (i = 0; i < n; ++i) {
    const char* lo = (const char*)g_native_tables[i];
    const char* hi = (const char*)(g_native_tables[i] + g_native_sizes[i]);
    if (h >= lo && h < hi && (size_t)(h - lo) % sizeof(tvmrt_native_entry) == 0)
      return (const tvmrt_native_entry*)handle;
  }
  return NULL;
}

/* Blocks of closures (native.h): same publication rule as the tables. */
typedef struct {
  const char* base;
  size_t stride;
  int count;
  tvmrt_closure_fn fn;
  tvmrt_ffi_closure_fn ffi_fn; /* may be NULL: tvm-ffi calls are converted */
} closure_block;
static closure_block g_blocks[TVMRT_CLOSURE_BLOCKS];
static int g_block_count = 0;

int tvmrt_register_closure_block(const void* base, size_t stride, int count, tvmrt_closure_fn fn) {
  return tvmrt_register_closure_block_ffi(base, stride, count, fn, NULL);
}

int tvmrt_register_closure_block_ffi(const void* base, size_t stride, int count,
                                     tvmrt_closure_fn fn, tvmrt_ffi_closure_fn ffi_fn) {
  int n, status = 0;
  if (base == NULL || stride == 0 || count <= 0 || fn == NULL) return -1;
  pthread_mutex_lock(&g_native_mu);
  n = __atomic_load_n(&g_block_count, __ATOMIC_RELAXED);
  if (n == TVMRT_CLOSURE_BLOCKS) {
    status = -1;
  } else {
    g_blocks[n] = (closure_block){(const char*)base, stride, count, fn, ffi_fn};
    __atomic_store_n(&g_block_count, n + 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&g_native_mu);
  return status;
}

/* The block `handle` lies in, or NULL if it lies in no registered block. */
static const closure_block* block_of(const void* handle) {
  int i, n = __atomic_load_n(&g_block_count, __ATOMIC_ACQUIRE);
  const char* h = (const char*)handle;
  for (i = 0; i < n; ++i) {
    const closure_block* b = &g_blocks[i];
    if (h >= b->base && h < b->base + b->stride * (size_t)b->count &&
        (size_t)(h - b->base) % b->stride == 0)
      return b;
  }
  return NULL;
}

static tvmrt_closure_fn closure_of(const void* handle) {
  const closure_block* b = block_of(handle);
  return b != NULL ? b->fn : NULL;
}

TVM_DLL int TVMFuncCall(void* func, TVMValue* args, int* arg_type_codes, int num_args,
                        TVMValue* ret_val, int* ret_type_code) {
  const tvmrt_native_entry* native = native_entry_of(func);
  if (native != NULL) { /* a function tvmrt implements in C (sort.c): no Python */
    *ret_type_code = 4; /* kTVMNullptr: these return nothing */
    return native->fn(args, arg_type_codes, num_args, ret_val, ret_type_code);
  }
  tvmrt_closure_fn closure = closure_of(func);
  if (closure != NULL) { /* a C object (cuda_launch.c's launchers): no Python on its hot path */
    *ret_type_code = 4;
    return closure(func, args, arg_type_codes, num_args, ret_val, ret_type_code);
  }
  if (g_rt_funccall != NULL && (g_funccall == NULL || g_rt_owns_func(func)))
    return g_rt_funccall(func, args, arg_type_codes, num_args, ret_val, ret_type_code);
  if (g_funccall == NULL) {
    tvmrt_fail("", "%s", "TVMFuncCall: the tvmrt function environment is not set up");
    return -1;
  }
  return g_funccall(func, args, arg_type_codes, num_args, ret_val, ret_type_code);
}

/* ------------------------------------------------------------------------------------ */
/* tvm-ffi function environment                                                           */
/*                                                                                        */
/* tvm-ffi host code looks functions up (device kernels, __tvm_set_device, call_packed    */
/* externs) through TVMFFIEnvModLookupFromImports / TVMBackendGetFuncFromEnv and calls     */
/* them through TVMFFIFunctionCall with TVMFFIAny arguments. The lookup goes to the same   */
/* environment as the legacy ABI's (the library's context token names the module); the    */
/* call converts each TVMFFIAny to the legacy TVMValue + type code and goes through        */
/* TVMFuncCall. Only POD arguments are converted (no tvm-ffi objects: kernels pass none   */
/* to the functions tvmrt provides); the result is None.                                   */

typedef struct {
  int32_t type_index;
  uint32_t zero_padding;
  union {
    int64_t v_int64;
    double v_float64;
    void* v_ptr;
  } v;
} tvmrt_ffi_any; /* TVMFFIAny: 16 bytes */

enum { kFFINone = 0, kFFIInt = 1, kFFIBool = 2, kFFIFloat = 3, kFFIOpaquePtr = 4 };
enum { kFFIDataType = 5, kFFIDevice = 6, kFFIDLTensorPtr = 7, kFFIRawStr = 8 };
#define TVMRT_FFI_MAX_ARGS 256

TVM_DLL int tvmrt_ffi_get_func_from_env(void* mod_ctx, const char* func_name, void** out) {
  if (out != NULL) *out = NULL;
  return TVMBackendGetFuncFromEnv(mod_ctx, func_name, out);
}

TVM_DLL int tvmrt_ffi_env_mod_lookup_from_imports(void* library_ctx, const char* func_name,
                                                  void** out) {
  if (out != NULL) *out = NULL;
  return TVMBackendGetFuncFromEnv(library_ctx, func_name, out);
}

/* The legacy type code of a TVMFFIAny type index, or -1 for one tvmrt does not convert. */
static int legacy_code(int32_t type_index) {
  switch (type_index) {
    case kFFINone: return 4;        /* kTVMNullptr */
    case kFFIInt: return 0;         /* kDLInt */
    case kFFIBool: return 0;        /* kDLInt */
    case kFFIFloat: return 2;       /* kDLFloat */
    case kFFIOpaquePtr: return 3;   /* kTVMOpaqueHandle */
    case kFFIDataType: return 5;    /* kTVMDataType */
    case kFFIDevice: return 6;      /* kDLDevice */
    case kFFIDLTensorPtr: return 7; /* kTVMDLTensorHandle */
    case kFFIRawStr: return 11;     /* kTVMStr */
    default: return -1;
  }
}

TVM_DLL int tvmrt_ffi_function_call(void* func, void* args, int32_t num_args, void* result) {
  TVMValue values[TVMRT_FFI_MAX_ARGS];
  int codes[TVMRT_FFI_MAX_ARGS];
  const tvmrt_ffi_any* in = (const tvmrt_ffi_any*)args;
  tvmrt_ffi_any* out = (tvmrt_ffi_any*)result;
  TVMValue ret;
  int ret_code = 4;
  const closure_block* block;
  if (num_args < 0 || num_args > TVMRT_FFI_MAX_ARGS || (num_args > 0 && in == NULL)) {
    tvmrt_fail("RuntimeError", "TVMFFIFunctionCall: %d arguments (at most %d)", (int)num_args,
               TVMRT_FFI_MAX_ARGS);
    return -1;
  }
  block = block_of(func);
  if (block != NULL && block->ffi_fn != NULL) { /* it takes tvm-ffi's convention itself */
    if (out != NULL) memset(out, 0, sizeof(*out));
    return block->ffi_fn(func, (const TVMFFIAny*)args, num_args, (TVMFFIAny*)result);
  }
  for (int32_t i = 0; i < num_args; ++i) {
    codes[i] = legacy_code(in[i].type_index);
    if (codes[i] < 0) {
      tvmrt_fail("RuntimeError",
                 "TVMFFIFunctionCall: argument %d is a tvm-ffi object (type index %d); tvmrt "
                 "passes only numbers, pointers, tensors and strings to the functions it provides",
                 (int)i, (int)in[i].type_index);
      return -1;
    }
    memcpy(&values[i], &in[i].v, sizeof(TVMValue));
    if (in[i].type_index == kFFIBool) values[i].v_int64 = in[i].v.v_int64 != 0;
    if (in[i].type_index == kFFIOpaquePtr && in[i].zero_padding == TVMRT_FFI_OWNED &&
        g_rt_publish != NULL)
      g_rt_publish(in[i].v.v_ptr); /* one of the runtime's objects, now a handle */
  }
  int rc = TVMFuncCall(func, values, codes, num_args, &ret, &ret_code);
  if (out != NULL) { /* numbers, and the runtime's arrays and objects (their reference) */
    memset(out, 0, sizeof(*out));
    if (rc == 0 && ret_code == 0) {
      out->type_index = kFFIInt;
      out->v.v_int64 = ret.v_int64;
    } else if (rc == 0 && ret_code == 2) {
      out->type_index = kFFIFloat;
      out->v.v_float64 = ret.v_float64;
    } else if (rc == 0 && ret_code == 13) { /* kTVMNDArrayHandle: a DLTensor* of an array */
      out->type_index = kFFIDLTensorPtr;
      out->zero_padding = TVMRT_FFI_OWNED;
      out->v.v_ptr = ret.v_handle;
    } else if (rc == 0 && (ret_code == 8 || ret_code == 9 || ret_code == 10)) { /* objects */
      out->type_index = kFFIOpaquePtr;
      out->zero_padding = TVMRT_FFI_OWNED;
      out->v.v_ptr = ret.v_handle;
    } else if (rc == 0 && ret_code == 5) { /* kTVMDataType */
      out->type_index = kFFIDataType;
      out->v.v_int64 = ret.v_int64;
    }
  }
  return rc;
}

/* TVMFFIHandleInitOnce: run init_func once per handle (thread-safe). */
static pthread_mutex_t g_init_once_mu = PTHREAD_MUTEX_INITIALIZER;

TVM_DLL int tvmrt_ffi_handle_init_once(void** handle_addr, int (*init_func)(void** result)) {
  void* value;
  int rc = 0;
  if (handle_addr == NULL || init_func == NULL) {
    tvmrt_fail("RuntimeError", "%s", "TVMFFIHandleInitOnce: NULL handle address or init function");
    return -1;
  }
  if (__atomic_load_n(handle_addr, __ATOMIC_ACQUIRE) != NULL) return 0;
  pthread_mutex_lock(&g_init_once_mu);
  if (*handle_addr == NULL) {
    value = NULL;
    rc = init_func(&value);
    if (rc == 0) __atomic_store_n(handle_addr, value, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&g_init_once_mu);
  return rc;
}
