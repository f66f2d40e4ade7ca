/*
 * kDLOpenCL: OpenCL devices through the ICD loader libOpenCL.so.1 (any vendor's driver:
 * Mali, Adreno, Intel, NVIDIA, pocl), dlopened at the first use of an OpenCL device
 * (TVMRT_LIBOPENCL names another library). Devices are numbered as the Python backend
 * (runtime/backends/opencl.py) numbers them: the GPUs of every platform, or, where there are
 * none, every device. Each has its own context and a default command queue (stream 0);
 * TVMStreamCreate makes more, and the current queue is per thread. Memory handles are
 * tvmrt_cl_buffer descriptors whose first member is the cl_mem, as TVM's
 * cl::BufferDescriptor*: compiled host code passes them on as kernel arguments and the
 * OpenCL module (opencl_module.c) checks each is live before it hands the driver its cl_mem.
 * Copies to or from host memory wait; device-to-device copies and launches are queued.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

#define MAX_CL_DEVICES TVMRT_MAX_DEVICES
#define RT_MAGIC_CL_BUFFER 0x434c4231u
#define CL_DEVICE_TYPE_GPU (1u << 2)
#define CL_DEVICE_TYPE_ALL 0xFFFFFFFFu
#define CL_DEVICE_TYPE_INFO 0x1000u
#define CL_MEM_READ_WRITE 1u

typedef void* cl_handle;
static tvmrt_opencl_api g_api;

static const struct {
  const char* name;
  void** slot;
} k_symbols[] = {
    {"clGetPlatformIDs", (void**)&g_api.get_platform_ids},
    {"clGetDeviceIDs", (void**)&g_api.get_device_ids},
    {"clGetDeviceInfo", (void**)&g_api.get_device_info},
    {"clCreateContext", (void**)&g_api.create_context},
    {"clCreateCommandQueue", (void**)&g_api.create_command_queue},
    {"clReleaseCommandQueue", (void**)&g_api.release_command_queue},
    {"clCreateBuffer", (void**)&g_api.create_buffer},
    {"clReleaseMemObject", (void**)&g_api.release_mem_object},
    {"clEnqueueWriteBuffer", (void**)&g_api.enqueue_write_buffer},
    {"clEnqueueReadBuffer", (void**)&g_api.enqueue_read_buffer},
    {"clEnqueueCopyBuffer", (void**)&g_api.enqueue_copy_buffer},
    {"clFinish", (void**)&g_api.finish},
    {"clCreateProgramWithSource", (void**)&g_api.create_program_with_source},
    {"clCreateProgramWithBinary", (void**)&g_api.create_program_with_binary},
    {"clBuildProgram", (void**)&g_api.build_program},
    {"clGetProgramBuildInfo", (void**)&g_api.get_program_build_info},
    {"clReleaseProgram", (void**)&g_api.release_program},
    {"clCreateKernel", (void**)&g_api.create_kernel},
    {"clReleaseKernel", (void**)&g_api.release_kernel},
    {"clSetKernelArg", (void**)&g_api.set_kernel_arg},
    {"clEnqueueNDRangeKernel", (void**)&g_api.enqueue_nd_range_kernel},
};
#define NUM_SYMBOLS (sizeof(k_symbols) / sizeof(k_symbols[0]))

static char g_path[512];
static char g_load_error[1024]; /* why OpenCL cannot be used ("" once it can) */
static cl_handle g_devices[MAX_CL_DEVICES];
static int g_count;
static struct {
  cl_handle context, queue; /* made at the device's first use */
} g_state[MAX_CL_DEVICES];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local cl_handle t_queue; /* TVMSetStream's queue on t_queue_dev */
static _Thread_local int t_queue_dev = -1;

