/*
 * TVMBackendRegisterSystemLibSymbol and the lookups of what system-lib code registered
 * (see services.c for the whole picture).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "services.h"

/* ------------------------------------------------------------------------------------ */
/* System-library symbol registry (TVMBackendRegisterSystemLibSymbol)                    */
/*                                                                                      */
/* Code built with `system-lib` registers each kernel and `__tvm_dev_mblob` from a       */
/* static constructor, i.e. inside dlopen(). The table keeps (name, address) pairs for   */
/* the life of the process (like TVM's, it is never emptied: the libraries that filled  */
/* it are never unloaded); a later registration of a name replaces the earlier one.      */
/* The generation counter lets the Python side rebuild its system_lib() modules when     */
/* something new was registered.                                                        */

typedef struct {
  char* name;
  void* ptr;
} syslib_entry;

static pthread_mutex_t g_syslib_mu = PTHREAD_MUTEX_INITIALIZER;
static syslib_entry* g_syslib = NULL;
static size_t g_syslib_count = 0;
static size_t g_syslib_cap = 0;
static int64_t g_syslib_generation = 0;

TVM_DLL int TVMBackendRegisterSystemLibSymbol(const char* name, void* ptr) {
  size_t i;
  if (name == NULL) return -1;
  pthread_mutex_lock(&g_syslib_mu);
  for (i = 0; i < g_syslib_count; ++i) {
    if (strcmp(g_syslib[i].name, name) == 0) {
      g_syslib[i].ptr = ptr;
      g_syslib_generation++;
      pthread_mutex_unlock(&g_syslib_mu);
      return 0;
    }
  }
  if (g_syslib_count == g_syslib_cap) {
    size_t cap = g_syslib_cap ? g_syslib_cap * 2 : 64;
    syslib_entry* grown = (syslib_entry*)realloc(g_syslib, cap * sizeof(syslib_entry));
    if (grown == NULL) {
      pthread_mutex_unlock(&g_syslib_mu);
      return -1;
    }
    g_syslib = grown;
    g_syslib_cap = cap;
  }
  g_syslib[g_syslib_count].name = strdup(name);
  if (g_syslib[g_syslib_count].name == NULL) {
    pthread_mutex_unlock(&g_syslib_mu);
    return -1;
  }
  g_syslib[g_syslib_count].ptr = ptr;
  g_syslib_count++;
  g_syslib_generation++;
  pthread_mutex_unlock(&g_syslib_mu);
  return 0;
}

/* The address registered under `name`, or NULL. */
TVM_DLL void* tvmrt_system_lib_lookup(const char* name) {
  size_t i;
  void* found = NULL;
  if (name == NULL) return NULL;
  pthread_mutex_lock(&g_syslib_mu);
  for (i = 0; i < g_syslib_count; ++i) {
    if (strcmp(g_syslib[i].name, name) == 0) {
      found = g_syslib[i].ptr;
      break;
    }
  }
  pthread_mutex_unlock(&g_syslib_mu);
  return found;
}

TVM_DLL int64_t tvmrt_system_lib_generation(void) {
  int64_t g;
  pthread_mutex_lock(&g_syslib_mu);
  g = g_syslib_generation;
  pthread_mutex_unlock(&g_syslib_mu);
  return g;
}

/* The name of entry `index` (names are never freed), or NULL past the end. */
TVM_DLL const char* tvmrt_system_lib_name(int64_t index) {
  const char* name = NULL;
  pthread_mutex_lock(&g_syslib_mu);
  if (index >= 0 && (size_t)index < g_syslib_count) name = g_syslib[index].name;
  pthread_mutex_unlock(&g_syslib_mu);
  return name;
}
