/*
 * kDLCUDA: NVIDIA GPUs through the CUDA driver API, libcuda.so.1 (it comes with the driver;
 * no CUDA toolkit), dlopened at the first use of a CUDA device (TVMRT_LIBCUDA names another
 * library, as for the Python runtime). As TVM and the Python backend
 * (runtime/backends/cuda.py): each device's primary context, made current on the thread
 * that uses it; memory is cuMemAlloc memory whose handles are device addresses; the current
 * stream is per thread (0: the legacy default stream); copies to or from host memory wait
 * for the stream, device-to-device copies and launches do not. Without the driver, or
 * without the GPU asked for, every use fails with the Python runtime's words.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

#define MAX_GPUS TVMRT_MAX_DEVICES

static tvmrt_cuda_api g_api;
static char g_path[512];
static char g_load_error[1024]; /* why the driver cannot be used ("" once it can) */
static int g_count, g_version;
static void* g_contexts[MAX_GPUS];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local int t_active = -1; /* the device whose context is current here */
static _Thread_local void* t_stream;    /* TVMSetStream's stream on t_stream_dev */
static _Thread_local int t_stream_dev = -1;

static const struct {
  const char* name;
  void** slot;
} k_symbols[] = {
    {"cuInit", (void**)&g_api.init},
    {"cuDriverGetVersion", (void**)&g_api.driver_get_version},
    {"cuDeviceGetCount", (void**)&g_api.device_get_count},
    {"cuDeviceGet", (void**)&g_api.device_get},
    {"cuDevicePrimaryCtxRetain", (void**)&g_api.primary_ctx_retain},
    {"cuCtxSetCurrent", (void**)&g_api.ctx_set_current},
    {"cuMemAlloc_v2", (void**)&g_api.mem_alloc},
    {"cuMemFree_v2", (void**)&g_api.mem_free},
    {"cuMemcpyHtoDAsync_v2", (void**)&g_api.memcpy_htod},
    {"cuMemcpyDtoHAsync_v2", (void**)&g_api.memcpy_dtoh},
    {"cuMemcpyDtoDAsync_v2", (void**)&g_api.memcpy_dtod},
    {"cuStreamCreate", (void**)&g_api.stream_create},
    {"cuStreamDestroy_v2", (void**)&g_api.stream_destroy},
    {"cuStreamSynchronize", (void**)&g_api.stream_synchronize},
    {"cuModuleLoadData", (void**)&g_api.module_load_data},
    {"cuModuleUnload", (void**)&g_api.module_unload},
    {"cuModuleGetFunction", (void**)&g_api.module_get_function},
    {"cuFuncSetAttribute", (void**)&g_api.func_set_attribute},
    {"cuLaunchKernel", (void**)&g_api.launch_kernel},
    {"cuDeviceGetAttribute", (void**)&g_api.device_get_attribute},
    {"cuGetErrorName", (void**)&g_api.get_error_name},
    {"cuGetErrorString", (void**)&g_api.get_error_string},
};
#define NUM_SYMBOLS (sizeof(k_symbols) / sizeof(k_symbols[0]))

/* the Python runtime's Driver.failure: the class by CUresult, "CUDA: <call> failed: <name>" */
int tvmrt_cuda_error(const char* call, int code) {
  const char *name = NULL, *text = NULL, *kind = "KernelError";
  char shown[64];
  if (g_api.get_error_name == NULL || g_api.get_error_name(code, &name) != 0) name = NULL;
  if (g_api.get_error_string == NULL || g_api.get_error_string(code, &text) != 0) text = NULL;
  if (name == NULL) {
    snprintf(shown, sizeof(shown), "CUresult %d", code);
  } else {
    snprintf(shown, sizeof(shown), "%s", name);
  }
  if (code == 2) {
    kind = "DeviceOutOfMemoryError";
  } else if (code == 100 || code == 101) {
    kind = "DeviceUnavailableError";
  } else if (code == 200 || code == 209 || code == 218 || code == 222 || code == 300 ||
             code == 301 || code == 302 || code == 500) {
    kind = "ModuleLoadError";
  }
  if (text != NULL) return tvmrt_fail(kind, "CUDA: %s failed: %s (%s)", call, shown, text);
  return tvmrt_fail(kind, "CUDA: %s failed: %s", call, shown);
}

