/*
 * Internal header of the backend services (services.c, workspace.c, thread_pool.c,
 * func_env.c, system_lib.c, measure.c): shared types, the per-thread state and the few
 * functions the files call in each other. Compiled into the Python extension and into
 * libtvmrt_runtime alike; nothing here is Python.
 */
#ifndef TVMRT_NATIVE_SERVICES_H_
#define TVMRT_NATIVE_SERVICES_H_

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getaffinity and CPU_COUNT */
#endif

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "native.h"

#define WS_ALIGN 64
#define WS_HEADER 64
#define WS_MAGIC_USED 0x7476726d55534544ULL /* "tvrmUSED" */
#define WS_MAGIC_FREE 0x7476726d46524545ULL /* "tvrmFREE" */
#define MAX_THREADS 1024
#define ERROR_KIND_MAX 64
/* A kernel's error message is kept up to this many bytes, then cut with a note. */
#define ERROR_MESSAGE_MAX (64 * 1024)

/* ------------------------------------------------------------------------------------ */
/* Atomics                                                                               */

#define LOAD(p) __atomic_load_n((p), __ATOMIC_SEQ_CST)
#define LOAD_ACQ(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_SEQ_CST)
#define STORE_REL(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define FETCH_ADD(p, v) __atomic_fetch_add((p), (v), __ATOMIC_SEQ_CST)

/* ------------------------------------------------------------------------------------ */
/* Statistics: per-thread counters (no atomic read-modify-write on the hot path), summed  */
/* over all threads when queried                                                          */

enum {
  ST_WS_ALLOCS,
  ST_WS_FREES,
  ST_WS_SYSTEM_ALLOCS,
  ST_WS_BYTES_CACHED,
  ST_WS_BYTES_IN_USE,
  ST_LAUNCHES,
  ST_SERIAL_LAUNCHES,
  ST_BARRIERS,
  ST_COUNT
};

/* ------------------------------------------------------------------------------------ */
/* Per-thread state: error slot and workspace cache                                      */

typedef struct ws_header {
  uint64_t magic;
  size_t size; /* usable bytes, a multiple of WS_ALIGN */
  struct ws_header* next;
} ws_header;

typedef struct {
  size_t size;
  ws_header* head;
} ws_bin;

typedef struct thread_state_s {
  char* err;
  size_t err_cap;
  int err_set;
  char err_kind[ERROR_KIND_MAX];
  size_t err_msg_off; /* err is "<kind>: <message>": where the message starts */
  ws_bin* bins;
  int nbins;
  int bins_cap;
  int last_bin;
  size_t cached_bytes;
  int in_task;             /* running a parallel task: nested launches run serially */
  int64_t stats[ST_COUNT]; /* written by the owning thread only */
  struct thread_state_s* prev;
  struct thread_state_s* next;
} thread_state;

/* Add v to the calling thread's counter i: a plain load and store (only the owner writes). */
#define COUNT(ts, i, v)                                                                            \
  __atomic_store_n(&(ts)->stats[i], __atomic_load_n(&(ts)->stats[i], __ATOMIC_RELAXED) + (v),      \
                   __ATOMIC_RELAXED)

/* services.c */
extern pthread_mutex_t tvmrt_svc_threads_mu;
extern struct thread_state_s* tvmrt_svc_threads;
extern int64_t tvmrt_svc_retired[ST_COUNT];
extern __thread struct thread_state_s* tvmrt_svc_tls_state;
thread_state* tvmrt_svc_state(void); /* the calling thread's state (NULL if out of memory) */
/* Free the thread's cached workspace blocks (workspace.c's free lists). */
void tvmrt_svc_ws_release_cache(thread_state* ts);
/* Forget this thread's error: every kernel call starts with an empty slot, so that a
 * message an earlier (successful) call left is never reported for a later one. */
static inline void tvmrt_svc_clear_error(void) {
  thread_state* ts = tvmrt_svc_tls_state;
  if (ts != NULL) ts->err_set = 0;
}

#endif /* TVMRT_NATIVE_SERVICES_H_ */
