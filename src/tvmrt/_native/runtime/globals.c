/*
 * The top of the C runtime: the runtime's own global functions, one table (k_builtins)
 * read on lookup (nothing registers itself), the lookup of every global function
 * (registered ones first: registry.c; then k_builtins; then the C-implemented contrib
 * functions of sort.c), the function environment kernels see, and the entry points that set
 * the runtime up before they hand out a module or function (tvmrt_init).
 *
 *   tvm.graph_executor.create / tvm.graph_runtime.create   (graph_json, lib, devices...)
 *   tvm.graph_executor_debug.create                        (the same; graph_debug.c)
 *   runtime.SystemLib / module._GetSystemLib               ([prefix])
 *   runtime.ModuleLoadFromFile                             (path[, format])
 *   tvm.aot_executor.create                                (lib, device[, model name])
 *   __tvm_set_device                                       (device_type, device_id)
 *   tvm.contrib.sort.* and the other C-implemented contrib functions (sort.c)
 */
#include <stdlib.h>
#include <string.h>

#include "relax.h"
#include "rt.h"
#include "vm.h"

/* ---------------------------------------------------------------------------------- */
/* the runtime's own global functions                                                  */

/* tvm.graph_executor.create, or (`debug`) tvm.graph_executor_debug.create, named `fn` */
static int graph_create(TVMValue* args, int* codes, int n, TVMValue* ret, int* rc, const char* fn,
                        int debug) {
  tvmrt_module *lib, *exec;
  DLDevice devs[TVMRT_GE_MAX_DEVICES];
  size_t num_devs;
  int first = 2;
  if (n < 3) {
    return tvmrt_fail("InvalidArgumentError",
                      "The expected number of arguments for "
                      "%s is at least 4, but it has %d",
                      fn + 4, n);
  }
  if (codes[0] != kTVMStr) {
    return tvmrt_fail("ArgumentTypeError",
                      "%s: graph_json must be a "
                      "string, got type code %d",
                      fn, codes[0]);
  }
  if (codes[1] != kTVMModuleHandle || (lib = tvmrt_module_check(args[1].v_handle)) == NULL) {
    return tvmrt_fail("ArgumentTypeError",
                      "%s: lib must be a Module, got "
                      "type code %d",
                      fn, codes[1]);
  }
  if (codes[2] == kTVMPackedFuncHandle || codes[2] == kTVMNullptr) first = 3; /* linked params */
  if (tvmrt_device_list(args, codes, first, n, devs, TVMRT_GE_MAX_DEVICES, &num_devs, fn) != 0) {
    return -1;
  }
  exec = (debug ? tvmrt_graph_executor_debug_create : tvmrt_graph_executor_create)(
      args[0].v_str, strlen(args[0].v_str), lib, devs, num_devs);
  if (exec == NULL) return -1;
  ret->v_handle = exec;
  *rc = kTVMModuleHandle;
  return 0;
}

static int f_graph_create(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  (void)self;
  return graph_create(args, codes, n, ret, rc, "tvm.graph_executor.create", 0);
}