static void load_once(void) {
  const char* env = getenv("TVMRT_LIBCUDA");
  void* lib;
  size_t i;
  int rc;
  snprintf(g_path, sizeof(g_path), "%s", env != NULL && *env != '\0' ? env : "libcuda.so.1");
  lib = dlopen(g_path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    const char* why = dlerror();
    snprintf(g_load_error, sizeof(g_load_error),
             "CUDA: cannot load the NVIDIA driver library '%s' (%s); CUDA devices need the "
             "NVIDIA driver installed (no CUDA toolkit is needed)",
             g_path, why != NULL ? why : "dlopen failed");
    return;
  }
  if (dlsym(lib, "cuInit") == NULL || dlsym(lib, "cuDriverGetVersion") == NULL) {
    snprintf(g_load_error, sizeof(g_load_error),
             "CUDA: '%s' is not the NVIDIA driver library (it has no cuInit or "
             "cuDriverGetVersion); TVMRT_LIBCUDA must name the driver's libcuda.so.1, or be unset",
             g_path);
    return;
  }
  for (i = 0; i < NUM_SYMBOLS; ++i) {
    *k_symbols[i].slot = dlsym(lib, k_symbols[i].name);
    if (*k_symbols[i].slot == NULL && strncmp(k_symbols[i].name, "cuGetError", 10) != 0) {
      snprintf(g_load_error, sizeof(g_load_error),
               "CUDA: the driver library '%s' has no function %s; the NVIDIA driver is too old "
               "for tvmrt",
               g_path, k_symbols[i].name);
      return;
    }
  }
  if ((rc = g_api.init(0)) != 0 || (rc = g_api.driver_get_version(&g_version)) != 0 ||
      (rc = g_api.device_get_count(&g_count)) != 0) {
    const char* text;
    tvmrt_cuda_error(g_version == 0 ? "cuInit" : "cuDeviceGetCount", rc);
    /* the error slot holds "<Class>: CUDA: ...": keep the message (Python's str(exc)), to
       be raised as DeviceUnavailableError, as the Python runtime's cuInit failure is */
    text = strstr(tvmrt_peek_last_error(), "CUDA: ");
    snprintf(g_load_error, sizeof(g_load_error), "%s",
             text != NULL ? text : tvmrt_peek_last_error());
    tvmrt_clear_last_error();
  }
}

const tvmrt_cuda_api* tvmrt_cuda_driver(void) {
  pthread_once(&g_once, load_once);
  if (g_load_error[0] != '\0') {
    tvmrt_fail("DeviceUnavailableError", "%s", g_load_error);
    return NULL;
  }
  return &g_api;
}

int tvmrt_cuda_activate(int device_id) {
  int rc, raw;
  if (t_active == device_id) return 0;
  if (tvmrt_cuda_driver() == NULL) return -1;
  if (device_id < 0 || device_id >= g_count || device_id >= MAX_GPUS) {
    return tvmrt_fail("DeviceUnavailableError",
                      "device cuda(%d) does not exist: the NVIDIA driver (CUDA %d.%d) reports %d "
                      "GPU(s)",
                      device_id, g_version / 1000, g_version % 1000 / 10, g_count);
  }
  pthread_mutex_lock(&g_mu);
  if (g_contexts[device_id] == NULL) {
    if ((rc = g_api.device_get(&raw, device_id)) != 0) {
      pthread_mutex_unlock(&g_mu);
      return tvmrt_cuda_error("cuDeviceGet", rc);
    }
    if ((rc = g_api.primary_ctx_retain(&g_contexts[device_id], raw)) != 0) {
      g_contexts[device_id] = NULL;
      pthread_mutex_unlock(&g_mu);
      return tvmrt_cuda_error("cuDevicePrimaryCtxRetain", rc);
    }
  }
  pthread_mutex_unlock(&g_mu);
  if ((rc = g_api.ctx_set_current(g_contexts[device_id])) != 0) {
    return tvmrt_cuda_error("cuCtxSetCurrent", rc);
  }
  t_active = device_id;
  return 0;
}

void* tvmrt_cuda_stream(int device_id) { return t_stream_dev == device_id ? t_stream : NULL; }

int tvmrt_cuda_alloc(int device_id, size_t nbytes, void** out) {
  uint64_t ptr = 0;
  int rc;
  *out = NULL;
  if (tvmrt_cuda_activate(device_id) != 0) return -1;
  if ((rc = g_api.mem_alloc(&ptr, nbytes ? nbytes : 1)) != 0) {
    return tvmrt_cuda_error("cuMemAlloc_v2", rc);
  }
  *out = (void*)(uintptr_t)ptr;
  return 0;
}

int tvmrt_cuda_free(int device_id, void* ptr) {
  int rc;
  if (ptr == NULL) return 0;
  if (tvmrt_cuda_activate(device_id) != 0) return -1;
  if ((rc = g_api.mem_free((uint64_t)(uintptr_t)ptr)) != 0) {
    return tvmrt_cuda_error("cuMemFree_v2", rc);
  }
  return 0;
}

int tvmrt_cuda_sync(int device_id, void* stream) {
  int rc;
  if (tvmrt_cuda_activate(device_id) != 0) return -1;
  if (stream == NULL) stream = tvmrt_cuda_stream(device_id);
  if ((rc = g_api.stream_synchronize(stream)) != 0) {
    return tvmrt_cuda_error("cuStreamSynchronize", rc);
  }
  return 0;
}

