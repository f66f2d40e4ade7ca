/*
 * The global function registry (TVMFuncRegisterGlobal, TVMFuncGetGlobal,
 * TVMFuncListGlobalNames, TVMFuncRemoveGlobal) and the runtime's own global functions, one
 * table (k_builtins) read on lookup: nothing registers itself.
 *
 *   tvm.graph_executor.create / tvm.graph_runtime.create   (graph_json, lib, devices...)
 *   runtime.SystemLib / module._GetSystemLib               ([prefix])
 *   runtime.ModuleLoadFromFile                             (path[, format])
 *   tvm.contrib.sort.* and the other C-implemented contrib functions (sort.c)
 */
#include <stdlib.h>
#include <string.h>

#include "rt.h"

static int f_graph_create(void* self, TVMValue* args, int* codes, int n, TVMValue* ret,
                          int* rc) {
  tvmrt_module *lib, *exec;
  DLDevice dev;
  int first = 2;
  (void)self;
  if (n < 3) {
    return tvmrt_fail("InvalidArgumentError", "The expected number of arguments for "
                   "graph_executor.create is at least 4, but it has %d", n);
  }
  if (codes[0] != kTVMStr) {
    return tvmrt_fail("ArgumentTypeError", "tvm.graph_executor.create: graph_json must be a "
                   "string, got type code %d", codes[0]);
  }
  if (codes[1] != kTVMModuleHandle || (lib = tvmrt_module_check(args[1].v_handle)) == NULL) {
    return tvmrt_fail("ArgumentTypeError", "tvm.graph_executor.create: lib must be a Module, got "
                   "type code %d", codes[1]);
  }
  if (codes[2] == kTVMPackedFuncHandle || codes[2] == kTVMNullptr) first = 3; /* linked params */
  if (tvmrt_device_args(args, codes, first, n, &dev, "tvm.graph_executor.create") != 0) return -1;
  exec = tvmrt_graph_executor_create(args[0].v_str, strlen(args[0].v_str), lib, dev);
  if (exec == NULL) return -1;
  ret->v_handle = exec;
  *rc = kTVMModuleHandle;
  return 0;
}

static int f_system_lib(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  tvmrt_module* m;
  (void)self;
  if (n > 1 || (n == 1 && codes[0] != kTVMStr)) {
    return tvmrt_fail("ArgumentTypeError", "runtime.SystemLib takes an optional symbol prefix");
  }
  m = tvmrt_system_lib(n == 1 ? args[0].v_str : "");
  if (m == NULL) return -1;
  ret->v_handle = m;
  *rc = kTVMModuleHandle;
  return 0;
}

static int f_load_from_file(void* self, TVMValue* args, int* codes, int n, TVMValue* ret,
                            int* rc) {
  (void)self;
  if (n < 1 || n > 2 || codes[0] != kTVMStr || (n == 2 && codes[1] != kTVMStr)) {
    return tvmrt_fail("ArgumentTypeError", "runtime.ModuleLoadFromFile takes (path[, format])");
  }
  if (TVMModLoadFromFile(args[0].v_str, n == 2 ? args[1].v_str : "", &ret->v_handle) != 0) {
    return -1;
  }
  *rc = kTVMModuleHandle;
  return 0;
}

/* a C-implemented contrib function (sort.c) behind a registry handle */
static int f_native(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  return TVMFuncCall(self, args, codes, n, ret, rc);
}

static const struct {
  const char* name;
  tvmrt_fn fn;
} k_builtins[] = {
    {"tvm.graph_executor.create", f_graph_create},
    {"tvm.graph_runtime.create", f_graph_create},
    {"runtime.SystemLib", f_system_lib},
    {"module._GetSystemLib", f_system_lib},
    {"runtime.ModuleLoadFromFile", f_load_from_file},
};
#define NUM_BUILTINS (sizeof(k_builtins) / sizeof(k_builtins[0]))

typedef struct entry {
  char* name;
  tvmrt_func* func;
  struct entry* next;
} entry;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static entry* g_user;         /* TVMFuncRegisterGlobal'd functions (they win) */
static const char** g_names;  /* TVMFuncListGlobalNames' answer */

