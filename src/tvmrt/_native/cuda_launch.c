/*
 * CUDA kernel launches from compiled host code, run in C (the Python extension only).
 *
 * Host code calls each kernel through TVMFuncCall. For a CUDA kernel the Python side hands
 * out the address of a launcher here (func_env.c's closure blocks), prepared once from
 * Python (runtime/loaders/cuda_launch.py): the argument kinds, TVM's launch-parameter slots
 * (as runtime/launch.py's LaunchConfig computes them), and, after its first launch through
 * Python on a device, the CUfunction there and the driver's launch and error-text entry
 * points (addresses taken from the ctypes driver: libcuda is never opened here). A launch
 * then packs the arguments (TVM's PackFuncVoidAddr: 32-bit values narrowed), computes the
 * grid and block, and calls cuLaunchKernel on the calling thread's stream.
 *
 * Whatever the hot path does not cover goes to the Python launch (the cold callback) with the
 * same arguments, so the result is the same: a device whose context the backend has not made
 * current on this thread, a CUfunction not resolved yet, the event timer of the profiler, an
 * argument of an unexpected type code, extents beyond 32 bits, 48 KiB or more of dynamic
 * shared memory (the function attribute is Python's), more arguments than fit here.
 *
 * The per-thread state Python keeps for CUDA is mirrored here by the same thread's calls:
 * the backend and device whose context is current (CUDADeviceAPI.activate), the stream per
 * device (set_stream), the device __tvm_set_device selected and whether a kernel timer runs.
 */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "native.h"

#define DEVICES 16   /* device ids the hot path serves; others go through Python */
#define MAX_ARGS 128 /* kernel arguments + launch parameters */
#define MAX_SLOTS 16 /* launch-parameter tags with a value (grid/block extents) */
#define NAME_MAX 160 /* the kernel name as Python's repr() writes it */
#define SLAB 1024    /* launchers per closure block */
#define SLABS 32     /* at most SLABS * SLAB launchers per process, then Python launches */
#define SMEM_LIMIT (48 * 1024)

typedef int (*cu_launch_fn)(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                            unsigned by, unsigned bz, unsigned smem, void* stream, void** params,
                            void** extra);
typedef int (*cu_coop_fn)(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                          unsigned bz, unsigned smem, void* stream, void** params);
typedef int (*cu_text_fn)(int code, const char** out);
/* the Python launch: kernel id (0: __tvm_set_device), then TVMFuncCall's arguments */
typedef int (*cold_fn)(int64_t id, TVMValue* args, int* codes, int num_args, TVMValue* ret,
                       int* ret_code);

/* A launcher's driver side, for one backend: written before it is published, then only its
   func[] entries are filled in. A launcher moving to another backend (another driver) gets a
   new one; the old one is not freed (a launch may still read it), which costs a few hundred
   bytes per kernel and backend change. */
typedef struct {
  uint64_t api; /* the backend these came from */
  cu_launch_fn launch;
  cu_coop_fn coop;
  cu_text_fn err_name, err_string;
  void* func[DEVICES];
} binding;

typedef struct {
  int64_t id;      /* the Python kernel's id; 0 once released */
  binding* driver; /* NULL until the first bind */
  int cooperative, num_args, nslots, dyn;
  unsigned char kinds[MAX_ARGS];
  signed char slots[MAX_SLOTS];
  char name[NAME_MAX];
} launcher;

static launcher* g_slabs[SLABS];
static int g_used; /* launchers handed out, over all slabs; under g_mu */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static cold_fn g_cold;
static int g_enabled = 1; /* 0: every call goes to Python (benchmarks, diagnosis) */

static __thread uint64_t t_api;    /* the backend the two lines below belong to */
static __thread int t_active = -1; /* device whose context that backend made current */
static __thread uintptr_t t_stream[DEVICES];
static __thread int t_device; /* __tvm_set_device's kDLCUDA device */
static __thread int t_timing; /* a kernel_timer is active on this thread */

TVM_DLL void tvmrt_cuda_set_cold(cold_fn fn) { g_cold = fn; }
TVM_DLL void tvmrt_cuda_set_enabled(int on) {
  __atomic_store_n(&g_enabled, on != 0, __ATOMIC_RELAXED);
}

