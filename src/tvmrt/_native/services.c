/*
 * tvmrt's backend services: what compiled TVM kernels call back into, with no Python.
 *
 * Compiled into both the Python extension (tvmrt._native_backend, with backend.c's
 * CPython glue) and the native C runtime (libtvmrt_runtime.so / .a), so a kernel sees the
 * same workspace allocator, thread pool and error slot whichever host loaded it. This file
 * holds the per-thread state, the error slot and the statistics; the others are
 * workspace.c, thread_pool.c, func_env.c (TVMFuncCall, TVMBackendGetFuncFromEnv),
 * system_lib.c and measure.c, sharing services.h.
 *
 * One implementation serves every kernel ABI (legacy packed functions and tvm-ffi):
 *
 *   TVMBackendAllocWorkspace / TVMBackendFreeWorkspace   64-byte aligned, per-thread LIFO
 *                                                         free lists keyed by size
 *   TVMBackendParallelLaunch / TVMBackendParallelBarrier  persistent pthread pool
 *   TVMAPISetLastError                                    thread-local error slot
 *   TVMBackendGetFuncFromEnv / TVMFuncCall                forwarded to callbacks that the
 *                                                         host installs (the Python side or
 *                                                         the C runtime's object layer);
 *                                                         TVMFuncCall runs the functions
 *                                                         implemented in C (sort.c) and the
 *                                                         CUDA launchers (cuda_launch.c)
 *                                                         directly
 *   tvm-ffi lookups (GetFuncFromEnv,                      the same environment; calls
 *   EnvModLookupFromImports), FunctionCall,               convert TVMFFIAny arguments to
 *   TVMFFIHandleInitOnce                                  TVMValues and go through TVMFuncCall
 *
 * The functions carry TVM's exact C names and signatures (tvm/runtime/c_backend_api.h
 * and c_runtime_api.h under src/tvmrt/include). The Python side writes their addresses
 * into a kernel library's `__TVMBackend*` slots, and C-target kernels that reference the
 * names as undefined symbols resolve against this library once Python has made it
 * global (RTLD_GLOBAL).
 *
 * The tvm-ffi error entry points are deliberately NOT exported under tvm-ffi's names
 * (TVMFFIErrorSetRaisedFromCStr[Parts]): if this library were global before a later
 * `import tvm_ffi`, libtvm_ffi's own calls could bind to these definitions (symbol
 * interposition: the first global definition of a name wins). They are
 * `tvmrt_ffi_error_set_raised_*` instead, with the same signatures; the tvm-ffi loader
 * writes their addresses into the `__TVMFFIErrorSetRaisedFromCStr` slot and patches the
 * GOT entry of an undefined `TVMFFIErrorSetRaisedFromCStrParts`.
 *
 * C11 plus pthreads and the GCC/Clang __atomic and __thread builtins; Linux
 * and macOS.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "services.h"

pthread_mutex_t tvmrt_svc_threads_mu = PTHREAD_MUTEX_INITIALIZER;
thread_state* tvmrt_svc_threads;     /* live thread states, for statistics */
int64_t tvmrt_svc_retired[ST_COUNT]; /* counts of threads that have exited */
static int64_t g_baseline[ST_COUNT]; /* event counts at the last reset */

static pthread_key_t g_tls_key;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
__thread thread_state* tvmrt_svc_tls_state;

void tvmrt_svc_ws_release_cache(thread_state* ts) {
  int i;
  for (i = 0; i < ts->nbins; ++i) {
    ws_header* h = ts->bins[i].head;
    while (h != NULL) {
      ws_header* next = h->next;
      COUNT(ts, ST_WS_BYTES_CACHED, -(int64_t)h->size);
      free(h);
      h = next;
    }
    ts->bins[i].head = NULL;
  }
  ts->cached_bytes = 0;
}

static void thread_state_destroy(void* p) {
  thread_state* ts = (thread_state*)p;
  int i;
  if (ts == NULL) return;
  tvmrt_svc_ws_release_cache(ts);
  pthread_mutex_lock(&tvmrt_svc_threads_mu);
  for (i = 0; i < ST_COUNT; ++i) tvmrt_svc_retired[i] += ts->stats[i];
  if (ts->prev != NULL) ts->prev->next = ts->next;
  else tvmrt_svc_threads = ts->next;
  if (ts->next != NULL) ts->next->prev = ts->prev;
  pthread_mutex_unlock(&tvmrt_svc_threads_mu);
  free(ts->bins);
  free(ts->err);
  free(ts);
  tvmrt_svc_tls_state = NULL;
}

