/*
 * The function environment kernels see: TVMBackendGetFuncFromEnv and TVMFuncCall,
 * forwarded to callbacks the host installs (the Python side or the C runtime), the
 * tables of functions implemented in C (sort.c), and the tvm-ffi lookups tvmrt does not
 * serve (see services.c for the whole picture).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "services.h"

/* ------------------------------------------------------------------------------------ */
/* Function environment, forwarded to callbacks installed by the Python side             */

static tvmrt_getfunc_cb g_getfunc;
static tvmrt_funccall_cb g_funccall;

TVM_DLL void tvmrt_set_env_callbacks(tvmrt_getfunc_cb getfunc, tvmrt_funccall_cb funccall) {
  g_getfunc = getfunc;
  g_funccall = funccall;
}

TVM_DLL int TVMBackendGetFuncFromEnv(void* mod_node, const char* func_name, void** out) {
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

TVM_DLL int TVMFuncCall(void* func, TVMValue* args, int* arg_type_codes, int num_args,
                        TVMValue* ret_val, int* ret_type_code) {
  const tvmrt_native_entry* native = native_entry_of(func);
  if (native != NULL) { /* a function tvmrt implements in C (sort.c): no Python */
    *ret_type_code = 4; /* kTVMNullptr: these return nothing */
    return native->fn(args, arg_type_codes, num_args, ret_val, ret_type_code);
  }
  if (g_funccall == NULL) {
    tvmrt_fail("", "%s", "TVMFuncCall: the tvmrt function environment is not set up");
    return -1;
  }
  return g_funccall(func, args, arg_type_codes, num_args, ret_val, ret_type_code);
}

/* ------------------------------------------------------------------------------------ */
/* tvm-ffi function environment: not served                                              */
/*                                                                                        */
/* tvm-ffi kernels look functions up (call_packed externs, device launches) through       */
/* TVMBackendGetFuncFromEnv / TVMFFIEnvModLookupFromImports and call them through         */
/* TVMFFIFunctionCall with TVMFFIAny arguments. tvmrt has no tvm-ffi function objects to  */
/* hand out, so these report a clear error instead of running the legacy ABI's versions   */
/* (whose handles and argument layout differ).                                             */

static int ffi_lookup_unsupported(const char* service, const char* func_name) {
  char buf[320];
  snprintf(buf, sizeof(buf),
           "%s: the kernel looks up function '%s' (a call_packed extern or device kernel); "
           "tvmrt does not provide tvm-ffi functions to kernels",
           service, func_name != NULL ? func_name : "");
  tvmrt_fail("RuntimeError", "%s", buf);
  return -1;
}

TVM_DLL int tvmrt_ffi_get_func_from_env(void* mod_ctx, const char* func_name, void** out) {
  if (out != NULL) *out = NULL;
  return ffi_lookup_unsupported("TVMBackendGetFuncFromEnv", func_name);
}

TVM_DLL int tvmrt_ffi_env_mod_lookup_from_imports(void* library_ctx, const char* func_name,
                                                  void** out) {
  if (out != NULL) *out = NULL;
  return ffi_lookup_unsupported("TVMFFIEnvModLookupFromImports", func_name);
}

TVM_DLL int tvmrt_ffi_function_call(void* func, void* args, int32_t num_args, void* result) {
  tvmrt_fail("RuntimeError", "%s",
             "TVMFFIFunctionCall: tvmrt does not provide tvm-ffi functions to "
             "kernels");
  return -1;
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