static void adopt(uint64_t api) {
  if (api == t_api) return;
  t_api = api;
  t_active = -1;
  memset(t_stream, 0, sizeof(t_stream));
}

TVM_DLL void tvmrt_cuda_thread_activate(uint64_t api, int dev, uintptr_t stream) {
  adopt(api);
  t_active = dev;
  if (dev >= 0 && dev < DEVICES) t_stream[dev] = stream;
}

TVM_DLL void tvmrt_cuda_thread_stream(uint64_t api, int dev, uintptr_t stream) {
  adopt(api);
  if (dev >= 0 && dev < DEVICES) t_stream[dev] = stream;
}

TVM_DLL void tvmrt_cuda_select_device(int dev) { t_device = dev; }
TVM_DLL int tvmrt_cuda_selected_device(void) { return t_device; }
TVM_DLL void tvmrt_cuda_set_timing(int on) { t_timing = on; }

static int launcher_call(void* self, TVMValue* args, int* codes, int num_args, TVMValue* ret,
                         int* ret_code);

/* A launcher for a kernel, or NULL (too many arguments or tags, a long name, no room). */
TVM_DLL void* tvmrt_cuda_launcher_new(int64_t id, const char* name, int num_args,
                                      const unsigned char* kinds, int nslots,
                                      const signed char* slots, int dyn, int cooperative) {
  launcher* l = NULL;
  if (id <= 0 || name == NULL || strlen(name) >= NAME_MAX || num_args < 0 || nslots < 0 ||
      nslots > MAX_SLOTS || num_args + nslots + (dyn != 0) > MAX_ARGS)
    return NULL;
  for (int i = 0; i < nslots; ++i)
    if (slots[i] < 0 || slots[i] > 5) return NULL;
  for (int i = 0; i < num_args; ++i)
    if (kinds[i] > TVMRT_ARG_HANDLE) return NULL;
  pthread_mutex_lock(&g_mu);
  if (g_used < SLAB * SLABS) {
    int slab = g_used / SLAB;
    if (g_slabs[slab] == NULL) {
      launcher* block = calloc(SLAB, sizeof(launcher));
      if (block != NULL &&
          tvmrt_register_closure_block(block, sizeof(launcher), SLAB, launcher_call) == 0)
        g_slabs[slab] = block;
      else free(block);
    }
    if (g_slabs[slab] != NULL) l = &g_slabs[slab][g_used++ % SLAB];
  }
  pthread_mutex_unlock(&g_mu);
  if (l == NULL) return NULL;
  memset(l, 0, sizeof(*l));
  snprintf(l->name, sizeof(l->name), "%s", name);
  l->num_args = num_args;
  memcpy(l->kinds, kinds, (size_t)num_args);
  l->nslots = nslots;
  memcpy(l->slots, slots, (size_t)nslots);
  l->dyn = dyn != 0;
  l->cooperative = cooperative != 0;
  __atomic_store_n(&l->id, id, __ATOMIC_RELEASE);
  return l;
}