static void global_init(void) { pthread_key_create(&g_tls_key, thread_state_destroy); }

thread_state* tvmrt_svc_state(void) {
  thread_state* ts = tvmrt_svc_tls_state;
  if (ts != NULL) return ts;
  pthread_once(&g_once, global_init);
  ts = (thread_state*)calloc(1, sizeof(thread_state));
  if (ts == NULL) return NULL;
  ts->last_bin = -1;
  pthread_mutex_lock(&tvmrt_svc_threads_mu);
  ts->next = tvmrt_svc_threads;
  if (tvmrt_svc_threads != NULL) tvmrt_svc_threads->prev = ts;
  tvmrt_svc_threads = ts;
  pthread_mutex_unlock(&tvmrt_svc_threads_mu);
  pthread_setspecific(g_tls_key, ts);
  tvmrt_svc_tls_state = ts;
  return ts;
}

/* ------------------------------------------------------------------------------------ */
/* Error slot                                                                            */

static void set_error_kind(thread_state* ts, const char* kind) {
  size_t n = 0;
  if (kind != NULL) {
    n = strlen(kind);
    if (n >= ERROR_KIND_MAX) n = ERROR_KIND_MAX - 1;
    memcpy(ts->err_kind, kind, n);
  }
  ts->err_kind[n] = '\0';
}

static int error_reserve(thread_state* ts, size_t n) {
  if (n + 1 > ts->err_cap) {
    size_t cap = ts->err_cap ? ts->err_cap : 256;
    char* buf;
    while (cap < n + 1) cap *= 2;
    buf = (char*)realloc(ts->err, cap);
    if (buf == NULL) return -1;
    ts->err = buf;
    ts->err_cap = cap;
  }
  return 0;
}

/* The one writer of the slot: "<kind>: " (nothing for kind "") then the parts. */
static void slot_set(const char* kind, const char** parts, int32_t nparts) {
  thread_state* ts = tvmrt_svc_state();
  size_t total = 0, keep, off, plen = 0;
  char prefix[ERROR_KIND_MAX + 2], note[96];
  int32_t i;
  if (ts == NULL) return;
  set_error_kind(ts, kind);
  if (ts->err_kind[0] != '\0')
    plen = (size_t)snprintf(prefix, sizeof(prefix), "%s: ", ts->err_kind);
  for (i = 0; i < nparts; ++i) total += parts[i] ? strlen(parts[i]) : 0;
  note[0] = '\0';
  keep = total;
  if (total > ERROR_MESSAGE_MAX) { /* a runaway message: keep its start, say so */
    keep = ERROR_MESSAGE_MAX;
    snprintf(note, sizeof(note), "... [cut by tvmrt: the message has %llu bytes]",
             (unsigned long long)total);
  }
  if (error_reserve(ts, plen + keep + strlen(note)) != 0) {
    /* keep the start of the message at least */
    if (ts->err_cap <= plen + 1) return;
    keep = ts->err_cap - 1 - plen;
    note[0] = '\0';
  }
  memcpy(ts->err, prefix, plen);
  off = plen;
  for (i = 0; i < nparts && off < plen + keep; ++i) {
    size_t n;
    if (parts[i] == NULL) continue;
    n = strlen(parts[i]);
    if (n > plen + keep - off) n = plen + keep - off;
    memcpy(ts->err + off, parts[i], n);
    off += n;
  }
  memcpy(ts->err + off, note, strlen(note) + 1);
  ts->err_msg_off = plen;
  ts->err_set = 1;
}

