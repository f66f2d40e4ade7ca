/*
 * The C runtime's devices: one table of backends (the CPU is the host and needs none), so a
 * new device is one file (cuda.c, opencl.c) and one line in k_backends. Arrays, streams, the
 * executors and the workspace ask the table; none names a device type of its own. Here too
 * what every device shares: the workspace pool kernels allocate from, the device
 * __tvm_set_device selects for a thread's next launches, and the devices of a packed call's
 * arguments.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

#define PAGE 4096

static const tvmrt_device_backend* const k_backends[] = {
    &tvmrt_cuda_backend,
    &tvmrt_opencl_backend,
};
#define NUM_BACKENDS (sizeof(k_backends) / sizeof(k_backends[0]))

const tvmrt_device_backend* tvmrt_device_backend_of(int device_type) {
  size_t i;
  for (i = 0; i < NUM_BACKENDS; ++i) {
    if (k_backends[i]->device_type == device_type) return k_backends[i];
  }
  return NULL;
}

int tvmrt_device_supported(int64_t device_type) {
  return device_type == kDLCPU || (device_type > 0 && device_type <= INT32_MAX &&
                                   tvmrt_device_backend_of((int)device_type) != NULL);
}

static char g_backends[256];
static pthread_once_t g_backends_once = PTHREAD_ONCE_INIT;

static void list_backends(void) {
  size_t i, at = (size_t)snprintf(g_backends, sizeof(g_backends), "cpu");
  for (i = 0; i < NUM_BACKENDS && at < sizeof(g_backends); ++i) {
    at += (size_t)snprintf(g_backends + at, sizeof(g_backends) - at, "%s%s",
                           i + 1 == NUM_BACKENDS ? " and " : ", ", k_backends[i]->name);
  }
}

const char* tvmrt_device_backends(void) {
  pthread_once(&g_backends_once, list_backends); /* whole before any thread reads it */
  return g_backends;
}

const tvmrt_device_backend* const* tvmrt_device_backend_list(size_t* count) {
  *count = NUM_BACKENDS;
  return k_backends;
}

int tvmrt_device_ready(int device_type, int device_id, const char* what) {
  static const char* names[] = {NULL,     "cpu",       "cuda",    "cuda_host",    "opencl",
                                NULL,     NULL,        "vulkan",  "metal",        "vpi",
                                "rocm",   "rocm_host", "ext_dev", "cuda_managed", "oneapi",
                                "webgpu", "hexagon"};
  const tvmrt_device_backend* backend = tvmrt_device_backend_of(device_type);
  char label[96];
  if (device_type == kDLCPU) return 0;
  if (backend != NULL) return backend->activate(device_id);
  if (device_type >= 0 && device_type <= 16 && names[device_type] != NULL) {
    snprintf(label, sizeof(label), "device %s(%d)", names[device_type], device_id);
  } else {
    snprintf(label, sizeof(label), "device type %d (%s)", device_type, what);
  }
  return tvmrt_fail("DeviceUnavailableError",
                    "no backend for %s: here tvmrt runs compiled kernels on cpu (the C runtime "
                    "ships backends for %s)",
                    label, tvmrt_device_backends());
}

/* ---------------------------------------------------------------------------------- */
/* TVMBackendAllocWorkspace on a device: a pool of freed blocks per process, reused by the */
/* next request of that device that fits (TVM's WorkspacePool), page-rounded               */

typedef struct ws_block {
  void* ptr;
  size_t size;
  int device_type, device_id, in_use;
  struct ws_block* next;
} ws_block;
static ws_block* g_blocks;
static pthread_mutex_t g_ws_mu = PTHREAD_MUTEX_INITIALIZER;