/* After a Python launch on `dev` of backend `api`: its CUfunction and the driver's entries. */
TVM_DLL void tvmrt_cuda_launcher_bind(void* handle, uint64_t api, int dev, void* func, void* launch,
                                      void* coop, void* err_name, void* err_string) {
  launcher* l = handle;
  binding* b;
  if (dev < 0 || dev >= DEVICES || api == 0) return;
  pthread_mutex_lock(&g_mu);
  b = l->driver;
  if (b == NULL || b->api != api) { /* another driver: nothing of the old one is used */
    b = calloc(1, sizeof(binding));
    if (b != NULL) {
      b->api = api;
      b->launch = (cu_launch_fn)launch;
      b->coop = (cu_coop_fn)coop;
      b->err_name = (cu_text_fn)err_name;
      b->err_string = (cu_text_fn)err_string;
    }
  }
  if (b != NULL) {
    __atomic_store_n(&b->func[dev], func, __ATOMIC_RELEASE);
    __atomic_store_n(&l->driver, b, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&g_mu);
}

/* The kernel's module is gone: the handle now fails (launchers are not reused). */
TVM_DLL void tvmrt_cuda_launcher_release(void* handle) {
  launcher* l = handle;
  __atomic_store_n(&l->id, 0, __ATOMIC_RELEASE);
}

static int cold(int64_t id, TVMValue* args, int* codes, int num_args, TVMValue* ret,
                int* ret_code) {
  if (g_cold == NULL)
    return tvmrt_fail("RuntimeError", "%s", "CUDA launcher: the Python side is not installed");
  return g_cold(id, args, codes, num_args, ret, ret_code);
}

/* "CUDA_ERROR_X (text)" as Driver.error_text writes it. */
static void error_text(const binding* b, int code, char* out, size_t size) {
  const char *name = NULL, *text = NULL;
  char shown[64];
  if (b->err_name == NULL || b->err_name(code, &name) != 0 || name == NULL || !*name) {
    snprintf(shown, sizeof(shown), "CUresult %d", code);
    name = shown;
  }
  if (b->err_string != NULL) b->err_string(code, &text);
  if (text != NULL && *text) snprintf(out, size, "%s (%s)", name, text);
  else snprintf(out, size, "%s", name);
}

TVM_DLL int tvmrt_cuda_arg_kind(int code, int bits, int lanes) {
  if (lanes != 1) return -1;
  if (code == kDLInt) return bits == 32 ? TVMRT_ARG_I32 : bits == 64 ? TVMRT_ARG_I64 : -1;
  if (code == kDLUInt) return bits == 32 ? TVMRT_ARG_U32 : bits == 64 ? TVMRT_ARG_U64 : -1;
  if (code == kDLFloat) return bits == 32 ? TVMRT_ARG_F32 : bits == 64 ? TVMRT_ARG_F64 : -1;
  if (code == kTVMOpaqueHandle) return bits == 64 ? TVMRT_ARG_HANDLE : -1; /* DataType handle */
  return -1;
}

/* float32 of d as round-to-nearest gives it, also beyond the range a C cast is defined on */
static float to_float32(double d) {
  const double tie = (double)FLT_MAX + ldexp(1.0, 103); /* half an ulp above FLT_MAX */
  if (d > FLT_MAX) return d < tie ? FLT_MAX : INFINITY;
  if (d < -FLT_MAX) return d > -tie ? -FLT_MAX : -INFINITY;
  return (float)d; /* NaN stays NaN */
}

int tvmrt_cuda_pack_arg(int kind, TVMValue value, int code, uint64_t* slot) {
  int integer = code == kDLInt || code == kDLUInt;
  *slot = 0;
  switch (kind) {
    case TVMRT_ARG_I32:
    case TVMRT_ARG_U32: {
      uint32_t v = (uint32_t)(uint64_t)value.v_int64; /* masked to the width, as ctypes */
      if (!integer) return -1;
      memcpy(slot, &v, sizeof(v));
      return 0;
    }
    case TVMRT_ARG_I64:
    case TVMRT_ARG_U64:
      if (!integer) return -1;
      memcpy(slot, &value.v_int64, sizeof(value.v_int64));
      return 0;
    case TVMRT_ARG_F32: {
      float f;
      if (code != kDLFloat) return -1;
      f = to_float32(value.v_float64);
      memcpy(slot, &f, sizeof(f));
      return 0;
    }
    case TVMRT_ARG_F64:
      if (code != kDLFloat) return -1;
      memcpy(slot, &value.v_float64, sizeof(value.v_float64));
      return 0;
    case TVMRT_ARG_HANDLE: /* a device address, or a null handle (0) */
      if (code == kTVMNullptr) return 0;
      if (code != kTVMOpaqueHandle) return -1;
      *slot = (uint64_t)(uintptr_t)value.v_handle;
      return 0;
    default: return -1;
  }
}

static int launcher_call(void* self, TVMValue* args, int* codes, int num_args, TVMValue* ret,
                         int* ret_code) {
  launcher* l = self;
  int64_t id = __atomic_load_n(&l->id, __ATOMIC_ACQUIRE);
  binding* b = __atomic_load_n(&l->driver, __ATOMIC_ACQUIRE);
  int dev = t_device, n = l->num_args, rc;
  uint64_t values[MAX_ARGS], size[6] = {1, 1, 1, 1, 1, 1}, smem = 0;
  void* params[MAX_ARGS];
  void* func;
  char text[256];
  if (id == 0)
    return tvmrt_fail("", "KernelError: CUDA kernel %s was released with its module", l->name);
  if (num_args != n + l->nslots + l->dyn || t_timing || b == NULL || b->api != t_api ||
      !__atomic_load_n(&g_enabled, __ATOMIC_RELAXED) || dev != t_active || dev < 0 ||
      dev >= DEVICES)
    return cold(id, args, codes, num_args, ret, ret_code);
  func = __atomic_load_n(&b->func[dev], __ATOMIC_ACQUIRE);
  if (func == NULL) return cold(id, args, codes, num_args, ret, ret_code);
  for (int i = 0; i < n; ++i) {
    double d = args[i].v_float64; /* beyond float32: the Python launch rounds it (the same) */
    if (l->kinds[i] == TVMRT_ARG_F32 && codes[i] == kDLFloat && (d > FLT_MAX || d < -FLT_MAX))
      return cold(id, args, codes, num_args, ret, ret_code);
    if (tvmrt_cuda_pack_arg(l->kinds[i], args[i], codes[i], &values[i]) != 0)
      return cold(id, args, codes, num_args, ret, ret_code);
    params[i] = &values[i];
  }
  for (int j = 0; j < l->nslots + l->dyn; ++j) {
    int64_t v = args[n + j].v_int64;
    if (codes[n + j] != kTVMArgInt || v > (int64_t)UINT32_MAX)
      return cold(id, args, codes, num_args, ret, ret_code);
    if (j == l->nslots) { /* the dynamic shared memory size */
      if (v < 0 || v >= SMEM_LIMIT) return cold(id, args, codes, num_args, ret, ret_code);
      smem = (uint64_t)v;
    } else if (v > 0) { /* a repeated tag: the last value wins; <= 0 leaves it at 1 */
      size[l->slots[j]] = (uint64_t)v;
    }
  }
  void* stream = (void*)t_stream[dev];
  if (l->cooperative)
    rc = b->coop(func, (unsigned)size[0], (unsigned)size[1], (unsigned)size[2], (unsigned)size[3],
                 (unsigned)size[4], (unsigned)size[5], (unsigned)smem, stream, params);
  else
    rc = b->launch(func, (unsigned)size[0], (unsigned)size[1], (unsigned)size[2], (unsigned)size[3],
                   (unsigned)size[4], (unsigned)size[5], (unsigned)smem, stream, params, NULL);
  *ret_code = kTVMNullptr;
  if (rc == 0) return 0;
  /* the text the Python launch reports (loaders/cuda.py, kernel_callbacks._report) */
  error_text(b, rc, text, sizeof(text));
  return tvmrt_fail(
      "",
      "KernelError: launching CUDA kernel %s on cuda(%d) with grid (%u, %u, %u), block (%u, %u, "
      "%u) and %u bytes of dynamic shared memory failed: CUDA: %s failed: %s",
      l->name, dev, (unsigned)size[0], (unsigned)size[1], (unsigned)size[2], (unsigned)size[3],
      (unsigned)size[4], (unsigned)size[5], (unsigned)smem,
      l->cooperative ? "cuLaunchCooperativeKernel" : "cuLaunchKernel", text);
}

/* __tvm_set_device: kDLCUDA with a device id is recorded here; anything else goes to Python. */
static int set_device_fn(TVMValue* args, int* codes, int num_args, TVMValue* ret, int* ret_code) {
  if (__atomic_load_n(&g_enabled, __ATOMIC_RELAXED) && num_args == 2 && codes[0] == kTVMArgInt &&
      codes[1] == kTVMArgInt && args[0].v_int64 == kDLCUDA && args[1].v_int64 >= 0 &&
      args[1].v_int64 < DEVICES) {
    t_device = (int)args[1].v_int64;
    return 0;
  }
  return cold(0, args, codes, num_args, ret, ret_code);
}

static const tvmrt_native_entry g_set_device[] = {{"__tvm_set_device", set_device_fn}};

/* The handle of __tvm_set_device in C (its table registered first), or NULL. */
TVM_DLL const void* tvmrt_cuda_set_device_function(void) {
  return tvmrt_register_native_table(g_set_device, 1) == 0 ? &g_set_device[0] : NULL;
}