static int f_graph_debug_create(void* self, TVMValue* args, int* codes, int n, TVMValue* ret,
                                int* rc) {
  (void)self;
  return graph_create(args, codes, n, ret, rc, "tvm.graph_executor_debug.create", 1);
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

static int f_load_from_file(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
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

/* TVM's module reflection: runtime.ModuleGetTypeKey(mod), ModuleImportsSize(mod),
   ModuleGetImport(mod, i) */
static int f_module_info(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  const char* which = (const char*)self;
  tvmrt_module* m;
  if (n < 1 || codes[0] != kTVMModuleHandle || (m = tvmrt_module_check(args[0].v_handle)) == NULL)
    return tvmrt_fail("ArgumentTypeError", "runtime.%s takes a Module", which);
  if (strcmp(which, "ModuleGetTypeKey") == 0) {
    ret->v_str = m->type_key; /* lives as long as the module */
    *rc = kTVMStr;
  } else if (strcmp(which, "ModuleImportsSize") == 0) {
    ret->v_int64 = (int64_t)m->num_imports;
    *rc = kDLInt;
  } else {
    if (n != 2 || codes[1] != kDLInt || args[1].v_int64 < 0 ||
        (uint64_t)args[1].v_int64 >= m->num_imports) {
      return tvmrt_fail("IndexOutOfRangeError",
                        "runtime.ModuleGetImport: the module has %zu "
                        "imports",
                        m->num_imports);
    }
    tvmrt_retain(&m->imports[args[1].v_int64]->hdr);
    ret->v_handle = m->imports[args[1].v_int64];
    *rc = kTVMModuleHandle;
  }
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
    {"tvm.graph_executor_debug.create", f_graph_debug_create},
    {"runtime.SystemLib", f_system_lib},
    {"module._GetSystemLib", f_system_lib},
    {"runtime.ModuleLoadFromFile", f_load_from_file},
    {"tvm.aot_executor.create", tvmrt_aot_global_create},
    {"__tvm_set_device", tvmrt_set_device},
    {"runtime.GetDeviceAttr", tvmrt_get_device_attr},
    {"runtime.ModuleGetTypeKey", f_module_info},
    {"runtime.ModuleImportsSize", f_module_info},
    {"runtime.ModuleGetImport", f_module_info},
};
#define NUM_BUILTINS (sizeof(k_builtins) / sizeof(k_builtins[0]))

tvmrt_func* tvmrt_registry_get(const char* name) {
  tvmrt_func* f = tvmrt_registry_find(name);
  size_t i;
  const void* native;
  if (f != NULL) return f;
  for (i = 0; i < NUM_BUILTINS; ++i) {
    if (strcmp(k_builtins[i].name, name) == 0) /* the name after "runtime." for the shared ones */
      return tvmrt_func_new(k_builtins[i].fn, (void*)(k_builtins[i].name + 8), NULL);
  }
  if ((f = tvmrt_vm_global(name)) != NULL) return f; /* the Relay VM's (vm_exec.c) */
  if ((f = tvmrt_rx_global(name)) != NULL) return f; /* the Relax VM's values (relax_exec.c) */
  if ((f = tvmrt_rx_builtin_global(name)) != NULL) return f; /* its builtins, for compiled code */
  native = tvmrt_native_function(name);
  if (native != NULL) return tvmrt_func_new(f_native, (void*)native, NULL);
  return NULL;
}

TVM_DLL int TVMFuncGetGlobal(const char* name, TVMFunctionHandle* out) {
  tvmrt_init();
  if (name == NULL || out == NULL) {
    return tvmrt_fail("InvalidArgumentError", "TVMFuncGetGlobal: name and out are required");
  }
  *out = tvmrt_registry_get(name); /* NULL when absent, as TVM */
  return 0;
}

TVM_DLL int TVMFuncListGlobalNames(int* out_size, const char*** out_array) {
  const char* builtin_names[NUM_BUILTINS + 32];
  size_t i, k, num_vm = 0;
  const char* const* vm_names = tvmrt_vm_global_names(&num_vm);
  const char* name;
  if (out_size == NULL || out_array == NULL) {
    return tvmrt_fail("InvalidArgumentError", "TVMFuncListGlobalNames: outputs are required");
  }
  for (i = 0; i < NUM_BUILTINS; ++i) builtin_names[i] = k_builtins[i].name;
  for (k = 0; k < num_vm && i < NUM_BUILTINS + 16; ++k) builtin_names[i++] = vm_names[k];
  for (k = 0; (name = tvmrt_rx_global_name(k)) != NULL && i < NUM_BUILTINS + 32; ++k)
    builtin_names[i++] = name;
  return tvmrt_registry_names(builtin_names, i, out_size, out_array);
}

/* ---------------------------------------------------------------------------------- */
/* entry points that hand out modules and functions                                    */

/* The module of one blob entry of type `key`, read from the start of data[0, size): how a
   module tree read elsewhere (Python's blob reader, runtime/loaders/opencl.py) gets the C
   runtime's device module. *consumed is the entry's length (a blob does not store it);
   `what` names the bytes in messages. */
TVM_DLL int tvmrt_module_load_binary(const char* key, const void* data, size_t size,
                                     const char* what, size_t* consumed, TVMModuleHandle* out) {
  tvmrt_reader r;
  tvmrt_blob_loader_fn load;
  tvmrt_module* mod;
  tvmrt_init();
  if (key == NULL || (data == NULL && size != 0) || consumed == NULL || out == NULL) {
    return tvmrt_fail("InvalidArgumentError",
                      "tvmrt_module_load_binary: key, data, consumed and out are required");
  }
  *out = NULL;
  *consumed = 0;
  if ((load = tvmrt_blob_loader(key)) == NULL) {
    return tvmrt_fail("ModuleLoadError", "libtvmrt_runtime has no loader of '%.100s' modules", key);
  }
  memset(&r, 0, sizeof(r));
  r.data = (const uint8_t*)data;
  r.size = size;
  r.what = what != NULL ? what : key;
  r.error = "ModuleLoadError";
  if ((mod = load(&r)) == NULL) return -1;
  *consumed = r.off;
  *out = mod;
  return 0;
}

TVM_DLL int TVMFuncCreateFromCFunc(TVMPackedCFunc func, void* resource_handle,
                                   TVMPackedCFuncFinalizer fin, TVMFunctionHandle* out) {
  tvmrt_func* f;
  tvmrt_init();
  if (func == NULL || out == NULL) {
    return tvmrt_fail("InvalidArgumentError", "TVMFuncCreateFromCFunc: func and out are required");
  }
  f = tvmrt_func_c(func, fin, resource_handle);
  if (f == NULL) return -1;
  *out = f;
  return 0;
}

/* "so" for "a/b/deploy_lib.so", "" without an extension */
static const char* file_format(const char* path) {
  const char* slash = strrchr(path, '/');
  const char* dot = strrchr(path, '.');
  if (dot == NULL || (slash != NULL && dot < slash)) return "";
  return dot + 1;
}

TVM_DLL int TVMModLoadFromFile(const char* file_name, const char* format, TVMModuleHandle* out) {
  const char* fmt;
  tvmrt_module* m;
  tvmrt_init();
  if (file_name == NULL || out == NULL) {
    return tvmrt_fail("InvalidArgumentError", "TVMModLoadFromFile: file_name and out are required");
  }
  *out = NULL;
  fmt = (format != NULL && *format != '\0') ? format : file_format(file_name);
  if (strcmp(fmt, "so") != 0 && strcmp(fmt, "dylib") != 0 && strcmp(fmt, "dso") != 0) {
    return tvmrt_fail("ModuleLoadError",
                      "Cannot load %s: format '%s' is not supported by libtvmrt_runtime; it "
                      "loads shared libraries (so); link .o/.tar exports into one first",
                      file_name, fmt);
  }
  m = tvmrt_load_dso(file_name);
  if (m == NULL) return -1;
  *out = m;
  return 0;
}

TVM_DLL int TVMModLoadFromMemory(const void* data, size_t size, const char* format,
                                 TVMModuleHandle* out) {
  tvmrt_module* m;
  tvmrt_init();
  if (data == NULL || out == NULL) {
    return tvmrt_fail("InvalidArgumentError", "TVMModLoadFromMemory: data and out are required");
  }
  *out = NULL;
  if (format != NULL && *format != '\0' && strcmp(format, "so") != 0 &&
      strcmp(format, "dso") != 0) {
    return tvmrt_fail("ModuleLoadError",
                      "TVMModLoadFromMemory: format '%s' is not supported by libtvmrt_runtime; "
                      "it loads shared libraries (so); link .o/.tar exports into one first",
                      format);
  }
  m = tvmrt_load_dso_memory(data, size);
  if (m == NULL) return -1;
  *out = m;
  return 0;
}

/* ---------------------------------------------------------------------------------- */
/* the function environment kernels see, and the one-time set-up                      */

/* TVMBackendGetFuncFromEnv: the module, its imports, then the global functions */

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
  if (!tvmrt_object_live(mod, RT_MAGIC_MODULE)) {
    return tvmrt_fail("FunctionNotFoundError",
                      "Cannot find %s: the kernel library's module context is not set", name);
  }
  pthread_mutex_lock(&mod->env_mu);
  for (e = mod->env; e != NULL; e = e->next) {
    if (strcmp(e->name, name) == 0) {
      *out = e->handle;
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
  e->handle = tvmrt_rx_builtin_handle_of(f);
  if (e->handle == NULL) e->handle = f;
  e->next = mod->env;
  mod->env = e;
  *out = e->handle;
  pthread_mutex_unlock(&mod->env_mu);
  return 0;
}

static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static int owns_module(const void* handle) { return tvmrt_object_live(handle, RT_MAGIC_MODULE); }
static int owns_func(const void* handle) { return tvmrt_object_live(handle, RT_MAGIC_FUNC); }
static void publish(void* object) { tvmrt_object_publish((tvmrt_object*)object); }

/* The library is the process's one copy of the services. From the moment it loads, the
   function environment answers for the runtime's own modules and functions (the host,
   Python, for the rest) and each device backend's workspace has the runtime's pool (where the
   host installs none); at the first C API call, the thread pool takes TVM_NUM_THREADS unless a host
   sized it already. */
__attribute__((constructor)) static void at_load(void) {
  size_t i, n;
  const tvmrt_device_backend* const* backends = tvmrt_device_backend_list(&n);
  tvmrt_set_runtime_env(owns_module, env_lookup, owns_func, tvmrt_func_call);
  tvmrt_set_runtime_publish(publish);
  for (i = 0; i < n; ++i) {
    tvmrt_set_runtime_device_workspace(backends[i]->device_type, tvmrt_device_workspace_alloc,
                                       tvmrt_device_workspace_free);
  }
}

static void init_once(void) {
  const char* env = getenv("TVM_NUM_THREADS");
  if (env == NULL || *env == '\0') env = getenv("OMP_NUM_THREADS");
  if (env != NULL && *env != '\0') {
    char* end = NULL;
    long n = strtol(env, &end, 10);
    if (end != env && *end == '\0' && n > 0 && n <= 1024) tvmrt_set_num_threads_unless_set((int)n);
  }
}

void tvmrt_init(void) { pthread_once(&g_once, init_once); }
