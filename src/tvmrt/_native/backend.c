/*
 * tvmrt native backend: the services compiled TVM kernels call back into.
 *
 * One implementation serves every kernel ABI (legacy packed functions and tvm-ffi):
 *
 *   TVMBackendAllocWorkspace / TVMBackendFreeWorkspace   64-byte aligned, per-thread LIFO
 *                                                         free lists keyed by size
 *   TVMBackendParallelLaunch / TVMBackendParallelBarrier  persistent pthread pool
 *   TVMAPISetLastError                                    thread-local error slot
 *   TVMBackendGetFuncFromEnv / TVMFuncCall                forwarded to callbacks that the
 *                                                         Python side installs (legacy);
 *                                                         TVMFuncCall runs the functions
 *                                                         implemented in C (sort.c) directly
 *   tvm-ffi lookups (GetFuncFromEnv, FunctionCall,        report an error: tvmrt has no
 *   EnvModLookupFromImports), TVMFFIHandleInitOnce        tvm-ffi function objects
 *
 * and, for Python, KernelCall: one prepared tvm-ffi kernel call, run from C (the graph
 * executor's per-node call; ~50 ns against ~280 ns through ctypes).
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
 * Portable C99 plus pthreads and the GCC/Clang __atomic and __thread builtins; Linux
 * and macOS.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

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

#include "glibc_floor.h"
#include "native.h"

#define kDLCPU 1
#define WS_ALIGN 64
#define WS_HEADER 64
#define WS_MAGIC_USED 0x7476726d55534544ULL /* "tvrmUSED" */
#define WS_MAGIC_FREE 0x7476726d46524545ULL /* "tvrmFREE" */
#define MAX_THREADS 1024
#define ERROR_KIND_MAX 64
/* A kernel's error message is kept up to this many bytes, then cut with a note. */
#define ERROR_MESSAGE_MAX (64 * 1024)

/* ------------------------------------------------------------------------------------ */
/* Types of the C ABI                                                                    */

typedef struct {
  void* sync_handle;
  int32_t num_task;
} TVMParallelGroupEnv;

typedef int (*FTVMParallelLambda)(int task_id, TVMParallelGroupEnv* penv, void* cdata);

typedef int (*tvmrt_getfunc_cb)(void* mod_ctx, const char* name, void** out);
typedef int (*tvmrt_funccall_cb)(void* handle, TVMValue* args, int* codes, int num_args,
                                 TVMValue* ret_val, int* ret_code);
typedef int (*TVMBackendPackedCFunc)(TVMValue* args, int* codes, int num_args,
                                     TVMValue* ret_val, int* ret_code, void* resource);

/* ------------------------------------------------------------------------------------ */
/* Atomics and spinning                                                                  */

#define LOAD(p) __atomic_load_n((p), __ATOMIC_SEQ_CST)
#define LOAD_ACQ(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_SEQ_CST)
#define STORE_REL(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define FETCH_ADD(p, v) __atomic_fetch_add((p), (v), __ATOMIC_SEQ_CST)

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
  ws_bin* bins;
  int nbins;
  int bins_cap;
  int last_bin;
  size_t cached_bytes;
  int in_task; /* running a parallel task: nested launches run serially */
  int64_t stats[ST_COUNT]; /* written by the owning thread only */
  struct thread_state_s* prev;
  struct thread_state_s* next;
} thread_state;

static pthread_mutex_t g_threads_mu = PTHREAD_MUTEX_INITIALIZER;
static thread_state* g_threads;       /* live thread states, for statistics */
static int64_t g_retired[ST_COUNT];   /* counts of threads that have exited */
static int64_t g_baseline[ST_COUNT];  /* event counts at the last reset */

/* Add v to the calling thread's counter i: a plain load and store (only the owner writes). */
#define COUNT(ts, i, v)                                                                      \
  __atomic_store_n(&(ts)->stats[i], __atomic_load_n(&(ts)->stats[i], __ATOMIC_RELAXED) + (v), \
                   __ATOMIC_RELAXED)

static pthread_key_t g_tls_key;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static __thread thread_state* tls_state;

/* A thread caches at most this many bytes of freed workspace; beyond, frees go to the OS. */
static size_t g_cache_limit = (size_t)1 << 30;