void* tvmrt_device_workspace_alloc(int device_type, int device_id, uint64_t nbytes) {
  const tvmrt_device_backend* backend = tvmrt_device_backend_of(device_type);
  ws_block *b, *best = NULL;
  size_t want;
  void* ptr;
  if (backend == NULL) {
    tvmrt_fail("DeviceUnavailableError",
               "TVMBackendAllocWorkspace: device type %d is not supported; libtvmrt_runtime "
               "allocates workspace on %s",
               device_type, tvmrt_device_backends());
    return NULL;
  }
  if (nbytes > (uint64_t)SIZE_MAX - PAGE) {
    tvmrt_fail("DeviceOutOfMemoryError", "TVMBackendAllocWorkspace: cannot allocate %llu bytes",
               (unsigned long long)nbytes);
    return NULL;
  }
  want = (size_t)((nbytes ? nbytes : 1) + PAGE - 1) / PAGE * PAGE;
  pthread_mutex_lock(&g_ws_mu);
  for (b = g_blocks; b != NULL; b = b->next) {
    if (!b->in_use && b->device_type == device_type && b->device_id == device_id &&
        b->size >= want && (best == NULL || b->size < best->size)) {
      best = b;
    }
  }
  if (best != NULL) best->in_use = 1;
  pthread_mutex_unlock(&g_ws_mu);
  if (best != NULL) return best->ptr;
  if (backend->alloc(device_id, want, &ptr) != 0) {
    char msg[1024], kind[64];
    const char* k = "";
    const char* m = tvmrt_take_last_error(&k);
    snprintf(msg, sizeof(msg), "%s", m != NULL ? m : "the device allocation failed");
    snprintf(kind, sizeof(kind), "%s", k != NULL ? k : "");
    if (*kind) tvmrt_fail("", "TVMBackendAllocWorkspace: %s: %s", kind, msg); /* as kernels do */
    else tvmrt_fail("", "TVMBackendAllocWorkspace: %s", msg);
    return NULL;
  }
  b = (ws_block*)calloc(1, sizeof(ws_block));
  if (b == NULL) {
    backend->free(device_id, ptr);
    tvmrt_fail("DeviceOutOfMemoryError", "cannot record a workspace block");
    return NULL;
  }
  b->ptr = ptr;
  b->size = want;
  b->device_type = device_type;
  b->device_id = device_id;
  b->in_use = 1;
  pthread_mutex_lock(&g_ws_mu);
  b->next = g_blocks;
  g_blocks = b;
  pthread_mutex_unlock(&g_ws_mu);
  return ptr;
}

int tvmrt_device_workspace_free(int device_type, int device_id, void* ptr) {
  ws_block* b;
  pthread_mutex_lock(&g_ws_mu);
  for (b = g_blocks; b != NULL; b = b->next) {
    if (b->ptr == ptr && b->in_use && b->device_type == device_type && b->device_id == device_id) {
      b->in_use = 0;
      pthread_mutex_unlock(&g_ws_mu);
      return 0;
    }
  }
  pthread_mutex_unlock(&g_ws_mu);
  return 1; /* not a block of this pool: workspace.c says so, or asks the host's */
}

/* ---------------------------------------------------------------------------------- */
/* __tvm_set_device(device_type, device_id): what host code calls before its kernels; a  */
/* device module launches on its type's device selected here on this thread (0 if none)   */

static _Thread_local int t_selected[NUM_BACKENDS]; /* per backend of k_backends */

static size_t backend_index(int device_type) {
  size_t i;
  for (i = 0; i < NUM_BACKENDS && k_backends[i]->device_type != device_type; ++i) {
  }
  return i;
}

int tvmrt_current_device(int device_type) {
  size_t i = backend_index(device_type);
  return i < NUM_BACKENDS ? t_selected[i] : 0;
}

