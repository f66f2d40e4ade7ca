/*
 * TVMBackendParallelLaunch / TVMBackendParallelBarrier: a persistent pthread pool (see
 * services.c for the whole picture).
 */
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
#include <unistd.h>

#include "services.h"

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
  __asm__ __volatile__("yield");
#endif
}

/* Iterations a waiting thread spins (yielding every 64) before it blocks. */
static int g_spin_count = 200000;

/* ------------------------------------------------------------------------------------ */
/* Thread pool                                                                           */

typedef struct {
  int count;
  int generation;
} barrier_t;

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t work_cv;
  pthread_cond_t done_cv;
  int num_threads; /* configured size, including the launching thread; 0 = not decided */
  int num_workers; /* worker threads running */
  pthread_t* threads;
  int busy; /* a launch owns the pool */
  int shutdown;
  uint64_t generation; /* bumped to publish a job */
  int sleepers;        /* workers blocked on work_cv */
  int launcher_waiting;
  int pending; /* workers that have not finished the current job */
  int failed;
  /* the current job (written before `generation` is bumped) */
  FTVMParallelLambda flambda;
  void* cdata;
  TVMParallelGroupEnv env;
  barrier_t barrier;
  char* first_error;
  char first_error_kind[ERROR_KIND_MAX];
} pool_t;

static pool_t g_pool; /* mutex and condition variables are set up by pool_ready() */
static pthread_mutex_t g_config_mu = PTHREAD_MUTEX_INITIALIZER;
static void pool_ready(void);

/* The CPUs this process may run on. TVM_NUM_THREADS / OMP_NUM_THREADS are parsed in one
 * place, the Python side (tvmrt.runtime.threads), which sets the pool size when it loads
 * this library; this is only the fallback for a pool nobody sized. */
static int default_num_threads(void) {
  int n;
  long cpus;
#if defined(__linux__) && defined(CPU_COUNT)
  {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
      n = CPU_COUNT(&set);
      if (n > 0) return n > MAX_THREADS ? MAX_THREADS : n;
    }
  }
#endif
  cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (cpus < 1) return 1;
  return cpus > MAX_THREADS ? MAX_THREADS : (int)cpus;
}

TVM_DLL int tvmrt_get_num_threads(void) {
  int n;
  pool_ready();
  n = LOAD(&g_pool.num_threads);
  if (n > 0) return n;
  pthread_mutex_lock(&g_config_mu);
  if (g_pool.num_threads <= 0) STORE(&g_pool.num_threads, default_num_threads());
  n = g_pool.num_threads;
  pthread_mutex_unlock(&g_config_mu);
  return n;
}

/* Wait until *p != old (spin, then block on cv, announcing through *waiters). */
static void wait_change_u64(uint64_t* p, uint64_t old, int* waiters, pthread_cond_t* cv) {
  int i;
  for (i = 0; i < g_spin_count; ++i) {
    if (LOAD_ACQ(p) != old) return;
    if ((i & 63) == 63) sched_yield();
    else cpu_relax();
  }
  pthread_mutex_lock(&g_pool.mu);
  FETCH_ADD(waiters, 1);
  while (LOAD(p) == old) pthread_cond_wait(cv, &g_pool.mu);
  FETCH_ADD(waiters, -1);
  pthread_mutex_unlock(&g_pool.mu);
}

static void record_task_error(const char* fallback) {
  thread_state* ts = tvmrt_svc_state();
  const char* msg = (ts != NULL && ts->err_set) ? ts->err + ts->err_msg_off : fallback;
  const char* kind = (ts != NULL && ts->err_set) ? ts->err_kind : "";
  pthread_mutex_lock(&g_pool.mu);
  if (g_pool.first_error == NULL) {
    size_t n = strlen(msg);
    g_pool.first_error = (char*)malloc(n + 1);
    if (g_pool.first_error != NULL) memcpy(g_pool.first_error, msg, n + 1);
    snprintf(g_pool.first_error_kind, ERROR_KIND_MAX, "%s", kind);
  }
  pthread_mutex_unlock(&g_pool.mu);
  if (ts != NULL) ts->err_set = 0;
  STORE(&g_pool.failed, 1);
}

