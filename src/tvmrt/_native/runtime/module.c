/*
 * Modules: the object, its imports, function lookup, and the module part of TVM's C API
 * (TVMModGetFunction, TVMModImport, TVMModFree; TVMModLoadFromFile is in globals.c).
 */
#include <stdint.h>
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

/* ---------------------------------------------------------------------------------- */
/* walking the imports: depth first, in order, each module once (a set of the modules
   seen), so a lookup costs the modules reachable, however often each is imported and
   however deep the chains; no recursion */

typedef struct {
  tvmrt_module** slots; /* open addressing on the address; NULL is empty */
  size_t cap, used;
} module_set;

static size_t set_slot(const tvmrt_module* m, size_t cap) {
  return (size_t)(((uint64_t)(uintptr_t)m >> 4) * 0x9E3779B97F4A7C15ULL >> 20) & (cap - 1);
}

/* 1 when m is new to the set (now in it), 0 when seen, -1 when the set cannot grow */
static int set_add(module_set* s, tvmrt_module* m) {
  size_t i;
  if ((s->used + 1) * 2 > s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 64, k;
    tvmrt_module** slots = (tvmrt_module**)calloc(cap, sizeof(tvmrt_module*));
    if (slots == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot walk the imports");
    for (k = 0; k < s->cap; ++k) {
      if (s->slots[k] == NULL) continue;
      for (i = set_slot(s->slots[k], cap); slots[i] != NULL; i = (i + 1) & (cap - 1)) {
      }
      slots[i] = s->slots[k];
    }
    free(s->slots);
    s->slots = slots;
    s->cap = cap;
  }
  for (i = set_slot(m, s->cap); s->slots[i] != NULL; i = (i + 1) & (s->cap - 1)) {
    if (s->slots[i] == m) return 0;
  }
  s->slots[i] = m;
  ++s->used;
  return 1;
}

typedef struct {
  tvmrt_module* mod;
  size_t next; /* the next of mod's imports to visit */
} walk_frame;

/* visit(m, ctx) for every module root imports, directly or not, depth first and in import
   order, each once (root itself is not visited): the first nonzero visit result, 0, or -1
   when memory runs out (error set) */
static int walk_imports(tvmrt_module* root, int (*visit)(tvmrt_module*, void*), void* ctx) {
  module_set seen = {NULL, 0, 0};
  walk_frame* stack = NULL;
  size_t depth = 0, cap = 0;
  int rc = set_add(&seen, root) < 0 ? -1 : 0;
  if (rc == 0) {
    stack = (walk_frame*)malloc(16 * sizeof(walk_frame));
    cap = 16;
    if (stack == NULL) rc = tvmrt_fail("DeviceOutOfMemoryError", "cannot walk the imports");
    else stack[depth++] = (walk_frame){root, 0};
  }
  while (rc == 0 && depth > 0) {
    walk_frame* top = &stack[depth - 1];
    tvmrt_module* m;
    int added;
    if (top->next == top->mod->num_imports) {
      --depth;
      continue;
    }
    m = top->mod->imports[top->next++];
    if ((added = set_add(&seen, m)) <= 0) {
      rc = added; /* seen (0: go on), or out of memory */
      continue;
    }
    if ((rc = visit(m, ctx)) != 0) break;
    if (depth == cap) {
      walk_frame* grown = (walk_frame*)realloc(stack, cap * 2 * sizeof(walk_frame));
      if (grown == NULL) {
        rc = tvmrt_fail("DeviceOutOfMemoryError", "cannot walk the imports");
        break;
      }
      stack = grown;
      cap *= 2;
    }
    stack[depth++] = (walk_frame){m, 0};
  }
  free(stack);
  free(seen.slots);
  return rc;
}

static int is_target(tvmrt_module* m, void* target) { return m == (tvmrt_module*)target; }

int tvmrt_module_import(tvmrt_module* mod, tvmrt_module* dep) {
  int reached;
  if (dep == mod) return tvmrt_fail("InvalidArgumentError", "a module cannot import itself");
  /* as TVM's ModuleNode::Import: refused when dep already reaches mod (the cycle would
     never be freed, and lookups would go round it) */
  reached = walk_imports(dep, is_target, mod);
  if (reached < 0) return -1;
  if (reached)
    return tvmrt_fail("InvalidArgumentError", "Cyclic dependency detected during import");
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

typedef struct {
  const char* name;
  tvmrt_func* found;
} lookup_ctx;

static int look_in(tvmrt_module* m, void* ctx) {
  lookup_ctx* c = (lookup_ctx*)ctx;
  c->found = m->lookup != NULL ? m->lookup(m, c->name) : NULL;
  return c->found != NULL;
}

tvmrt_func* tvmrt_module_get(tvmrt_module* mod, const char* name, int query_imports) {
  lookup_ctx c = {name, NULL};
  tvmrt_func* f = mod->lookup != NULL ? mod->lookup(mod, name) : NULL;
  if (f != NULL || !query_imports || mod->num_imports == 0) return f;
  if (walk_imports(mod, look_in, &c) < 0) return NULL; /* out of memory: error set */
  return c.found;
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
