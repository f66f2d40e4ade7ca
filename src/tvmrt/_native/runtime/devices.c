/*
 * The C runtime's devices: one table of backends (the CPU is the host and needs none), so a
 * new device is one file (cuda.c) and one line in k_backends. Arrays, streams, the executors
 * and the workspace ask the table; none names a device type of its own.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "rt.h"

static const tvmrt_device_backend* const k_backends[] = {
    &tvmrt_cuda_backend,
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