typedef struct {
  int index;
  uint64_t start_generation;
} worker_arg;

static void* worker_main(void* p) {
  worker_arg arg = *(worker_arg*)p;
  uint64_t seen = arg.start_generation;
  thread_state* ts;
  free(p);
  ts = tvmrt_svc_state();
  for (;;) {
    wait_change_u64(&g_pool.generation, seen, &g_pool.sleepers, &g_pool.work_cv);
    seen = LOAD_ACQ(&g_pool.generation);
    if (LOAD(&g_pool.shutdown)) break;
    if (arg.index < g_pool.env.num_task) {
      int rc;
      if (ts != NULL) ts->in_task = 1;
      if (ts != NULL) ts->err_set = 0;
      rc = g_pool.flambda(arg.index, &g_pool.env, g_pool.cdata);
      if (ts != NULL) ts->in_task = 0;
      if (rc != 0) record_task_error("a parallel task failed without an error message");
    }
    if (FETCH_ADD(&g_pool.pending, -1) == 1 && LOAD(&g_pool.launcher_waiting)) {
      pthread_mutex_lock(&g_pool.mu);
      pthread_cond_broadcast(&g_pool.done_cv);
      pthread_mutex_unlock(&g_pool.mu);
    }
  }
  return NULL;
}

static void publish(void) {
  FETCH_ADD(&g_pool.generation, 1);
  if (LOAD(&g_pool.sleepers) > 0) {
    pthread_mutex_lock(&g_pool.mu);
    pthread_cond_broadcast(&g_pool.work_cv);
    pthread_mutex_unlock(&g_pool.mu);
  }
}

/* Stop and join the workers. The caller owns the pool (busy). */
static void pool_stop(void) {
  int i;
  if (g_pool.num_workers == 0) return;
  STORE(&g_pool.shutdown, 1);
  publish();
  for (i = 0; i < g_pool.num_workers; ++i) pthread_join(g_pool.threads[i], NULL);
  free(g_pool.threads);
  g_pool.threads = NULL;
  g_pool.num_workers = 0;
  STORE(&g_pool.shutdown, 0);
}

static int g_start_error; /* pthread_create's error when the pool came out smaller */

/* Start `count` workers (indices 1..count). The caller owns the pool. Returns how many
 * started: when the system refuses a thread, the pool keeps the ones it has. */