int tvmrt_set_device(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  const tvmrt_device_backend* backend;
  int id;
  (void)self;
  (void)ret;
  (void)rc;
  if (n != 2 || codes[0] != kTVMArgInt || codes[1] != kTVMArgInt) {
    return tvmrt_fail("InvalidArgumentError",
                      "__tvm_set_device takes (device_type, device_id) integers, got %d values", n);
  }
  if (args[0].v_int64 == kDLCPU) return 0; /* the host: nothing to select (as TVM) */
  backend = args[0].v_int64 > 0 && args[0].v_int64 <= INT32_MAX
                ? tvmrt_device_backend_of((int)args[0].v_int64)
                : NULL;
  if (backend == NULL) {
    return tvmrt_fail("DeviceUnavailableError",
                      "__tvm_set_device: device type %lld is not supported; libtvmrt_runtime "
                      "sets devices of %s",
                      (long long)args[0].v_int64, tvmrt_device_backends());
  }
  if (args[1].v_int64 < 0 || args[1].v_int64 >= TVMRT_MAX_DEVICES) {
    return tvmrt_fail("DeviceUnavailableError", "__tvm_set_device: no device %s(%lld)",
                      backend->name, (long long)args[1].v_int64);
  }
  id = (int)args[1].v_int64;
  if (backend->activate(id) != 0) return -1;
  t_selected[backend_index(backend->device_type)] = id;
  return 0;
}

/* The devices of a packed call from argument `first`: DLDevice values or (type, id) int
   pairs; the first one is the executor's device. */
int tvmrt_device_args(TVMValue* args, int* codes, int first, int n, DLDevice* out, const char* fn) {
  if (first >= n) return tvmrt_fail("InvalidArgumentError", "%s: expected a device", fn);
  if (codes[first] == kDLDevice) {
    *out = args[first].v_device;
  } else if (codes[first] == kTVMArgInt && first + 1 < n && codes[first + 1] == kTVMArgInt) {
    out->device_type = (DLDeviceType)args[first].v_int64;
    out->device_id = (int32_t)args[first + 1].v_int64;
  } else {
    return tvmrt_fail("ArgumentTypeError",
                      "%s: devices must be DLDevice values or (device_type, "
                      "device_id) int pairs",
                      fn);
  }
  return 0;
}

int tvmrt_device_list(TVMValue* args, int* codes, int first, int n, DLDevice* out, size_t cap,
                      size_t* count, const char* fn) {
  *count = 0;
  do {
    if (*count == cap) {
      return tvmrt_fail("InvalidArgumentError", "%s: at most %zu devices, got more", fn, cap);
    }
    if (tvmrt_device_args(args, codes, first, n, &out[*count], fn) != 0) return -1;
    first += codes[first] == kDLDevice ? 1 : 2;
    ++*count;
  } while (first < n);
  return 0;
}

/* ---------------------------------------------------------------------------------- */
/* runtime.GetDeviceAttr(device_type, device_id, kind): a device's properties by TVM's   */
/* DeviceAttrKind number (0 kExist, 1 kMaxThreadsPerBlock, ...); None where it does not say */

int tvmrt_get_device_attr(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  const tvmrt_device_backend* backend;
  int64_t type, id, kind;
  (void)self;
  if (n != 3 || codes[0] != kTVMArgInt || codes[1] != kTVMArgInt || codes[2] != kTVMArgInt) {
    return tvmrt_fail("InvalidArgumentError",
                      "runtime.GetDeviceAttr takes (device_type, device_id, kind) integers, got %d "
                      "values",
                      n);
  }
  type = args[0].v_int64;
  id = args[1].v_int64;
  kind = args[2].v_int64;
  *rc = kTVMNullptr;
  ret->v_handle = NULL;
  if (type == kDLCPU) { /* the host: it exists (TVM's CPU device answers kExist only) */
    if (kind == 0) {
      ret->v_int64 = 1;
      *rc = kTVMArgInt;
    }
    return 0;
  }
  backend = type > 0 && type <= INT32_MAX ? tvmrt_device_backend_of((int)type) : NULL;
  if (backend == NULL || backend->attribute == NULL || id < 0 || id >= TVMRT_MAX_DEVICES ||
      kind < 0 || kind > INT32_MAX) {
    if (kind == 0) { /* no backend, or one that cannot tell: TVM answers kExist with 0 */
      ret->v_int64 = 0;
      *rc = kTVMArgInt;
    }
    return 0;
  }
  return backend->attribute((int)id, (int)kind, ret, rc);
}