static const struct {
  int status;
  const char* name;
} k_status[] = {
    {-1, "CL_DEVICE_NOT_FOUND"},          {-2, "CL_DEVICE_NOT_AVAILABLE"},
    {-3, "CL_COMPILER_NOT_AVAILABLE"},    {-4, "CL_MEM_OBJECT_ALLOCATION_FAILURE"},
    {-5, "CL_OUT_OF_RESOURCES"},          {-6, "CL_OUT_OF_HOST_MEMORY"},
    {-11, "CL_BUILD_PROGRAM_FAILURE"},    {-30, "CL_INVALID_VALUE"},
    {-33, "CL_INVALID_DEVICE"},           {-34, "CL_INVALID_CONTEXT"},
    {-36, "CL_INVALID_COMMAND_QUEUE"},    {-38, "CL_INVALID_MEM_OBJECT"},
    {-42, "CL_INVALID_BINARY"},           {-43, "CL_INVALID_BUILD_OPTIONS"},
    {-44, "CL_INVALID_PROGRAM"},          {-45, "CL_INVALID_PROGRAM_EXECUTABLE"},
    {-46, "CL_INVALID_KERNEL_NAME"},      {-48, "CL_INVALID_KERNEL"},
    {-49, "CL_INVALID_ARG_INDEX"},        {-50, "CL_INVALID_ARG_VALUE"},
    {-51, "CL_INVALID_ARG_SIZE"},         {-52, "CL_INVALID_KERNEL_ARGS"},
    {-53, "CL_INVALID_WORK_DIMENSION"},   {-54, "CL_INVALID_WORK_GROUP_SIZE"},
    {-55, "CL_INVALID_WORK_ITEM_SIZE"},   {-61, "CL_INVALID_BUFFER_SIZE"},
    {-1001, "CL_PLATFORM_NOT_FOUND_KHR"},
};

int tvmrt_opencl_error(const char* call, int status) {
  const char *name = NULL, *kind = "KernelError";
  size_t i;
  for (i = 0; i < sizeof(k_status) / sizeof(k_status[0]); ++i) {
    if (k_status[i].status == status) name = k_status[i].name;
  }
  if (status == -4 || status == -5 || status == -6) {
    kind = "DeviceOutOfMemoryError";
  } else if (status == -1 || status == -2 || status == -1001) {
    kind = "DeviceUnavailableError";
  } else if (status == -3 || status == -11 || status == -42 || status == -44 || status == -45 ||
             status == -46) {
    kind = "ModuleLoadError";
  }
  if (name == NULL) return tvmrt_fail(kind, "OpenCL: %s failed: status %d", call, status);
  return tvmrt_fail(kind, "OpenCL: %s failed: %s (%d)", call, name, status);
}

/* the devices of every platform: the GPUs among them, or all of them where none is */
static void find_devices(void) {
  cl_handle platforms[16], found[MAX_CL_DEVICES];
  uint64_t types[MAX_CL_DEVICES];
  uint32_t num_platforms = 0, p;
  int num_found = 0, gpus = 0, i;
  if (g_api.get_platform_ids(16, platforms, &num_platforms) != 0) return; /* no ICD: none */
  if (num_platforms > 16) num_platforms = 16;
  for (p = 0; p < num_platforms && num_found < MAX_CL_DEVICES; ++p) {
    uint32_t n = 0, k;
    if (g_api.get_device_ids(platforms[p], CL_DEVICE_TYPE_ALL,
                             (uint32_t)(MAX_CL_DEVICES - num_found), found + num_found, &n) != 0)
      continue;
    if (n > (uint32_t)(MAX_CL_DEVICES - num_found)) n = (uint32_t)(MAX_CL_DEVICES - num_found);
    for (k = 0; k < n; ++k) {
      uint64_t type = 0;
      if (g_api.get_device_info(found[num_found], CL_DEVICE_TYPE_INFO, sizeof(type), &type, NULL) !=
          0)
        type = 0;
      types[num_found++] = type;
      gpus += (type & CL_DEVICE_TYPE_GPU) != 0;
    }
  }
  for (i = 0; i < num_found; ++i) {
    if (gpus == 0 || (types[i] & CL_DEVICE_TYPE_GPU) != 0) g_devices[g_count++] = found[i];
  }
}