static int pool_start(int count) {
  sigset_t all, old;
  int i;
  g_pool.threads = (pthread_t*)calloc((size_t)count, sizeof(pthread_t));
  if (g_pool.threads == NULL) {
    g_start_error = ENOMEM;
    return 0;
  }
  /* Workers block every signal, so that signals reach the interpreter's threads. */
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  for (i = 0; i < count; ++i) {
    worker_arg* arg = (worker_arg*)malloc(sizeof(worker_arg));
    int rc;
    if (arg == NULL) {
      g_start_error = ENOMEM;
      break;
    }
    arg->index = i + 1;
    arg->start_generation = LOAD(&g_pool.generation);
    rc = pthread_create(&g_pool.threads[i], NULL, worker_main, arg);
    if (rc != 0) {
      g_start_error = rc;
      free(arg);
      break;
    }
    g_pool.num_workers = i + 1;
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return g_pool.num_workers;
}

/* (Re)start the workers for a pool of `total` threads. The caller owns the pool. Returns the
 * size reached; when smaller, the pool stays that size (no retry at every launch) and the
 * error slot says why. */
static int pool_resize(int total) {
  int started;
  pool_stop();
  started = total > 1 ? pool_start(total - 1) : 0;
  if (started + 1 < total) {
    char buf[200];
    STORE(&g_pool.num_threads, started + 1);
    snprintf(buf, sizeof(buf),
             "the thread pool could start only %d of %d worker threads (%s); parallel "
             "kernels run on %d threads",
             started, total - 1, strerror(g_start_error), started + 1);
    tvmrt_fail("", "%s", buf);
  }
  return started + 1;
}

static void pool_init_sync(void) {
  pthread_mutex_init(&g_pool.mu, NULL);
  pthread_cond_init(&g_pool.work_cv, NULL);
  pthread_cond_init(&g_pool.done_cv, NULL);
}

static void pool_atfork_child(void) {
  /* The child has only the forking thread: forget the workers (they do not exist). */
  pool_init_sync();
  pthread_mutex_init(&g_config_mu, NULL);
  pthread_mutex_init(&tvmrt_svc_threads_mu, NULL);
  g_pool.threads = NULL;
  g_pool.num_workers = 0;
  g_pool.busy = 0;
  g_pool.shutdown = 0;
  g_pool.sleepers = 0;
  g_pool.launcher_waiting = 0;
  g_pool.pending = 0;
}

static pthread_once_t g_pool_once = PTHREAD_ONCE_INIT;

static void pool_setup(void) {
  const char* spin = getenv("TVM_THREAD_POOL_SPIN_COUNT");
  pool_init_sync();
  pthread_atfork(NULL, NULL, pool_atfork_child);
  if (spin != NULL && *spin != '\0') {
    long v = strtol(spin, NULL, 10);
    if (v >= 0 && v <= 100000000L) g_spin_count = (int)v;
  }
}

/* Set the pool up once, on its first use (the entry points below call this first). */
static void pool_ready(void) { pthread_once(&g_pool_once, pool_setup); }

static int try_acquire_pool(void) {
  int expected = 0;
  return __atomic_compare_exchange_n(&g_pool.busy, &expected, 1, 0, __ATOMIC_ACQUIRE,
                                     __ATOMIC_RELAXED);
}

static void release_pool(void) { __atomic_store_n(&g_pool.busy, 0, __ATOMIC_RELEASE); }

static int run_serial(FTVMParallelLambda flambda, void* cdata, thread_state* ts) {
  TVMParallelGroupEnv env;
  int rc, was_in_task = ts != NULL ? ts->in_task : 0;
  env.sync_handle = NULL;
  env.num_task = 1;
  if (ts != NULL) COUNT(ts, ST_SERIAL_LAUNCHES, 1);
  if (ts != NULL) ts->in_task = 1;
  rc = flambda(0, &env, cdata);
  if (ts != NULL) ts->in_task = was_in_task;
  return rc;
}

TVM_DLL int TVMBackendParallelLaunch(FTVMParallelLambda flambda, void* cdata, int num_task) {
  thread_state* ts = tvmrt_svc_state();
  int total = tvmrt_get_num_threads();
  int n, rc, i;
  if (ts != NULL) COUNT(ts, ST_LAUNCHES, 1);
  if (flambda == NULL) {
    tvmrt_fail("", "%s", "TVMBackendParallelLaunch: the task function is NULL");
    return -1;
  }
  /* One thread, a nested launch, or the pool busy with another thread's launch: run here. */
  if (total <= 1 || num_task == 1 || (ts != NULL && ts->in_task) || !try_acquire_pool()) {
    return run_serial(flambda, cdata, ts);
  }
  total = LOAD(&g_pool.num_threads); /* may have changed before the pool was ours */
  n = (num_task <= 0 || num_task > total) ? total : num_task;
  if (n <= 1) {
    release_pool();
    return run_serial(flambda, cdata, ts);
  }
  if (g_pool.num_workers != total - 1) {
    total = pool_resize(total);
    n = n > total ? total : n;
    if (n <= 1) {
      release_pool();
      return run_serial(flambda, cdata, ts);
    }
  }
  g_pool.flambda = flambda;
  g_pool.cdata = cdata;
  g_pool.env.sync_handle = &g_pool.barrier;
  g_pool.env.num_task = n;
  g_pool.barrier.count = 0;
  g_pool.barrier.generation = 0;
  g_pool.failed = 0;
  g_pool.first_error = NULL;
  g_pool.first_error_kind[0] = '\0';
  STORE(&g_pool.pending, g_pool.num_workers);
  publish();

  if (ts != NULL) ts->in_task = 1;
  rc = flambda(0, &g_pool.env, cdata);
  if (ts != NULL) ts->in_task = 0;

  /* wait for the workers: spin, then block */
  for (i = 0; i < g_spin_count && LOAD_ACQ(&g_pool.pending) != 0; ++i) {
    if ((i & 63) == 63) sched_yield();
    else cpu_relax();
  }
  if (LOAD(&g_pool.pending) != 0) {
    pthread_mutex_lock(&g_pool.mu);
    STORE(&g_pool.launcher_waiting, 1);
    while (LOAD(&g_pool.pending) != 0) pthread_cond_wait(&g_pool.done_cv, &g_pool.mu);
    STORE(&g_pool.launcher_waiting, 0);
    pthread_mutex_unlock(&g_pool.mu);
  }
  if (rc == 0 && LOAD(&g_pool.failed)) {
    if (g_pool.first_error != NULL) tvmrt_fail(g_pool.first_error_kind, "%s", g_pool.first_error);
    else tvmrt_fail("", "%s", "a parallel task failed");
    rc = -1;
  }
  free(g_pool.first_error);
  g_pool.first_error = NULL;
  release_pool();
  return rc;
}

TVM_DLL int TVMBackendParallelBarrier(int task_id, TVMParallelGroupEnv* penv) {
  barrier_t* b;
  int gen, i;
  thread_state* ts = tvmrt_svc_state();
  (void)task_id;
  if (ts != NULL) COUNT(ts, ST_BARRIERS, 1);
  if (penv == NULL || penv->num_task <= 1) return 0;
  b = (barrier_t*)penv->sync_handle;
  if (b == NULL) {
    tvmrt_fail("", "%s", "TVMBackendParallelBarrier: the group has no barrier");
    return -1;
  }
  gen = LOAD_ACQ(&b->generation);
  if (FETCH_ADD(&b->count, 1) == penv->num_task - 1) {
    STORE(&b->count, 0);
    STORE_REL(&b->generation, gen + 1);
    return 0;
  }
  for (i = 0; LOAD_ACQ(&b->generation) == gen; ++i) {
    if ((i & 63) == 63 || i > g_spin_count) sched_yield();
    else cpu_relax();
  }
  return 0;
}

/* Set the pool size (n <= 0: the CPUs) and start its workers now. Waits for a running
 * launch to finish. Returns the size reached (smaller than asked when the system refuses
 * threads: the error slot says why), or -1 when called from a parallel task. */
TVM_DLL int tvmrt_set_num_threads(int n) {
  thread_state* ts = tvmrt_svc_state();
  if (ts != NULL && ts->in_task) {
    tvmrt_fail("", "%s",
               "tvmrt_set_num_threads: cannot resize the pool from inside a parallel task");
    return -1;
  }
  pool_ready();
  pthread_mutex_lock(&g_config_mu);
  while (!try_acquire_pool()) sched_yield();
  if (n <= 0) n = default_num_threads();
  if (n > MAX_THREADS) n = MAX_THREADS;
  STORE(&g_pool.num_threads, n);
  if (g_pool.num_workers != n - 1) n = pool_resize(n);
  release_pool();
  pthread_mutex_unlock(&g_config_mu);
  return n;
}

/* The C runtime's start-up sizing (TVM_NUM_THREADS for C programs): only a pool nobody has
 * sized yet takes it, so Python's choice, or an application's tvmrt_set_num_threads, stands. */
int tvmrt_set_num_threads_unless_set(int n) {
  int sized;
  pool_ready();
  pthread_mutex_lock(&g_config_mu);
  sized = LOAD(&g_pool.num_threads) > 0;
  pthread_mutex_unlock(&g_config_mu);
  return sized ? tvmrt_get_num_threads() : tvmrt_set_num_threads(n);
}

TVM_DLL void tvmrt_set_spin_count(int n) {
  pool_ready();
  g_spin_count = n < 0 ? 0 : n;
}

TVM_DLL int tvmrt_get_spin_count(void) {
  pool_ready();
  return g_spin_count;
}