static void ws_release_cache(thread_state* ts) {
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
  ws_release_cache(ts);
  pthread_mutex_lock(&g_threads_mu);
  for (i = 0; i < ST_COUNT; ++i) g_retired[i] += ts->stats[i];
  if (ts->prev != NULL) ts->prev->next = ts->next;
  else g_threads = ts->next;
  if (ts->next != NULL) ts->next->prev = ts->prev;
  pthread_mutex_unlock(&g_threads_mu);
  free(ts->bins);
  free(ts->err);
  free(ts);
  tls_state = NULL;
}

static void pool_init_sync(void);
static void pool_atfork_child(void);

static void global_init(void) {
  const char* spin = getenv("TVM_THREAD_POOL_SPIN_COUNT");
  pthread_key_create(&g_tls_key, thread_state_destroy);
  pool_init_sync();
  if (spin != NULL && *spin != '\0') {
    long v = strtol(spin, NULL, 10);
    if (v >= 0 && v <= 100000000L) g_spin_count = (int)v;
  }
  pthread_atfork(NULL, NULL, pool_atfork_child);
}

static thread_state* get_state(void) {
  thread_state* ts = tls_state;
  if (ts != NULL) return ts;
  pthread_once(&g_once, global_init);
  ts = (thread_state*)calloc(1, sizeof(thread_state));
  if (ts == NULL) return NULL;
  ts->last_bin = -1;
  pthread_mutex_lock(&g_threads_mu);
  ts->next = g_threads;
  if (g_threads != NULL) g_threads->prev = ts;
  g_threads = ts;
  pthread_mutex_unlock(&g_threads_mu);
  pthread_setspecific(g_tls_key, ts);
  tls_state = ts;
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

static void set_error_parts(const char* kind, const char** parts, int32_t nparts) {
  thread_state* ts = get_state();
  size_t total = 0, keep, off = 0;
  char note[96];
  int32_t i;
  if (ts == NULL) return;
  for (i = 0; i < nparts; ++i) total += parts[i] ? strlen(parts[i]) : 0;
  note[0] = '\0';
  keep = total;
  if (total > ERROR_MESSAGE_MAX) { /* a runaway message: keep its start, say so */
    keep = ERROR_MESSAGE_MAX;
    snprintf(note, sizeof(note), "... [cut by tvmrt: the message has %llu bytes]",
             (unsigned long long)total);
  }
  if (error_reserve(ts, keep + strlen(note)) != 0) {
    /* keep the start of the message at least */
    keep = ts->err_cap ? ts->err_cap - 1 : 0;
    note[0] = '\0';
    if (keep == 0) return;
  }
  for (i = 0; i < nparts && off < keep; ++i) {
    size_t n;
    if (parts[i] == NULL) continue;
    n = strlen(parts[i]);
    if (n > keep - off) n = keep - off;
    memcpy(ts->err + off, parts[i], n);
    off += n;
  }
  memcpy(ts->err + off, note, strlen(note) + 1);
  ts->err_set = 1;
  set_error_kind(ts, kind);
}

/* Forget this thread's error: every kernel call starts with an empty slot, so that a
 * message an earlier (successful) call left is never reported for a later one. */
static inline void clear_error(void) {
  thread_state* ts = tls_state;
  if (ts != NULL) ts->err_set = 0;
}

EXPORT void tvmrt_clear_last_error(void) { clear_error(); }

/* Call a legacy packed function with an empty error slot (the per-call Python path). */
EXPORT int tvmrt_call_packed(TVMBackendPackedCFunc f, TVMValue* args, int* codes, int num_args,
                             TVMValue* ret_val, int* ret_code) {
  clear_error();
  return f(args, codes, num_args, ret_val, ret_code, NULL);
}

static void set_error(const char* kind, const char* msg) { set_error_parts(kind, &msg, 1); }

/* Workspace on other devices (OpenCL, ...) is allocated by the Python device layer. */
typedef void* (*tvmrt_dev_alloc_cb)(int device_type, int device_id, uint64_t nbytes);
typedef int (*tvmrt_dev_free_cb)(int device_type, int device_id, void* ptr);
static tvmrt_dev_alloc_cb g_dev_alloc;
static tvmrt_dev_free_cb g_dev_free;

EXPORT void tvmrt_set_device_workspace_callbacks(tvmrt_dev_alloc_cb alloc, tvmrt_dev_free_cb fr) {
  g_dev_alloc = alloc;
  g_dev_free = fr;
}

static void set_device_error(const char* func, int device_type) {
  char buf[256];
  snprintf(buf, sizeof(buf),
           "%s: device type %d is not supported; tvmrt allocates workspace on the CPU "
           "(device type 1) only",
           func, device_type);
  set_error("", buf);
}

/* TVM's legacy error setter (a kernel calls it, then returns -1). */
EXPORT void TVMAPISetLastError(const char* msg) { set_error("", msg ? msg : ""); }

/* tvm-ffi's TVMFFIErrorSetRaisedFromCStr, under a private name (see the file comment). */
EXPORT void tvmrt_ffi_error_set_raised_from_cstr(const char* kind, const char* msg) {
  set_error(kind, msg ? msg : "");
}

/* tvm-ffi's TVMFFIErrorSetRaisedFromCStrParts, under a private name. */
EXPORT void tvmrt_ffi_error_set_raised_from_cstr_parts(const char* kind, const char** parts,
                                                        int32_t num_parts) {
  set_error_parts(kind, parts, num_parts < 0 ? 0 : num_parts);
}

/* The message of this thread's last error (NULL if none) and its kind ("" for legacy);
 * clears the slot. The text stays valid until the next error on this thread. */
EXPORT const char* tvmrt_take_last_error(const char** kind) {
  thread_state* ts = get_state();
  if (ts == NULL || !ts->err_set) {
    if (kind != NULL) *kind = "";
    return NULL;
  }
  ts->err_set = 0;
  if (kind != NULL) *kind = ts->err_kind;
  return ts->err;
}

/* ------------------------------------------------------------------------------------ */
/* Workspace                                                                             */

static ws_bin* ws_find_bin(thread_state* ts, size_t size, int create) {
  int i;
  if (ts->last_bin >= 0 && ts->bins[ts->last_bin].size == size) return &ts->bins[ts->last_bin];
  for (i = 0; i < ts->nbins; ++i) {
    if (ts->bins[i].size == size) {
      ts->last_bin = i;
      return &ts->bins[i];
    }
  }
  if (!create) return NULL;
  if (ts->nbins == ts->bins_cap) {
    int cap = ts->bins_cap ? ts->bins_cap * 2 : 16;
    ws_bin* bins = (ws_bin*)realloc(ts->bins, (size_t)cap * sizeof(ws_bin));
    if (bins == NULL) return NULL;
    ts->bins = bins;
    ts->bins_cap = cap;
  }
  ts->bins[ts->nbins].size = size;
  ts->bins[ts->nbins].head = NULL;
  ts->last_bin = ts->nbins;
  return &ts->bins[ts->nbins++];
}

EXPORT void* TVMBackendAllocWorkspace(int device_type, int device_id, uint64_t nbytes,
                                      int dtype_code_hint, int dtype_bits_hint) {
  thread_state* ts;
  ws_bin* bin;
  ws_header* h;
  size_t size;
  void* raw = NULL;
  (void)device_id;
  (void)dtype_code_hint;
  (void)dtype_bits_hint;
  ts = get_state();
  if (ts == NULL) {
    set_error("", "TVMBackendAllocWorkspace: out of memory for the thread state");
    return NULL;
  }
  COUNT(ts, ST_WS_ALLOCS, 1);
  if (device_type != kDLCPU) {
    if (g_dev_alloc != NULL) return g_dev_alloc(device_type, device_id, nbytes);
    set_device_error("TVMBackendAllocWorkspace", device_type);
    return NULL;
  }
  if (nbytes > (uint64_t)SIZE_MAX - 2 * WS_ALIGN) {
    char buf[128];
    snprintf(buf, sizeof(buf), "TVMBackendAllocWorkspace: cannot allocate %llu bytes",
             (unsigned long long)nbytes);
    set_error("", buf);
    return NULL;
  }
  size = ((size_t)nbytes + WS_ALIGN - 1) & ~(size_t)(WS_ALIGN - 1);
  if (size == 0) size = WS_ALIGN;
  bin = ws_find_bin(ts, size, 0);
  if (bin != NULL && bin->head != NULL) {
    h = bin->head;
    bin->head = h->next;
    ts->cached_bytes -= size;
    COUNT(ts, ST_WS_BYTES_CACHED, -(int64_t)size);
  } else {
    if (posix_memalign(&raw, WS_ALIGN, size + WS_HEADER) != 0 || raw == NULL) {
      char buf[160];
      snprintf(buf, sizeof(buf), "TVMBackendAllocWorkspace: out of memory allocating %llu bytes",
               (unsigned long long)nbytes);
      set_error("", buf);
      return NULL;
    }
    h = (ws_header*)raw;
    h->size = size;
    COUNT(ts, ST_WS_SYSTEM_ALLOCS, 1);
  }
  h->magic = WS_MAGIC_USED;
  h->next = NULL;
  COUNT(ts, ST_WS_BYTES_IN_USE, (int64_t)size);
  return (char*)h + WS_HEADER;
}

EXPORT int TVMBackendFreeWorkspace(int device_type, int device_id, void* ptr) {
  thread_state* ts;
  ws_header* h;
  ws_bin* bin;
  (void)device_id;
  ts = get_state();
  if (ts != NULL) COUNT(ts, ST_WS_FREES, 1);
  if (ptr == NULL) return 0;
  if (device_type != kDLCPU) {
    if (g_dev_free != NULL) return g_dev_free(device_type, device_id, ptr);
    set_device_error("TVMBackendFreeWorkspace", device_type);
    return -1;
  }
  if (((uintptr_t)ptr & (WS_ALIGN - 1)) != 0) {
    set_error("", "TVMBackendFreeWorkspace: pointer was not returned by TVMBackendAllocWorkspace");
    return -1;
  }
  h = (ws_header*)((char*)ptr - WS_HEADER);
  if (h->magic == WS_MAGIC_FREE) {
    set_error("", "TVMBackendFreeWorkspace: workspace freed twice");
    return -1;
  }
  if (h->magic != WS_MAGIC_USED) {
    set_error("", "TVMBackendFreeWorkspace: pointer was not returned by TVMBackendAllocWorkspace");
    return -1;
  }
  if (ts == NULL) {
    h->magic = 0;
    free(h);
    return 0;
  }
  COUNT(ts, ST_WS_BYTES_IN_USE, -(int64_t)h->size);
  bin = ts->cached_bytes + h->size <= g_cache_limit
            ? ws_find_bin(ts, h->size, 1)
            : NULL;
  if (bin == NULL) {
    h->magic = 0;
    free(h);
    return 0;
  }
  h->magic = WS_MAGIC_FREE;
  h->next = bin->head; /* LIFO: the most recently freed block is reused first */
  bin->head = h;
  ts->cached_bytes += h->size;
  COUNT(ts, ST_WS_BYTES_CACHED, (int64_t)h->size);
  return 0;
}

/* Free the calling thread's cached workspace blocks. */
EXPORT void tvmrt_release_workspace_cache(void) {
  thread_state* ts = get_state();
  if (ts != NULL) ws_release_cache(ts);
}

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
  int num_threads;    /* configured size, including the launching thread; 0 = not decided */
  int num_workers;    /* worker threads running */
  pthread_t* threads;
  int busy;           /* a launch owns the pool */
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

static pool_t g_pool; /* mutex and condition variables are set up by global_init() */
static pthread_mutex_t g_config_mu = PTHREAD_MUTEX_INITIALIZER;

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

EXPORT int tvmrt_get_num_threads(void) {
  int n = LOAD(&g_pool.num_threads);
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
  thread_state* ts = get_state();
  const char* msg = (ts != NULL && ts->err_set) ? ts->err : fallback;
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
  ts = get_state();
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
    set_error("", buf);
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
  pthread_mutex_init(&g_threads_mu, NULL);
  g_pool.threads = NULL;
  g_pool.num_workers = 0;
  g_pool.busy = 0;
  g_pool.shutdown = 0;
  g_pool.sleepers = 0;
  g_pool.launcher_waiting = 0;
  g_pool.pending = 0;
}

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

EXPORT int TVMBackendParallelLaunch(FTVMParallelLambda flambda, void* cdata, int num_task) {
  thread_state* ts = get_state();
  int total = tvmrt_get_num_threads();
  int n, rc, i;
  if (ts != NULL) COUNT(ts, ST_LAUNCHES, 1);
  if (flambda == NULL) {
    set_error("", "TVMBackendParallelLaunch: the task function is NULL");
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
    if (g_pool.first_error != NULL) set_error(g_pool.first_error_kind, g_pool.first_error);
    else set_error("", "a parallel task failed");
    rc = -1;
  }
  free(g_pool.first_error);
  g_pool.first_error = NULL;
  release_pool();
  return rc;
}

EXPORT int TVMBackendParallelBarrier(int task_id, TVMParallelGroupEnv* penv) {
  barrier_t* b;
  int gen, i;
  thread_state* ts = get_state();
  (void)task_id;
  if (ts != NULL) COUNT(ts, ST_BARRIERS, 1);
  if (penv == NULL || penv->num_task <= 1) return 0;
  b = (barrier_t*)penv->sync_handle;
  if (b == NULL) {
    set_error("", "TVMBackendParallelBarrier: the group has no barrier");
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
EXPORT int tvmrt_set_num_threads(int n) {
  thread_state* ts = get_state();
  if (ts != NULL && ts->in_task) {
    set_error("", "tvmrt_set_num_threads: cannot resize the pool from inside a parallel task");
    return -1;
  }
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

EXPORT void tvmrt_set_spin_count(int n) { g_spin_count = n < 0 ? 0 : n; }

EXPORT int tvmrt_get_spin_count(void) { return g_spin_count; }

/* ------------------------------------------------------------------------------------ */
/* Function environment, forwarded to callbacks installed by the Python side             */

static tvmrt_getfunc_cb g_getfunc;
static tvmrt_funccall_cb g_funccall;

EXPORT void tvmrt_set_env_callbacks(tvmrt_getfunc_cb getfunc, tvmrt_funccall_cb funccall) {
  g_getfunc = getfunc;
  g_funccall = funccall;
}

EXPORT int TVMBackendGetFuncFromEnv(void* mod_node, const char* func_name, void** out) {
  if (g_getfunc == NULL) {
    set_error("", "TVMBackendGetFuncFromEnv: the tvmrt function environment is not set up");
    return -1;
  }
  return g_getfunc(mod_node, func_name, out);
}

/* Tables of packed functions implemented in C (sort.c registers its own). A table is
   written before the count that publishes it, and never removed. */
static const tvmrt_native_entry* g_native_tables[TVMRT_NATIVE_TABLES];
static int g_native_sizes[TVMRT_NATIVE_TABLES];
static int g_native_count = 0;
static pthread_mutex_t g_native_mu = PTHREAD_MUTEX_INITIALIZER;

int tvmrt_register_native_table(const tvmrt_native_entry* table, int count) {
  int i, n, status = 0;
  pthread_mutex_lock(&g_native_mu);
  n = __atomic_load_n(&g_native_count, __ATOMIC_RELAXED);
  for (i = 0; i < n; ++i)
    if (g_native_tables[i] == table) break;
  if (i == n) {
    if (n == TVMRT_NATIVE_TABLES || table == NULL || count <= 0) {
      status = -1;
    } else {
      g_native_tables[n] = table;
      g_native_sizes[n] = count;
      __atomic_store_n(&g_native_count, n + 1, __ATOMIC_RELEASE);
    }
  }
  pthread_mutex_unlock(&g_native_mu);
  return status;
}

/* The entry `handle` points to, or NULL if it is not a registered native function. */
static const tvmrt_native_entry* native_entry_of(const void* handle) {
  int i, n = __atomic_load_n(&g_native_count, __ATOMIC_ACQUIRE);
  const char* h = (const char*)handle;
  for (i = 0; i < n; ++i) {
    const char* lo = (const char*)g_native_tables[i];
    const char* hi = (const char*)(g_native_tables[i] + g_native_sizes[i]);
    if (h >= lo && h < hi && (size_t)(h - lo) % sizeof(tvmrt_native_entry) == 0)
      return (const tvmrt_native_entry*)handle;
  }
  return NULL;
}

EXPORT int TVMFuncCall(void* func, TVMValue* args, int* arg_type_codes, int num_args,
                       TVMValue* ret_val, int* ret_type_code) {
  const tvmrt_native_entry* native = native_entry_of(func);
  if (native != NULL) { /* a function tvmrt implements in C (sort.c): no Python */
    *ret_type_code = 4; /* kTVMNullptr: these return nothing */
    return native->fn(args, arg_type_codes, num_args, ret_val, ret_type_code);
  }
  if (g_funccall == NULL) {
    set_error("", "TVMFuncCall: the tvmrt function environment is not set up");
    return -1;
  }
  return g_funccall(func, args, arg_type_codes, num_args, ret_val, ret_type_code);
}

/* ------------------------------------------------------------------------------------ */
/* tvm-ffi function environment: not served                                              */
/*                                                                                        */
/* tvm-ffi kernels look functions up (call_packed externs, device launches) through       */
/* TVMBackendGetFuncFromEnv / TVMFFIEnvModLookupFromImports and call them through         */
/* TVMFFIFunctionCall with TVMFFIAny arguments. tvmrt has no tvm-ffi function objects to  */
/* hand out, so these report a clear error instead of running the legacy ABI's versions   */
/* (whose handles and argument layout differ).                                             */

static int ffi_lookup_unsupported(const char* service, const char* func_name) {
  char buf[320];
  snprintf(buf, sizeof(buf),
           "%s: the kernel looks up function '%s' (a call_packed extern or device kernel); "
           "tvmrt does not provide tvm-ffi functions to kernels",
           service, func_name != NULL ? func_name : "");
  set_error("RuntimeError", buf);
  return -1;
}

EXPORT int tvmrt_ffi_get_func_from_env(void* mod_ctx, const char* func_name, void** out) {
  if (out != NULL) *out = NULL;
  return ffi_lookup_unsupported("TVMBackendGetFuncFromEnv", func_name);
}

EXPORT int tvmrt_ffi_env_mod_lookup_from_imports(void* library_ctx, const char* func_name,
                                                 void** out) {
  if (out != NULL) *out = NULL;
  return ffi_lookup_unsupported("TVMFFIEnvModLookupFromImports", func_name);
}

EXPORT int tvmrt_ffi_function_call(void* func, void* args, int32_t num_args, void* result) {
  set_error("RuntimeError", "TVMFFIFunctionCall: tvmrt does not provide tvm-ffi functions to "
                            "kernels");
  return -1;
}

/* TVMFFIHandleInitOnce: run init_func once per handle (thread-safe). */
static pthread_mutex_t g_init_once_mu = PTHREAD_MUTEX_INITIALIZER;

EXPORT int tvmrt_ffi_handle_init_once(void** handle_addr, int (*init_func)(void** result)) {
  void* value;
  int rc = 0;
  if (handle_addr == NULL || init_func == NULL) {
    set_error("RuntimeError", "TVMFFIHandleInitOnce: NULL handle address or init function");
    return -1;
  }
  if (__atomic_load_n(handle_addr, __ATOMIC_ACQUIRE) != NULL) return 0;
  pthread_mutex_lock(&g_init_once_mu);
  if (*handle_addr == NULL) {
    value = NULL;
    rc = init_func(&value);
    if (rc == 0) __atomic_store_n(handle_addr, value, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&g_init_once_mu);
  return rc;
}

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

EXPORT int TVMBackendRegisterSystemLibSymbol(const char* name, void* ptr) {
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
EXPORT void* tvmrt_system_lib_lookup(const char* name) {
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

EXPORT int64_t tvmrt_system_lib_generation(void) {
  int64_t g;
  pthread_mutex_lock(&g_syslib_mu);
  g = g_syslib_generation;
  pthread_mutex_unlock(&g_syslib_mu);
  return g;
}

/* The name of entry `index` (names are never freed), or NULL past the end. */
EXPORT const char* tvmrt_system_lib_name(int64_t index) {
  const char* name = NULL;
  pthread_mutex_lock(&g_syslib_mu);
  if (index >= 0 && (size_t)index < g_syslib_count) name = g_syslib[index].name;
  pthread_mutex_unlock(&g_syslib_mu);
  return name;
}

/* ------------------------------------------------------------------------------------ */
/* Statistics and measurement helpers (tests and benchmarks)                             */

static int is_gauge(int i) { return i == ST_WS_BYTES_CACHED || i == ST_WS_BYTES_IN_USE; }

static void sum_stats(int64_t* total) {
  thread_state* ts;
  int i;
  for (i = 0; i < ST_COUNT; ++i) total[i] = g_retired[i];
  for (ts = g_threads; ts != NULL; ts = ts->next) {
    for (i = 0; i < ST_COUNT; ++i) total[i] += __atomic_load_n(&ts->stats[i], __ATOMIC_RELAXED);
  }
}

/* Copy up to n counters into out; returns the number of counters. */
EXPORT int tvmrt_get_stats(int64_t* out, int n) {
  int64_t total[ST_COUNT];
  int i;
  pthread_mutex_lock(&g_threads_mu);
  sum_stats(total);
  for (i = 0; i < ST_COUNT; ++i) {
    if (!is_gauge(i)) total[i] -= g_baseline[i];
  }
  pthread_mutex_unlock(&g_threads_mu);
  for (i = 0; i < n && i < ST_COUNT; ++i) out[i] = total[i];
  return ST_COUNT;
}

/* Zero the event counters (not the byte gauges). */
EXPORT void tvmrt_reset_stats(void) {
  pthread_mutex_lock(&g_threads_mu);
  sum_stats(g_baseline);
  pthread_mutex_unlock(&g_threads_mu);
}

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

/* Call `count` legacy packed functions back to back with prebuilt arguments, `repeat`
 * times, without the interpreter in between. Returns the elapsed nanoseconds, or -1 if a
 * call failed (its error is set). Used to measure the cost of dispatching from Python. */
EXPORT int64_t tvmrt_time_call_sequence(int count, void** funcs, void** args, void** codes,
                                        int* num_args, int repeat) {
  TVMValue ret;
  int ret_code, r, i;
  uint64_t start = now_ns();
  for (r = 0; r < repeat; ++r) {
    for (i = 0; i < count; ++i) {
      TVMBackendPackedCFunc f = (TVMBackendPackedCFunc)funcs[i];
      ret_code = 4;
      if (f((TVMValue*)args[i], (int*)codes[i], num_args[i], &ret, &ret_code, NULL) != 0)
        return -1;
    }
  }
  return (int64_t)(now_ns() - start);
}

typedef struct {
  int32_t type_index;
  uint32_t zero_padding;
  int64_t v_int64;
} TVMFFIAny;

typedef int (*TVMFFISafeCallType)(void* self, const TVMFFIAny* args, int32_t num_args,
                                  TVMFFIAny* result);

/* Like tvmrt_time_call_sequence, for tvm-ffi kernels: f(NULL, args[i], num_args[i], &ret). */
EXPORT int64_t tvmrt_time_ffi_call_sequence(int count, void** funcs, void** args, int* num_args,
                                            int repeat) {
  TVMFFIAny ret;
  int r, i;
  uint64_t start = now_ns();
  for (r = 0; r < repeat; ++r) {
    for (i = 0; i < count; ++i) {
      ret.type_index = 0;
      ret.zero_padding = 0;
      ret.v_int64 = 0;
      if (((TVMFFISafeCallType)funcs[i])(NULL, (const TVMFFIAny*)args[i], num_args[i], &ret) != 0)
        return -1;
    }
  }
  return (int64_t)(now_ns() - start);
}

static int empty_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  (void)task_id;
  (void)penv;
  (void)cdata;
  return 0;
}

/* Nanoseconds per empty parallel launch (the pool's own overhead), over `repeat` launches. */
EXPORT double tvmrt_time_empty_launch(int repeat) {
  int r;
  uint64_t start;
  if (repeat <= 0) return 0.0;
  start = now_ns();
  for (r = 0; r < repeat; ++r) TVMBackendParallelLaunch(empty_task, NULL, 0);
  return (double)(now_ns() - start) / repeat;
}

/* Nanoseconds per workspace alloc+free pair of `nbytes`, over `repeat` pairs. */
EXPORT double tvmrt_time_workspace(uint64_t nbytes, int repeat) {
  int r;
  uint64_t start;
  if (repeat <= 0) return 0.0;
  start = now_ns();
  for (r = 0; r < repeat; ++r) {
    void* p = TVMBackendAllocWorkspace(kDLCPU, 0, nbytes, 2, 32);
    if (p == NULL) return -1.0;
    TVMBackendFreeWorkspace(kDLCPU, 0, p);
  }
  return (double)(now_ns() - start) / repeat;
}

/* ------------------------------------------------------------------------------------ */
/* Python side: KernelCall, one prepared tvm-ffi kernel call                             */
/*                                                                                        */
/* The library is mostly used through ctypes. The exception is the per-node call of the  */
/* graph executor: a ctypes call costs ~280 ns (~350 ns with an errcheck), so prepared     */
/* tvm-ffi calls are objects of this type instead. Calling one (no arguments) releases    */
/* the GIL, runs f(NULL, args, num_args, result) and, if the kernel fails, calls the       */
/* Python `on_error` callable, which raises. The argument memory is owned by `keep`.       */

typedef struct {
  PyObject_HEAD
  TVMFFISafeCallType func;
  const TVMFFIAny* args;
  int32_t num_args;
  TVMFFIAny* result;
  PyObject* on_error;
  PyObject* keep;
} KernelCall;

static PyObject* kernel_call_call(PyObject* self_obj, PyObject* args, PyObject* kwargs) {
  KernelCall* self = (KernelCall*)self_obj;
  PyThreadState* saved;
  int rc;
  if ((args != NULL && PyTuple_Size(args) != 0) || (kwargs != NULL && PyDict_Size(kwargs) != 0)) {
    PyErr_SetString(PyExc_TypeError, "a prepared kernel call takes no arguments");
    return NULL;
  }
  self->result->type_index = 0;
  self->result->zero_padding = 0;
  self->result->v_int64 = 0;
  clear_error();
  saved = PyEval_SaveThread();
  rc = self->func(NULL, self->args, self->num_args, self->result);
  PyEval_RestoreThread(saved);
  if (rc == 0) Py_RETURN_NONE;
  {
    PyObject* out = PyObject_CallObject(self->on_error, NULL);
    if (out == NULL) return NULL; /* the usual case: on_error raised */
    Py_DECREF(out);
    PyErr_SetString(PyExc_RuntimeError, "the kernel failed and its error handler did not raise");
    return NULL;
  }
}

static void kernel_call_dealloc(PyObject* self_obj) {
  KernelCall* self = (KernelCall*)self_obj;
  PyTypeObject* tp = Py_TYPE(self_obj);
  freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
  Py_XDECREF(self->on_error);
  Py_XDECREF(self->keep);
  tp_free(self_obj);
  Py_DECREF(tp);
}

static PyObject* kernel_call_parts(PyObject* self_obj, PyObject* unused) {
  KernelCall* self = (KernelCall*)self_obj;
  return Py_BuildValue("(KKiK)", (unsigned long long)(uintptr_t)self->func,
                       (unsigned long long)(uintptr_t)self->args, (int)self->num_args,
                       (unsigned long long)(uintptr_t)self->result);
}

static PyMethodDef kernel_call_methods[] = {
    {"parts", kernel_call_parts, METH_NOARGS,
     "(function, TVMFFIAny* args, num_args, TVMFFIAny* result) addresses."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot kernel_call_slots[] = {
    {Py_tp_call, (void*)kernel_call_call},
    {Py_tp_dealloc, (void*)kernel_call_dealloc},
    {Py_tp_methods, (void*)kernel_call_methods},
    {Py_tp_doc, (void*)"A prepared tvm-ffi kernel call: calling it (no arguments) runs the "
                       "kernel."},
    {0, NULL},
};

static PyType_Spec kernel_call_spec = {
    "tvmrt._native_backend.KernelCall", sizeof(KernelCall), 0, Py_TPFLAGS_DEFAULT,
    kernel_call_slots,
};

static PyObject* g_kernel_call_type;

/* make_kernel_call(func, args, num_args, result, on_error, keep) -> KernelCall */
static PyObject* make_kernel_call(PyObject* module, PyObject* args) {
  unsigned long long func, argv, result;
  int num_args;
  PyObject *on_error, *keep;
  KernelCall* self;
  if (!PyArg_ParseTuple(args, "KKiKOO:make_kernel_call", &func, &argv, &num_args, &result,
                        &on_error, &keep))
    return NULL;
  if (func == 0 || result == 0 || (argv == 0 && num_args > 0) || num_args < 0) {
    PyErr_SetString(PyExc_ValueError, "make_kernel_call: NULL function, arguments or result");
    return NULL;
  }
  if (!PyCallable_Check(on_error)) {
    PyErr_SetString(PyExc_TypeError, "make_kernel_call: on_error must be callable");
    return NULL;
  }
  self = (KernelCall*)PyType_GenericAlloc((PyTypeObject*)g_kernel_call_type, 0);
  if (self == NULL) return NULL;
  self->func = (TVMFFISafeCallType)(uintptr_t)func;
  self->args = (const TVMFFIAny*)(uintptr_t)argv;
  self->num_args = (int32_t)num_args;
  self->result = (TVMFFIAny*)(uintptr_t)result;
  Py_INCREF(on_error);
  self->on_error = on_error;
  Py_INCREF(keep);
  self->keep = keep;
  return (PyObject*)self;
}

static PyMethodDef native_backend_methods[] = {
    {"make_kernel_call", make_kernel_call, METH_VARARGS,
     "make_kernel_call(func, args, num_args, result, on_error, keep): a prepared tvm-ffi "
     "kernel call."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef native_backend_module = {
    PyModuleDef_HEAD_INIT, "_native_backend",
    "tvmrt's native backend for compiled kernels (mostly used through ctypes).", -1,
    native_backend_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native_backend(void) {
  PyObject* module = PyModule_Create(&native_backend_module);
  if (module == NULL) return NULL;
  if (g_kernel_call_type == NULL) {
    g_kernel_call_type = PyType_FromSpec(&kernel_call_spec);
    if (g_kernel_call_type == NULL) {
      Py_DECREF(module);
      return NULL;
    }
  }
  Py_INCREF(g_kernel_call_type);
  if (PyModule_AddObject(module, "KernelCall", g_kernel_call_type) != 0) {
    Py_DECREF(g_kernel_call_type);
    Py_DECREF(module);
    return NULL;
  }
  return module;
}