static void load_once(void) {
  const char* env = getenv("TVMRT_LIBOPENCL");
  void* lib;
  size_t i;
  snprintf(g_path, sizeof(g_path), "%s", env != NULL && *env != '\0' ? env : "libOpenCL.so.1");
  lib = dlopen(g_path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    const char* why = dlerror();
    snprintf(g_load_error, sizeof(g_load_error),
             "OpenCL: cannot load the OpenCL library '%s' (%s); OpenCL devices need an OpenCL "
             "driver and its ICD loader installed (on Debian: ocl-icd-libopencl1 and a driver "
             "such as pocl-opencl-icd)",
             g_path, why != NULL ? why : "dlopen failed");
    return;
  }
  for (i = 0; i < NUM_SYMBOLS; ++i) {
    *k_symbols[i].slot = dlsym(lib, k_symbols[i].name);
    if (*k_symbols[i].slot == NULL) {
      snprintf(g_load_error, sizeof(g_load_error),
               "OpenCL: '%s' has no function %s; TVMRT_LIBOPENCL must name an OpenCL 1.2 (or "
               "later) library, or be unset",
               g_path, k_symbols[i].name);
      return;
    }
  }
  find_devices();
}

const tvmrt_opencl_api* tvmrt_opencl_driver(void) {
  pthread_once(&g_once, load_once);
  if (g_load_error[0] != '\0') {
    tvmrt_fail("DeviceUnavailableError", "%s", g_load_error);
    return NULL;
  }
  return &g_api;
}

