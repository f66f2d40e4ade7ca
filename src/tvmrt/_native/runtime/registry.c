/*
 * The functions applications register as globals (TVMFuncRegisterGlobal,
 * TVMFuncRemoveGlobal): a list that wins over the runtime's own global functions on lookup.
 * The lookup of all of them, TVMFuncGetGlobal and TVMFuncListGlobalNames are in globals.c.
 * A host (Python) may answer too (tvmrt_set_host_registry), for a name nothing here has:
 * the functions registered in its own registry, handed over as packed functions.
 */
#include <stdlib.h>
#include <string.h>

#include "rt.h"

typedef struct entry {
  char* name;
  tvmrt_func* func;
  struct entry* next;
} entry;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static entry* g_user;        /* TVMFuncRegisterGlobal'd functions (they win) */
static const char** g_names; /* TVMFuncListGlobalNames' answer */

static entry* find_user(const char* name) {
  entry* e;
  for (e = g_user; e != NULL; e = e->next) {
    if (strcmp(e->name, name) == 0) return e;
  }
  return NULL;
}

static tvmrt_host_lookup_cb g_host;

TVM_DLL void tvmrt_set_host_registry(tvmrt_host_lookup_cb lookup) { g_host = lookup; }

tvmrt_func* tvmrt_registry_find(const char* name) {
  entry* e;
  tvmrt_func* f = NULL;
  pthread_mutex_lock(&g_mu);
  e = find_user(name);
  if (e != NULL) {
    tvmrt_retain(&e->func->hdr);
    f = e->func;
  }
  pthread_mutex_unlock(&g_mu);
  return f;
}

tvmrt_func* tvmrt_registry_find_host(const char* name) {
  void* handle = NULL;
  tvmrt_func* f;
  if (g_host == NULL || g_host(name, &handle) != 0 || handle == NULL) {
    tvmrt_clear_last_error();
    return NULL;
  }
  f = tvmrt_func_check(handle); /* the host made it with TVMFuncCreateFromCFunc: ours now */
  if (f == NULL) tvmrt_clear_last_error();
  return f;
}

TVM_DLL int TVMFuncRegisterGlobal(const char* name, TVMFunctionHandle f, int override) {
  tvmrt_func* func;
  entry* e;
  if (name == NULL) return tvmrt_fail("InvalidArgumentError", "TVMFuncRegisterGlobal: no name");
  if ((func = tvmrt_func_check(f)) == NULL) return -1;
  pthread_mutex_lock(&g_mu);
  e = find_user(name);
  if (e != NULL && !override) {
    pthread_mutex_unlock(&g_mu);
    return tvmrt_fail("FunctionAlreadyRegisteredError",
                      "Global PackedFunc %.200s is already "
                      "registered",
                      name);
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

TVM_DLL int TVMFuncRemoveGlobal(const char* name) {
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

int tvmrt_registry_names(const char* const* more, size_t num_more, int* out_size,
                         const char*** out_array) {
  size_t n = num_more, i = 0, k;
  entry* e;
  const char** names;
  pthread_mutex_lock(&g_mu);
  for (e = g_user; e != NULL; e = e->next) ++n;
  names = (const char**)realloc((void*)g_names, (n ? n : 1) * sizeof(char*));
  if (names == NULL) {
    pthread_mutex_unlock(&g_mu);
    return tvmrt_fail("DeviceOutOfMemoryError", "cannot list global functions");
  }
  g_names = names;
  for (e = g_user; e != NULL; e = e->next) names[i++] = e->name;
  for (k = 0; k < num_more; ++k) names[i++] = more[k];
  pthread_mutex_unlock(&g_mu);
  *out_size = (int)i;
  *out_array = names;
  return 0;
}