int tvmrt_fail(const char* kind, const char* fmt, ...) {
  char buf[2048];
  char* msg = buf;
  va_list ap;
  int n;
  va_start(ap, fmt);
  n = vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (n < 0) {
    buf[0] = '\0';
  } else if ((size_t)n >= sizeof(buf)) { /* a long message: format it again, whole */
    char* big = (char*)malloc((size_t)n + 1);
    if (big != NULL) {
      va_start(ap, fmt);
      vsnprintf(big, (size_t)n + 1, fmt, ap);
      va_end(ap);
      msg = big;
    }
  }
  slot_set(kind, (const char**)&msg, 1);
  if (msg != buf) free(msg);
  return -1;
}

TVM_DLL void tvmrt_clear_last_error(void) { tvmrt_svc_clear_error(); }

/* Call a legacy packed function with an empty error slot (the per-call Python path). */
TVM_DLL int tvmrt_call_packed(TVMBackendPackedCFunc f, TVMValue* args, int* codes, int num_args,
                              TVMValue* ret_val, int* ret_code) {
  tvmrt_svc_clear_error();
  return f(args, codes, num_args, ret_val, ret_code, NULL);
}

/* TVM's legacy error setter (a kernel calls it, then returns -1). */
TVM_DLL void TVMAPISetLastError(const char* msg) {
  const char* text = msg ? msg : "";
  slot_set("", &text, 1);
}

/* tvm-ffi's TVMFFIErrorSetRaisedFromCStr, under a private name (see the file comment). */
TVM_DLL void tvmrt_ffi_error_set_raised_from_cstr(const char* kind, const char* msg) {
  const char* text = msg ? msg : "";
  slot_set(kind, &text, 1);
}

/* tvm-ffi's TVMFFIErrorSetRaisedFromCStrParts, under a private name. */
TVM_DLL void tvmrt_ffi_error_set_raised_from_cstr_parts(const char* kind, const char** parts,
                                                        int32_t num_parts) {
  slot_set(kind, parts, num_parts < 0 ? 0 : num_parts);
}

/* The message of this thread's last error (NULL if none) and its kind ("" for legacy);
 * clears the slot. The text stays valid until the next error on this thread. */
TVM_DLL const char* tvmrt_take_last_error(const char** kind) {
  thread_state* ts = tvmrt_svc_state();
  if (ts == NULL || !ts->err_set) {
    if (kind != NULL) *kind = "";
    return NULL;
  }
  ts->err_set = 0;
  if (kind != NULL) *kind = ts->err_kind;
  return ts->err + ts->err_msg_off;
}

/* This thread's last error message, or "" if none was ever set; the slot is left as it
 * is (TVMGetLastError of the C runtime). Valid until the next error on this thread. */
TVM_DLL const char* tvmrt_peek_last_error(void) {
  thread_state* ts = tvmrt_svc_state();
  if (ts == NULL || ts->err == NULL) return "";
  return ts->err;
}

/* ------------------------------------------------------------------------------------ */
/* Statistics and measurement helpers (tests and benchmarks)                             */

static int is_gauge(int i) { return i == ST_WS_BYTES_CACHED || i == ST_WS_BYTES_IN_USE; }

static void sum_stats(int64_t* total) {
  thread_state* ts;
  int i;
  for (i = 0; i < ST_COUNT; ++i) total[i] = tvmrt_svc_retired[i];
  for (ts = tvmrt_svc_threads; ts != NULL; ts = ts->next) {
    for (i = 0; i < ST_COUNT; ++i) total[i] += __atomic_load_n(&ts->stats[i], __ATOMIC_RELAXED);
  }
}

/* Copy up to n counters into out; returns the number of counters. */
TVM_DLL int tvmrt_get_stats(int64_t* out, int n) {
  int64_t total[ST_COUNT];
  int i;
  pthread_mutex_lock(&tvmrt_svc_threads_mu);
  sum_stats(total);
  for (i = 0; i < ST_COUNT; ++i) {
    if (!is_gauge(i)) total[i] -= g_baseline[i];
  }
  pthread_mutex_unlock(&tvmrt_svc_threads_mu);
  for (i = 0; i < n && i < ST_COUNT; ++i) out[i] = total[i];
  return ST_COUNT;
}

/* Zero the event counters (not the byte gauges). */
TVM_DLL void tvmrt_reset_stats(void) {
  pthread_mutex_lock(&tvmrt_svc_threads_mu);
  sum_stats(g_baseline);
  pthread_mutex_unlock(&tvmrt_svc_threads_mu);
}
