/*
 * TVMBackendAllocWorkspace / TVMBackendFreeWorkspace: 64-byte aligned blocks from
 * per-thread LIFO free lists keyed by size (see services.c for the whole picture).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "services.h"

/* A thread caches at most this many bytes of freed workspace; beyond, frees go to the OS. */
static size_t g_cache_limit = (size_t)1 << 30;

/* Workspace on other devices: the host's allocator (the Python device layer, once it has
   loaded a device module: CUDA, OpenCL, emulated devices) where one is installed, else the C
   runtime's for the device types it serves (its device backends, registered when the
   library loads). A block goes back to whichever made it: the runtime's free answers 1 for
   a pointer it did not hand out. */
static tvmrt_dev_alloc_cb g_dev_alloc;
static tvmrt_dev_free_cb g_dev_free;
#define MAX_RT_DEVICE_TYPES 8
static struct {
  int device_type;
  tvmrt_dev_alloc_cb alloc;
  tvmrt_dev_free_cb free;
} g_rt_dev[MAX_RT_DEVICE_TYPES];
static int g_num_rt_dev;

TVM_DLL void tvmrt_set_device_workspace_callbacks(tvmrt_dev_alloc_cb alloc, tvmrt_dev_free_cb fr) {
  g_dev_alloc = alloc;
  g_dev_free = fr;
}

/* called while the library loads (one thread), once per device type */
void tvmrt_set_runtime_device_workspace(int device_type, tvmrt_dev_alloc_cb alloc,
                                        tvmrt_dev_free_cb fr) {
  if (g_num_rt_dev == MAX_RT_DEVICE_TYPES) return;
  g_rt_dev[g_num_rt_dev].device_type = device_type;
  g_rt_dev[g_num_rt_dev].alloc = alloc;
  g_rt_dev[g_num_rt_dev++].free = fr;
}

static _Thread_local int t_runtime_caller;

int tvmrt_runtime_caller(int on) {
  int was = t_runtime_caller;
  t_runtime_caller = on;
  return was;
}

static int rt_dev_index(int device_type) {
  int i;
  for (i = 0; i < g_num_rt_dev && g_rt_dev[i].device_type != device_type; ++i) {
  }
  return i < g_num_rt_dev ? i : -1;
}

static void set_device_error(const char* func, int device_type) {
  char buf[256];
  snprintf(buf, sizeof(buf),
           "%s: device type %d is not supported; tvmrt allocates workspace on the CPU "
           "(device type 1) only",
           func, device_type);
  tvmrt_fail("", "%s", buf);
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

TVM_DLL void* TVMBackendAllocWorkspace(int device_type, int device_id, uint64_t nbytes,
                                       int dtype_code_hint, int dtype_bits_hint) {
  thread_state* ts;
  ws_bin* bin;
  ws_header* h;
  size_t size;
  void* raw = NULL;
  (void)device_id;
  (void)dtype_code_hint;
  (void)dtype_bits_hint;
  ts = tvmrt_svc_state();
  if (ts == NULL) {
    tvmrt_fail("", "%s", "TVMBackendAllocWorkspace: out of memory for the thread state");
    return NULL;
  }
  COUNT(ts, ST_WS_ALLOCS, 1);
  if (device_type != kDLCPU) {
    int rt = rt_dev_index(device_type);
    if (rt >= 0 && (t_runtime_caller || g_dev_alloc == NULL))
      return g_rt_dev[rt].alloc(device_type, device_id, nbytes);
    if (g_dev_alloc != NULL) return g_dev_alloc(device_type, device_id, nbytes);
    set_device_error("TVMBackendAllocWorkspace", device_type);
    return NULL;
  }
  if (nbytes > (uint64_t)SIZE_MAX - 2 * WS_ALIGN) {
    char buf[128];
    snprintf(buf, sizeof(buf), "TVMBackendAllocWorkspace: cannot allocate %llu bytes",
             (unsigned long long)nbytes);
    tvmrt_fail("", "%s", buf);
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
      tvmrt_fail("", "%s", buf);
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

TVM_DLL int TVMBackendFreeWorkspace(int device_type, int device_id, void* ptr) {
  thread_state* ts;
  ws_header* h;
  ws_bin* bin;
  (void)device_id;
  ts = tvmrt_svc_state();
  if (ts != NULL) COUNT(ts, ST_WS_FREES, 1);
  if (ptr == NULL) return 0;
  if (device_type != kDLCPU) {
    int rt = rt_dev_index(device_type);
    if (rt >= 0) {
      int rc = g_rt_dev[rt].free(device_type, device_id, ptr);
      if (rc != 1) return rc;
      if (g_dev_free == NULL) {
        tvmrt_fail("",
                   "TVMBackendFreeWorkspace: %p is not workspace of device type %d allocated "
                   "by TVMBackendAllocWorkspace",
                   ptr, device_type);
        return -1;
      }
    }
    if (g_dev_free != NULL) return g_dev_free(device_type, device_id, ptr);
    set_device_error("TVMBackendFreeWorkspace", device_type);
    return -1;
  }
  if (((uintptr_t)ptr & (WS_ALIGN - 1)) != 0) {
    tvmrt_fail("", "%s",
               "TVMBackendFreeWorkspace: pointer was not returned by TVMBackendAllocWorkspace");
    return -1;
  }
  h = (ws_header*)((char*)ptr - WS_HEADER);
  if (h->magic == WS_MAGIC_FREE) {
    tvmrt_fail("", "%s", "TVMBackendFreeWorkspace: workspace freed twice");
    return -1;
  }
  if (h->magic != WS_MAGIC_USED) {
    tvmrt_fail("", "%s",
               "TVMBackendFreeWorkspace: pointer was not returned by TVMBackendAllocWorkspace");
    return -1;
  }
  if (ts == NULL) {
    h->magic = 0;
    free(h);
    return 0;
  }
  COUNT(ts, ST_WS_BYTES_IN_USE, -(int64_t)h->size);
  bin = ts->cached_bytes + h->size <= g_cache_limit ? ws_find_bin(ts, h->size, 1) : NULL;
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
TVM_DLL void tvmrt_release_workspace_cache(void) {
  thread_state* ts = tvmrt_svc_state();
  if (ts != NULL) tvmrt_svc_ws_release_cache(ts);
}
