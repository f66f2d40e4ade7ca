/*
 * The blob entries of a Relay AOT build (v0.19 aot_executor_factory.cc, metadata_module.cc):
 * "AotExecutorFactory" (params, model name; `factory["default"](dev)` creates an AOT
 * executor over its import with the params set, `remove_params` a factory without them) and
 * "metadata_module" (no bytes, no functions of its own: the metadata is the kernel
 * library's `get_c_metadata`, found through its import); and the global
 * `tvm.aot_executor.create(lib, dev[, model])`, the CRT's face.
 */
#include <stdlib.h>
#include <string.h>

#include "rt.h"

typedef struct {
  tvmrt_params params;
  char* name;
} aot_factory;

static int f_create(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  tvmrt_module* mod = (tvmrt_module*)self;
  aot_factory* f = (aot_factory*)mod->impl;
  tvmrt_module* exec;
  DLDevice dev;
  if (tvmrt_device_args(args, codes, 0, n, &dev, f->name) != 0) return -1;
  if (n != 1 && !(n == 2 && codes[0] == kDLInt)) { /* TVM's words */
    return tvmrt_fail("InvalidArgumentError", "Expect exactly 1 device passed.");
  }
  if (mod->num_imports == 0) {
    return tvmrt_fail("ModuleLoadError", "the AOT executor factory has no library imported");
  }
  exec = tvmrt_aot_executor_create(mod->imports[0], dev);
  if (exec == NULL) return -1;
  if (tvmrt_aot_set_params(exec, &f->params) != 0) {
    tvmrt_release(&exec->hdr);
    return -1;
  }
  ret->v_handle = exec;
  *rc = kTVMModuleHandle;
  return 0;
}

static tvmrt_module* new_factory(char* name, tvmrt_params params);

static int f_remove_params(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  tvmrt_module* mod = (tvmrt_module*)self;
  tvmrt_params none;
  tvmrt_module* out;
  char* name = strdup(((aot_factory*)mod->impl)->name);
  (void)args, (void)codes;
  if (n != 0) {
    free(name);
    return tvmrt_fail("InvalidArgumentError", "remove_params takes no arguments");
  }
  if (name == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot copy a name");
  memset(&none, 0, sizeof(none));
  out = new_factory(name, none);
  if (out == NULL) return -1;
  if (mod->num_imports > 0 && tvmrt_module_import(out, mod->imports[0]) != 0) {
    tvmrt_release(&out->hdr);
    return -1;
  }
  ret->v_handle = out;
  *rc = kTVMModuleHandle;
  return 0;
}

static tvmrt_func* factory_lookup(tvmrt_module* mod, const char* name) {
  aot_factory* f = (aot_factory*)mod->impl;
  if (strcmp(name, f->name) == 0) return tvmrt_func_new(f_create, mod, &mod->hdr);
  if (strcmp(name, "remove_params") == 0) return tvmrt_func_new(f_remove_params, mod, &mod->hdr);
  return NULL; /* list_module_names returns a TVM Array: no object system here */
}

static void factory_free(aot_factory* f) {
  tvmrt_params_free(&f->params);
  free(f->name);
  free(f);
}

static void factory_finalize(tvmrt_module* mod) { factory_free((aot_factory*)mod->impl); }

/* takes name and params over, also on failure */
static tvmrt_module* new_factory(char* name, tvmrt_params params) {
  aot_factory* f = (aot_factory*)calloc(1, sizeof(aot_factory));
  tvmrt_module* mod;
  if (f == NULL) {
    free(name);
    tvmrt_params_free(&params);
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate an AOT factory");
    return NULL;
  }
  f->name = name;
  f->params = params;
  mod = tvmrt_module_new("AotExecutorFactory", f);
  if (mod == NULL) {
    factory_free(f);
    return NULL;
  }
  mod->lookup = factory_lookup;
  mod->finalize = factory_finalize;
  return mod;
}

tvmrt_module* tvmrt_aot_factory_load(tvmrt_reader* r) {
  tvmrt_params p;
  char* name = NULL;
  if (tvmrt_read_factory_params(r, "AOT factory lists", &p) != 0) return NULL;
  if (tvmrt_read_str(r, &name, NULL, "module_name") != 0) {
    tvmrt_params_free(&p);
    return NULL;
  }
  return new_factory(name, p);
}

static tvmrt_func* no_functions(tvmrt_module* mod, const char* name) {
  (void)mod, (void)name;
  return NULL;
}

tvmrt_module* tvmrt_aot_metadata_load(tvmrt_reader* r) {
  tvmrt_module* mod;
  (void)r; /* metadata_module writes no bytes */
  mod = tvmrt_module_new("metadata_module", NULL);
  if (mod != NULL) mod->lookup = no_functions;
  return mod;
}

int tvmrt_aot_global_create(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  tvmrt_module *lib, *exec;
  DLDevice dev;
  (void)self;
  if (n < 2 || codes[0] != kTVMModuleHandle ||
      (lib = tvmrt_module_check(args[0].v_handle)) == NULL) {
    return tvmrt_fail("ArgumentTypeError",
                      "tvm.aot_executor.create takes (module, device[, model name])");
  }
  if (tvmrt_device_args(args, codes, 1, n, &dev, "tvm.aot_executor.create") != 0) return -1;
  if (n > 2 + (codes[1] == kDLInt) + 1 ||
      (n == 3 + (codes[1] == kDLInt) && codes[n - 1] != kTVMStr)) {
    return tvmrt_fail("ArgumentTypeError",
                      "tvm.aot_executor.create takes (module, device[, model name])");
  }
  if (n == 3 + (codes[1] == kDLInt) && strcmp(lib->type_key, "AotExecutorFactory") == 0) {
    /* the factory's own function: its params set */
    tvmrt_func* f = tvmrt_module_get(lib, args[n - 1].v_str, 0);
    int status;
    if (f == NULL) {
      return tvmrt_fail("FunctionNotFoundError", "the AOT factory has no model '%.200s'",
                        args[n - 1].v_str);
    }
    status = tvmrt_func_call(f, args + 1, codes + 1, n - 2, ret, rc);
    tvmrt_release(&f->hdr);
    return status;
  }
  exec = tvmrt_aot_executor_create(lib, dev);
  if (exec == NULL) return -1;
  ret->v_handle = exec;
  *rc = kTVMModuleHandle;
  return 0;
}
