/*
 * The graph executor factory (type key "GraphExecutorFactory"): what a `relay.build`
 * export carries in its blob (graph JSON, params, module name). `lib["default"](dev)`
 * builds a graph executor over the factory's import (the kernel library) with the params
 * copied in, as TVM's GraphExecutorFactory::ExecutorCreate; `debug_create(name, dev)` a
 * debug executor (graph_debug.c) the same way.
 */
#include <stdlib.h>
#include <string.h>

#include "rt.h"

typedef struct {
  char* json;
  size_t json_len;
  tvmrt_params params;
  char* name;
} factory_impl;

/* an executor (`debug`: a debug executor) over the factory's import with its params copied
   in, on the devices args[first..] */
static int create(tvmrt_module* mod, TVMValue* args, int* codes, int first, int n, int debug,
                  TVMValue* ret, int* rc) {
  factory_impl* impl = (factory_impl*)mod->impl;
  tvmrt_module* exec;
  DLDevice devs[TVMRT_GE_MAX_DEVICES];
  size_t num_devs;
  if (tvmrt_device_list(args, codes, first, n, devs, TVMRT_GE_MAX_DEVICES, &num_devs,
                        debug ? "debug_create" : impl->name) != 0)
    return -1;
  if (mod->num_imports == 0) {
    return tvmrt_fail("ModuleLoadError",
                      "GraphExecutorFactory: the factory imports no kernel "
                      "library");
  }
  exec = (debug ? tvmrt_graph_executor_debug_create : tvmrt_graph_executor_create)(
      impl->json, impl->json_len, mod->imports[0], devs, num_devs);
  if (exec == NULL) return -1;
  if (tvmrt_graph_set_params(exec, &impl->params, 1) != 0) {
    tvmrt_release(&exec->hdr);
    return -1;
  }
  ret->v_handle = exec;
  *rc = kTVMModuleHandle;
  return 0;
}

static int f_default(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  return create((tvmrt_module*)self, args, codes, 0, n, 0, ret, rc);
}

/* debug_create(module_name, devices...): TVM's, the Python runtime's words */
static int f_debug_create(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  tvmrt_module* mod = (tvmrt_module*)self;
  const char* held = ((factory_impl*)mod->impl)->name;
  if (n < 1 || codes[0] != kTVMStr) {
    return tvmrt_fail("ArgumentTypeError", "debug_create takes the model's name, then its devices");
  }
  if (strcmp(args[0].v_str, held) != 0) {
    return tvmrt_fail("TVMError",
                      "debug_create: the factory holds model '%.200s', not '%.200s' (Currently "
                      "we only support single model for now.)",
                      held, args[0].v_str);
  }
  return create(mod, args, codes, 1, n, 1, ret, rc);
}

static int f_get_graph_json(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  if (n != 0) return tvmrt_fail("InvalidArgumentError", "get_graph_json takes no arguments");
  ret->v_str = ((factory_impl*)((tvmrt_module*)self)->impl)->json;
  *rc = kTVMStr;
  return 0;
}

static tvmrt_func* factory_lookup(tvmrt_module* mod, const char* name) {
  factory_impl* impl = (factory_impl*)mod->impl;
  if (strcmp(name, impl->name) == 0) return tvmrt_func_new(f_default, mod, &mod->hdr);
  if (strcmp(name, "get_graph_json") == 0) return tvmrt_func_new(f_get_graph_json, mod, &mod->hdr);
  if (strcmp(name, "debug_create") == 0) return tvmrt_func_new(f_debug_create, mod, &mod->hdr);
  return NULL;
}

static void factory_free(factory_impl* impl) {
  free(impl->json);
  tvmrt_params_free(&impl->params);
  free(impl->name);
  free(impl);
}

static void factory_finalize(tvmrt_module* mod) { factory_free((factory_impl*)mod->impl); }

tvmrt_module* tvmrt_graph_factory_load(tvmrt_reader* r) {
  factory_impl* impl = (factory_impl*)calloc(1, sizeof(factory_impl));
  tvmrt_module* mod;
  if (impl == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate a factory");
    return NULL;
  }
  if (tvmrt_read_str(r, &impl->json, &impl->json_len, "graph JSON") != 0 ||
      tvmrt_read_factory_params(r, "GraphExecutorFactory:", &impl->params) != 0) {
    goto fail;
  }
  if (tvmrt_read_str(r, &impl->name, NULL, "module name") != 0) goto fail;
  mod = tvmrt_module_new("GraphExecutorFactory", impl);
  if (mod == NULL) goto fail;
  mod->lookup = factory_lookup;
  mod->finalize = factory_finalize;
  return mod;
fail:
  factory_free(impl);
  return NULL;
}