static int activate(int device_id) {
  int32_t status = 0;
  if (tvmrt_opencl_driver() == NULL) return -1;
  if (device_id < 0 || device_id >= g_count) {
    return tvmrt_fail("DeviceUnavailableError",
                      "device opencl(%d) does not exist: this machine has %d OpenCL device(s)",
                      device_id, g_count);
  }
  if (__atomic_load_n(&g_state[device_id].queue, __ATOMIC_ACQUIRE) != NULL) return 0;
  pthread_mutex_lock(&g_mu);
  if (g_state[device_id].context == NULL) {
    g_state[device_id].context =
        g_api.create_context(NULL, 1, &g_devices[device_id], NULL, NULL, &status);
    if (g_state[device_id].context == NULL) {
      pthread_mutex_unlock(&g_mu);
      return tvmrt_opencl_error("clCreateContext", status != 0 ? status : -34);
    }
  }
  if (g_state[device_id].queue == NULL) {
    cl_handle queue =
        g_api.create_command_queue(g_state[device_id].context, g_devices[device_id], 0, &status);
    if (queue == NULL) {
      pthread_mutex_unlock(&g_mu);
      return tvmrt_opencl_error("clCreateCommandQueue", status != 0 ? status : -36);
    }
    __atomic_store_n(&g_state[device_id].queue, queue, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&g_mu);
  return 0;
}

/* this thread's queue on the device (activated) */
static cl_handle queue_of(int device_id) {
  return t_queue_dev == device_id && t_queue != NULL ? t_queue : g_state[device_id].queue;
}

int tvmrt_opencl_device(int device_id, void** context, void** device, void** queue) {
  if (activate(device_id) != 0) return -1;
  *context = g_state[device_id].context;
  *device = g_devices[device_id];
  *queue = queue_of(device_id);
  return 0;
}

/* ---------------------------------------------------------------------------------- */
/* memory                                                                              */

typedef struct tvmrt_cl_buffer {
  cl_handle buffer; /* first, as TVM's cl::BufferDescriptor: what user code reads */
  tvmrt_object hdr; /* in the live set: a handle is checked before it is followed */
  size_t nbytes;
  int device_id;
} tvmrt_cl_buffer;

#define DESCRIPTOR_BYTES ((sizeof(tvmrt_cl_buffer) + RT_ALIGN - 1) / RT_ALIGN * RT_ALIGN)

static void buffer_destroy(tvmrt_object* obj) {
  tvmrt_cl_buffer* b = (tvmrt_cl_buffer*)((char*)obj - offsetof(tvmrt_cl_buffer, hdr));
  g_api.release_mem_object(b->buffer);
  free(b);
}

static tvmrt_cl_buffer* live_buffer(const void* handle) {
  const void* hdr = (const void*)((uintptr_t)handle + offsetof(tvmrt_cl_buffer, hdr));
  if (handle == NULL || !tvmrt_object_live(hdr, RT_MAGIC_CL_BUFFER)) return NULL;
  return (tvmrt_cl_buffer*)(uintptr_t)handle;
}

void* tvmrt_opencl_buffer(const void* handle, const char* what) {
  tvmrt_cl_buffer* b = live_buffer(handle);
  if (b == NULL) {
    tvmrt_fail("ArrayError", "%s: %p is not the data handle of a live OpenCL array", what, handle);
    return NULL;
  }
  return b->buffer;
}

static int opencl_alloc(int device_id, size_t nbytes, void** out) {
  tvmrt_cl_buffer* b;
  int32_t status = 0;
  *out = NULL;
  if (activate(device_id) != 0) return -1;
  /* the handle is the descriptor's address: 64-byte aligned, as every data pointer TVM
     hands compiled code is (host code may check DLTensor.data's alignment) */
  b = (tvmrt_cl_buffer*)aligned_alloc(RT_ALIGN, DESCRIPTOR_BYTES);
  if (b == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate a buffer record");
  memset(b, 0, sizeof(*b));
  /* OpenCL has no empty buffers: one byte stands in for zero */
  b->buffer = g_api.create_buffer(g_state[device_id].context, CL_MEM_READ_WRITE,
                                  nbytes ? nbytes : 1, NULL, &status);
  if (b->buffer == NULL) {
    free(b);
    if (status == -4 || status == -6 || status == -61 || status == 0) {
      return tvmrt_fail("DeviceOutOfMemoryError", "allocating %zu bytes on opencl(%d) failed",
                        nbytes, device_id);
    }
    return tvmrt_opencl_error("clCreateBuffer", status);
  }
  b->nbytes = nbytes;
  b->device_id = device_id;
  if (tvmrt_object_init(&b->hdr, RT_MAGIC_CL_BUFFER, buffer_destroy) != 0) {
    g_api.release_mem_object(b->buffer);
    free(b);
    return -1;
  }
  *out = b;
  return 0;
}

static int opencl_free(int device_id, void* ptr) {
  tvmrt_cl_buffer* b;
  if (ptr == NULL) return 0;
  if ((b = live_buffer(ptr)) == NULL || b->device_id != device_id) {
    return tvmrt_fail("ArrayError", "%p is not the data handle of a live array on opencl(%d)", ptr,
                      device_id);
  }
  tvmrt_release(&b->hdr);
  return 0;
}

/* the buffer of one side of a copy, with n bytes at offset inside it (the Python backend's
   check and words) */
static tvmrt_cl_buffer* copy_side(const void* handle, size_t offset, DLDevice dev, size_t n) {
  tvmrt_cl_buffer* b = live_buffer(handle);
  if (b == NULL || b->device_id != dev.device_id) {
    tvmrt_fail("ArrayError", "%p is not the data handle of a live array on opencl(%d)", handle,
               dev.device_id);
    return NULL;
  }
  if (offset > b->nbytes || n > b->nbytes - offset) {
    tvmrt_fail("ArrayError",
               "%zu bytes at offset %zu do not fit a %zu-byte allocation on opencl(%d)", n, offset,
               b->nbytes, dev.device_id);
    return NULL;
  }
  return b;
}

static int opencl_copy(void* to, size_t to_offset, DLDevice to_dev, const void* from,
                       size_t from_offset, DLDevice from_dev, size_t n) {
  int to_cl = to_dev.device_type == kDLOpenCL, from_cl = from_dev.device_type == kDLOpenCL;
  tvmrt_cl_buffer *dst = NULL, *src = NULL;
  int32_t status;
  if (activate(to_cl ? to_dev.device_id : from_dev.device_id) != 0) return -1;
  if (to_cl && (dst = copy_side(to, to_offset, to_dev, n)) == NULL) return -1;
  if (from_cl && (src = copy_side(from, from_offset, from_dev, n)) == NULL) return -1;
  if (n == 0) return 0;
  if (to_cl && from_cl && to_dev.device_id != from_dev.device_id) { /* two contexts */
    void* host = malloc(n);
    int rc;
    if (host == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot stage %zu bytes", n);
    rc = opencl_copy(host, 0, (DLDevice){kDLCPU, 0}, from, from_offset, from_dev, n);
    if (rc == 0) rc = opencl_copy(to, to_offset, to_dev, host, 0, (DLDevice){kDLCPU, 0}, n);
    free(host);
    return rc;
  }
  if (to_cl && from_cl) {
    status = g_api.enqueue_copy_buffer(queue_of(to_dev.device_id), src->buffer, dst->buffer,
                                       from_offset, to_offset, n, 0, NULL, NULL);
    return status != 0 ? tvmrt_opencl_error("clEnqueueCopyBuffer", status) : 0;
  }
  if (to_cl) { /* blocking: the host memory may be reused at once */
    status = g_api.enqueue_write_buffer(queue_of(to_dev.device_id), dst->buffer, 1, to_offset, n,
                                        (const char*)from + from_offset, 0, NULL, NULL);
    return status != 0 ? tvmrt_opencl_error("clEnqueueWriteBuffer", status) : 0;
  }
  status = g_api.enqueue_read_buffer(queue_of(from_dev.device_id), src->buffer, 1, from_offset, n,
                                     (char*)to + to_offset, 0, NULL, NULL);
  return status != 0 ? tvmrt_opencl_error("clEnqueueReadBuffer", status) : 0;
}

/* ---------------------------------------------------------------------------------- */
/* streams: command queues of the device's context                                      */

/* the queues TVMStreamCreate made (and not yet freed), by device: a stream handle is
   checked here before the driver is given it (a stale or made-up one would be followed) */
#define MAX_CL_STREAMS 256
static struct {
  cl_handle queue;
  int device_id;
} g_streams[MAX_CL_STREAMS];

static int stream_slot(int device_id, const void* stream) { /* index, or -1; under g_mu */
  int i;
  for (i = 0; i < MAX_CL_STREAMS; ++i) {
    if (g_streams[i].queue == stream && g_streams[i].device_id == device_id) return i;
  }
  return -1;
}

static int known_stream(int device_id, const void* stream) {
  int found;
  if (stream == NULL) return 1; /* the device's current queue */
  pthread_mutex_lock(&g_mu);
  found = stream_slot(device_id, stream) >= 0;
  pthread_mutex_unlock(&g_mu);
  if (!found) {
    tvmrt_fail("InvalidArgumentError",
               "stream %p is not a command queue TVMStreamCreate made on opencl(%d)", stream,
               device_id);
  }
  return found;
}

static int opencl_sync(int device_id, void* stream) {
  int32_t status;
  if (activate(device_id) != 0 || !known_stream(device_id, stream)) return -1;
  status = g_api.finish(stream != NULL ? stream : queue_of(device_id));
  return status != 0 ? tvmrt_opencl_error("clFinish", status) : 0;
}

static int opencl_stream_create(int device_id, void** out) {
  int32_t status = 0;
  int slot;
  if (activate(device_id) != 0) return -1;
  pthread_mutex_lock(&g_mu);
  for (slot = 0; /* a free entry */ slot < MAX_CL_STREAMS && g_streams[slot].queue != NULL;
       ++slot) {
  }
  if (slot == MAX_CL_STREAMS) {
    pthread_mutex_unlock(&g_mu);
    return tvmrt_fail("DeviceOutOfMemoryError",
                      "opencl(%d): %d streams are live already; free one with TVMStreamFree",
                      device_id, MAX_CL_STREAMS);
  }
  *out = g_api.create_command_queue(g_state[device_id].context, g_devices[device_id], 0, &status);
  if (*out == NULL) {
    pthread_mutex_unlock(&g_mu);
    return tvmrt_opencl_error("clCreateCommandQueue", status != 0 ? status : -36);
  }
  g_streams[slot].queue = *out;
  g_streams[slot].device_id = device_id;
  pthread_mutex_unlock(&g_mu);
  return 0;
}

static int opencl_stream_free(int device_id, void* stream) {
  int32_t status;
  int slot;
  if (stream == NULL) {
    return tvmrt_fail("InvalidArgumentError",
                      "stream 0 of opencl(%d) is the default queue: it is not freed", device_id);
  }
  if (activate(device_id) != 0) return -1;
  pthread_mutex_lock(&g_mu);
  slot = stream_slot(device_id, stream);
  if (slot >= 0) g_streams[slot].queue = NULL;
  pthread_mutex_unlock(&g_mu);
  if (slot < 0) {
    return tvmrt_fail("InvalidArgumentError",
                      "stream %p was not made on opencl(%d) by TVMStreamCreate (or is freed)",
                      stream, device_id);
  }
  if (t_queue == stream && t_queue_dev == device_id) t_queue = NULL;
  g_api.finish(stream);
  status = g_api.release_command_queue(stream);
  return status != 0 ? tvmrt_opencl_error("clReleaseCommandQueue", status) : 0;
}

static int opencl_set_stream(int device_id, void* stream) {
  if (activate(device_id) != 0 || !known_stream(device_id, stream)) return -1;
  t_queue = stream;
  t_queue_dev = device_id;
  return 0;
}

/* ---------------------------------------------------------------------------------- */
/* properties (runtime.GetDeviceAttr), read with clGetDeviceInfo: no context is made     */

#define CL_DEVICE_MAX_COMPUTE_UNITS 0x1002u
#define CL_DEVICE_MAX_WORK_GROUP_SIZE 0x1004u
#define CL_DEVICE_MAX_WORK_ITEM_SIZES 0x1005u
#define CL_DEVICE_MAX_CLOCK_FREQUENCY 0x100Cu
#define CL_DEVICE_GLOBAL_MEM_CACHE_SIZE 0x101Eu
#define CL_DEVICE_GLOBAL_MEM_SIZE 0x101Fu
#define CL_DEVICE_LOCAL_MEM_SIZE 0x1023u
#define CL_DEVICE_NAME 0x102Bu
#define CL_DRIVER_VERSION 0x102Du
#define CL_DEVICE_VERSION 0x102Fu

static _Thread_local char t_attr_text[1024];

/* a clGetDeviceInfo value of `size` bytes (an unsigned integer of 4 or 8 bytes, or text) */
static int device_info(cl_handle device, uint32_t what, size_t size, void* out) {
  memset(out, 0, size);
  return g_api.get_device_info(device, what, size, out, NULL);
}

static int number(cl_handle device, uint32_t what, size_t size, uint64_t scale, TVMValue* out,
                  int* code) {
  uint64_t value = 0; /* little-endian: a 4-byte cl_uint fills the low half */
  uint32_t narrow = 0;
  int32_t status = size == 4 ? device_info(device, what, 4, &narrow)
                             : device_info(device, what, sizeof(value), &value);
  if (status != 0) return 0; /* the driver does not say: None */
  if (size == 4) value = narrow;
  out->v_int64 = (int64_t)(value * scale);
  *code = kTVMArgInt;
  return 0;
}

static int text(cl_handle device, uint32_t what, TVMValue* out, int* code) {
  if (device_info(device, what, sizeof(t_attr_text) - 1, t_attr_text) != 0) return 0;
  t_attr_text[sizeof(t_attr_text) - 1] = '\0';
  out->v_str = t_attr_text;
  *code = kTVMStr;
  return 0;
}

static int opencl_attribute(int device_id, int kind, TVMValue* out, int* code) {
  cl_handle d;
  int major = 0, minor = 0;
  if (tvmrt_opencl_driver() == NULL) tvmrt_clear_last_error(); /* no driver: no devices */
  if (g_load_error[0] != '\0' || device_id >= g_count) {
    if (kind == 0) {
      out->v_int64 = 0;
      *code = kTVMArgInt;
    }
    return 0;
  }
  d = g_devices[device_id];
  switch (kind) {
    case 0: /* kExist */
      out->v_int64 = 1;
      *code = kTVMArgInt;
      return 0;
    case 1: /* kMaxThreadsPerBlock */
      return number(d, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof(size_t), 1, out, code);
    case 2: /* kWarpSize: TVM answers 1 for every OpenCL device */
      out->v_int64 = 1;
      *code = kTVMArgInt;
      return 0;
    case 3: /* kMaxSharedMemoryPerBlock */
      return number(d, CL_DEVICE_LOCAL_MEM_SIZE, 8, 1, out, code);
    case 4:  /* kComputeVersion: "major.minor" of the device's OpenCL version */
    case 11: /* kApiVersion: major * 100 + minor * 10 */
      if (device_info(d, CL_DEVICE_VERSION, sizeof(t_attr_text) - 1, t_attr_text) != 0 ||
          sscanf(t_attr_text, "OpenCL %d.%d", &major, &minor) != 2)
        return 0;
      if (kind == 11) {
        out->v_int64 = (int64_t)major * 100 + (int64_t)minor * 10;
        *code = kTVMArgInt;
        return 0;
      }
      snprintf(t_attr_text, sizeof(t_attr_text), "%d.%d", major, minor);
      out->v_str = t_attr_text;
      *code = kTVMStr;
      return 0;
    case 5: /* kDeviceName */ return text(d, CL_DEVICE_NAME, out, code);
    case 6: /* kMaxClockRate: MHz -> kHz */
      return number(d, CL_DEVICE_MAX_CLOCK_FREQUENCY, 4, 1000, out, code);
    case 7: /* kMultiProcessorCount */
      return number(d, CL_DEVICE_MAX_COMPUTE_UNITS, 4, 1, out, code);
    case 8: { /* kMaxThreadDimensions: "[x, y, z]", as TVM writes it */
      size_t dims[3] = {0, 0, 0};
      if (g_api.get_device_info(d, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof(dims), dims, NULL) != 0)
        return 0;
      snprintf(t_attr_text, sizeof(t_attr_text), "[%zu, %zu, %zu]", dims[0], dims[1], dims[2]);
      out->v_str = t_attr_text;
      *code = kTVMStr;
      return 0;
    }
    case 12: /* kDriverVersion */ return text(d, CL_DRIVER_VERSION, out, code);
    case 13: /* kL2CacheSizeBytes */
      return number(d, CL_DEVICE_GLOBAL_MEM_CACHE_SIZE, 8, 1, out, code);
    case 14: /* kTotalGlobalMemory */ return number(d, CL_DEVICE_GLOBAL_MEM_SIZE, 8, 1, out, code);
    default: return 0;
  }
}

const tvmrt_device_backend tvmrt_opencl_backend = {
    .device_type = kDLOpenCL,
    .name = "opencl",
    .activate = activate,
    .alloc = opencl_alloc,
    .free = opencl_free,
    .copy = opencl_copy,
    .sync = opencl_sync,
    .stream_create = opencl_stream_create,
    .stream_free = opencl_stream_free,
    .set_stream = opencl_set_stream,
    .handles_are_addresses = 0,
    .attribute = opencl_attribute,
};
