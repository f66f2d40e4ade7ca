/*
 * Modules: the object, its imports, function lookup, and the module part of TVM's C API
 * (TVMModGetFunction, TVMModImport, TVMModFree; TVMModLoadFromFile is in globals.c).
 */
#include <stdlib.h>
#include <string.h>

#include "rt.h"

static void module_destroy(tvmrt_object* obj) {
  tvmrt_module* m = (tvmrt_module*)obj;
  tvmrt_env_entry* e = m->env;
  size_t i;
  while (e != NULL) {
    tvmrt_env_entry* next = e->next;
    tvmrt_release(&e->func->hdr);
    free(e->name);
    free(e);
    e = next;
  }
  if (m->finalize != NULL) m->finalize(m);
  for (i = 0; i < m->num_imports; ++i) tvmrt_release(&m->imports[i]->hdr);
  free(m->imports);
  pthread_mutex_destroy(&m->env_mu);
  m->hdr.magic = 0;
  free(m);
}

tvmrt_module* tvmrt_module_new(const char* type_key, void* impl) {
  tvmrt_module* m = (tvmrt_module*)calloc(1, sizeof(tvmrt_module));
  if (m == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate a module");
    return NULL;
  }
  if (tvmrt_object_init(&m->hdr, RT_MAGIC_MODULE, module_destroy) != 0) {
    free(m);
    return NULL;
  }
  strncpy(m->type_key, type_key, sizeof(m->type_key) - 1);
  m->impl = impl;
  pthread_mutex_init(&m->env_mu, NULL);
  return m;
}

tvmrt_module* tvmrt_module_check(void* handle) {
  tvmrt_module* m = (tvmrt_module*)handle;
  if (!tvmrt_object_live(m, RT_MAGIC_MODULE)) {
    tvmrt_fail("ArgumentTypeError",
               "expected a Module handle, got %p (not a live module: freed already?)", handle);
    return NULL;
  }
  return m;
}

int tvmrt_module_import(tvmrt_module* mod, tvmrt_module* dep) {
  size_t i;
  for (i = 0; i < dep->num_imports; ++i) { /* a direct cycle would never be freed */
    if (dep->imports[i] == mod) {
      return tvmrt_fail("InvalidArgumentError", "Cyclic dependency detected during import");
    }
  }
  if (dep == mod) return tvmrt_fail("InvalidArgumentError", "a module cannot import itself");
  if (mod->num_imports == mod->cap_imports) {
    size_t cap = mod->cap_imports ? mod->cap_imports * 2 : 4;
    tvmrt_module** grown = (tvmrt_module**)realloc(mod->imports, cap * sizeof(tvmrt_module*));
    if (grown == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot import a module");
    mod->imports = grown;
    mod->cap_imports = cap;
  }
  tvmrt_retain(&dep->hdr);
  mod->imports[mod->num_imports++] = dep;
  return 0;
}

static tvmrt_func* module_get_depth(tvmrt_module* mod, const char* name, int query_imports,
                                    int depth) {
  tvmrt_func* f = mod->lookup != NULL ? mod->lookup(mod, name) : NULL;
  size_t i;
  if (f != NULL || !query_imports || depth > 64) return f;
  for (i = 0; i < mod->num_imports && f == NULL; ++i) {
    f = module_get_depth(mod->imports[i], name, 1, depth + 1);
  }
  return f;
}

tvmrt_func* tvmrt_module_get(tvmrt_module* mod, const char* name, int query_imports) {
  return module_get_depth(mod, name, query_imports, 0);
}

TVM_DLL int TVMModGetFunction(TVMModuleHandle mod, const char* func_name, int query_imports,
                              TVMFunctionHandle* out) {
  tvmrt_module* m = tvmrt_module_check(mod);
  if (m == NULL) return -1;
  if (func_name == NULL || out == NULL) {
    return tvmrt_fail("InvalidArgumentError", "TVMModGetFunction: func_name and out are required");
  }
  *out = tvmrt_module_get(m, func_name, query_imports);
  return 0; /* TVM: a missing function is a NULL handle, not an error */
}

TVM_DLL int TVMModImport(TVMModuleHandle mod, TVMModuleHandle dep) {
  tvmrt_module* m = tvmrt_module_check(mod);
  tvmrt_module* d = m != NULL ? tvmrt_module_check(dep) : NULL;
  if (d == NULL) return -1;
  return tvmrt_module_import(m, d);
}

TVM_DLL int TVMModFree(TVMModuleHandle mod) {
  tvmrt_module* m;
  if (mod == NULL) return 0;
  m = tvmrt_module_check(mod);
  if (m == NULL) return -1;
  tvmrt_release(&m->hdr);
  return 0;
}