/* n bytes between two compact buffers, at least one of them on a GPU */
int tvmrt_cuda_copy(void* to, size_t to_offset, DLDevice to_dev, const void* from,
                    size_t from_offset, DLDevice from_dev, size_t n) {
  int rc, dev = to_dev.device_type == kDLCUDA ? to_dev.device_id : from_dev.device_id;
  uint64_t dst, src;
  void* stream;
  if (n == 0) return 0;
  to = (char*)to + to_offset; /* CUDA's handles are device addresses */
  from = (const char*)from + from_offset;
  dst = (uint64_t)(uintptr_t)to;
  src = (uint64_t)(uintptr_t)from;
  if (to_dev.device_type == kDLCUDA && from_dev.device_type == kDLCUDA &&
      to_dev.device_id != from_dev.device_id) { /* two contexts: stage through the host */
    void* host = malloc(n);
    if (host == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot stage %zu bytes", n);
    rc = tvmrt_cuda_copy(host, 0, (DLDevice){kDLCPU, 0}, from, 0, from_dev, n);
    if (rc == 0) rc = tvmrt_cuda_copy(to, 0, to_dev, host, 0, (DLDevice){kDLCPU, 0}, n);
    free(host);
    return rc;
  }
  if (tvmrt_cuda_activate(dev) != 0) return -1;
  stream = tvmrt_cuda_stream(dev);
  if (to_dev.device_type == kDLCUDA && from_dev.device_type == kDLCUDA) {
    rc = g_api.memcpy_dtod(dst, src, n, stream);
    return rc != 0 ? tvmrt_cuda_error("cuMemcpyDtoDAsync_v2", rc) : 0;
  }
  if (to_dev.device_type == kDLCUDA) {
    rc = g_api.memcpy_htod(dst, from, n, stream);
    if (rc != 0) return tvmrt_cuda_error("cuMemcpyHtoDAsync_v2", rc);
  } else {
    rc = g_api.memcpy_dtoh(to, src, n, stream);
    if (rc != 0) return tvmrt_cuda_error("cuMemcpyDtoHAsync_v2", rc);
  }
  return tvmrt_cuda_sync(dev, stream); /* the host memory may be reused at once */
}

/* TVMStreamCreate / Free / TVMSetStream on a GPU */
int tvmrt_cuda_stream_create(int device_id, void** out) {
  int rc;
  if (tvmrt_cuda_activate(device_id) != 0) return -1;
  if ((rc = g_api.stream_create(out, 1 /* CU_STREAM_NON_BLOCKING */)) != 0) {
    return tvmrt_cuda_error("cuStreamCreate", rc);
  }
  return 0;
}

int tvmrt_cuda_stream_free(int device_id, void* stream) {
  int rc;
  if (stream == NULL) {
    return tvmrt_fail("InvalidArgumentError",
                      "stream 0 of cuda(%d) is the default stream: it is not freed", device_id);
  }
  if (tvmrt_cuda_activate(device_id) != 0) return -1;
  if (t_stream == stream && t_stream_dev == device_id) t_stream = NULL;
  if ((rc = g_api.stream_destroy(stream)) != 0) return tvmrt_cuda_error("cuStreamDestroy_v2", rc);
  return 0;
}

int tvmrt_cuda_set_stream(int device_id, void* stream) {
  if (tvmrt_cuda_activate(device_id) != 0) return -1;
  t_stream = stream;
  t_stream_dev = device_id;
  return 0;
}

/* runtime.GetDeviceAttr: kExist only (no context is made); the rest is not answered here */
static int cuda_attribute(int device_id, int kind, TVMValue* out, int* code) {
  if (kind != 0) return 0;
  if (tvmrt_cuda_driver() == NULL) {
    tvmrt_clear_last_error(); /* no driver: no GPU, not an error */
    out->v_int64 = 0;
  } else {
    out->v_int64 = device_id < g_count && device_id < MAX_GPUS;
  }
  *code = kTVMArgInt;
  return 0;
}

const tvmrt_device_backend tvmrt_cuda_backend = {
    .device_type = kDLCUDA,
    .name = "cuda",
    .activate = tvmrt_cuda_activate,
    .alloc = tvmrt_cuda_alloc,
    .free = tvmrt_cuda_free,
    .copy = tvmrt_cuda_copy,
    .sync = tvmrt_cuda_sync,
    .stream_create = tvmrt_cuda_stream_create,
    .stream_free = tvmrt_cuda_stream_free,
    .set_stream = tvmrt_cuda_set_stream,
    .handles_are_addresses = 1,
    .attribute = cuda_attribute,
};