static entry* find_user(const char* name) {
  entry* e;
  for (e = g_user; e != NULL; e = e->next) {
    if (strcmp(e->name, name) == 0) return e;
  }
  return NULL;
}

tvmrt_func* tvmrt_registry_get(const char* name) {
  entry* e;
  size_t i;
  const void* native;
  pthread_mutex_lock(&g_mu);
  e = find_user(name);
  if (e != NULL) {
    tvmrt_retain(&e->func->hdr);
    pthread_mutex_unlock(&g_mu);
    return e->func;
  }
  pthread_mutex_unlock(&g_mu);
  for (i = 0; i < NUM_BUILTINS; ++i) {
    if (strcmp(k_builtins[i].name, name) == 0) return tvmrt_func_new(k_builtins[i].fn, NULL, NULL);
  }
  native = tvmrt_native_function(name);
  if (native != NULL) return tvmrt_func_new(f_native, (void*)native, NULL);
  return NULL;
}

RT_API int TVMFuncGetGlobal(const char* name, TVMFunctionHandle* out) {
  tvmrt_init();
  if (name == NULL || out == NULL) {
    return tvmrt_fail("InvalidArgumentError", "TVMFuncGetGlobal: name and out are required");
  }
  *out = tvmrt_registry_get(name); /* NULL when absent, as TVM */
  return 0;
}

RT_API int TVMFuncRegisterGlobal(const char* name, TVMFunctionHandle f, int override) {
  tvmrt_func* func;
  entry* e;
  tvmrt_init();
  if (name == NULL) return tvmrt_fail("InvalidArgumentError", "TVMFuncRegisterGlobal: no name");
  if ((func = tvmrt_func_check(f)) == NULL) return -1;
  pthread_mutex_lock(&g_mu);
  e = find_user(name);
  if (e != NULL && !override) {
    pthread_mutex_unlock(&g_mu);
    return tvmrt_fail("FunctionAlreadyRegisteredError", "Global PackedFunc %.200s is already "
                   "registered", name);
  }
  if (e == NULL) {
    e = (entry*)calloc(1, sizeof(entry));
    if (e == NULL || (e->name = strdup(name)) == NULL) {
      free(e);
      pthread_mutex_unlock(&g_mu);
      return tvmrt_fail("DeviceOutOfMemoryError", "cannot register %.200s", name);
    }
    e->next = g_user;
    g_user = e;
  } else {
    tvmrt_release(&e->func->hdr);
  }
  tvmrt_retain(&func->hdr);
  e->func = func;
  pthread_mutex_unlock(&g_mu);
  return 0;
}

RT_API int TVMFuncRemoveGlobal(const char* name) {
  entry **p, *e;
  if (name == NULL) return tvmrt_fail("InvalidArgumentError", "TVMFuncRemoveGlobal: no name");
  pthread_mutex_lock(&g_mu);
  for (p = &g_user; (e = *p) != NULL; p = &e->next) {
    if (strcmp(e->name, name) == 0) {
      *p = e->next;
      tvmrt_release(&e->func->hdr);
      free(e->name);
      free(e);
      break;
    }
  }
  pthread_mutex_unlock(&g_mu);
  return 0;
}

RT_API int TVMFuncListGlobalNames(int* out_size, const char*** out_array) {
  size_t n = NUM_BUILTINS, i = 0;
  entry* e;
  const char** names;
  if (out_size == NULL || out_array == NULL) {
    return tvmrt_fail("InvalidArgumentError", "TVMFuncListGlobalNames: outputs are required");
  }
  pthread_mutex_lock(&g_mu);
  for (e = g_user; e != NULL; e = e->next) ++n;
  names = (const char**)realloc((void*)g_names, (n ? n : 1) * sizeof(char*));
  if (names == NULL) {
    pthread_mutex_unlock(&g_mu);
    return tvmrt_fail("DeviceOutOfMemoryError", "cannot list global functions");
  }
  g_names = names;
  for (e = g_user; e != NULL; e = e->next) names[i++] = e->name;
  for (n = 0; n < NUM_BUILTINS; ++n) names[i++] = k_builtins[n].name;
  pthread_mutex_unlock(&g_mu);
  *out_size = (int)i;
  *out_array = names;
  return 0;
}
