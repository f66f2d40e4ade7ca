/*
 * The `opencl` module (TVM's OpenCLModule) from a module blob entry: str fmt ("cl": OpenCL C
 * source; "xclbin", "awsxclbin", "aocx": a device binary), the kernel table (kernel_table.c),
 * str data. As the Python loader (runtime/loaders/opencl.py) and TVM's OpenCLWrappedFunc: the
 * program is built for a device at the first launch there and each kernel made once per
 * device; a call's arguments and launch extents are kernel_table.c's, a buffer argument is
 * the cl_mem of a live OpenCL array's handle, and the kernel is queued on the thread's queue
 * of the device __tvm_set_device chose (global size grid * block over the dimensions the
 * launch tags use), without waiting.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

#define MAX_CL_DEVICES TVMRT_MAX_DEVICES
#define CL_PROGRAM_BUILD_LOG 0x1183u

typedef struct {
  const tvmrt_kernel_info* info;
  void* kernels[MAX_CL_DEVICES]; /* cl_kernel per device, made at the first launch there */
  int work_dim;                  /* the dimensions the launch tags use (TVM's work_dim) */
  pthread_mutex_t mu;            /* a cl_kernel's arguments are set and enqueued as one */
  struct cl_module* mod;
} cl_kernel_entry;

typedef struct cl_module {
  char fmt[16];
  char* data; /* source (with a NUL after it) or binary */
  size_t len;
  tvmrt_kernel_table table;
  cl_kernel_entry* kernels; /* one per table entry */
  void* programs[MAX_CL_DEVICES];
  pthread_mutex_t mu;
} cl_module;

static const char* const k_binary_formats[] = {"aocx", "awsxclbin", "xclbin"};

/* the program of m built for opencl(dev) (under m->mu) */
static void* program_on(cl_module* m, int dev, const tvmrt_opencl_api* api, void* context,
                        void* device) {
  void* program;
  int32_t status = 0, binary_status = 0;
  if (m->programs[dev] != NULL) return m->programs[dev];
  if (strcmp(m->fmt, "cl") == 0) {
    const char* text = m->data;
    program = api->create_program_with_source(context, 1, &text, &m->len, &status);
  } else {
    const unsigned char* bin = (const unsigned char*)m->data;
    program = api->create_program_with_binary(context, 1, &device, &m->len, &bin, &binary_status,
                                              &status);
  }
  if (program == NULL) {
    tvmrt_opencl_error(
        strcmp(m->fmt, "cl") == 0 ? "clCreateProgramWithSource" : "clCreateProgramWithBinary",
        status != 0 ? status : binary_status);
    return NULL;
  }
  status = api->build_program(program, 1, &device, "", NULL, NULL);
  if (status != 0) {
    char log[2048] = "";
    size_t got = 0;
    if (api->get_program_build_info(program, device, CL_PROGRAM_BUILD_LOG, sizeof(log) - 1, log,
                                    &got) != 0) {
      log[0] = '\0';
    }
    log[sizeof(log) - 1] = '\0';
    api->release_program(program);
    tvmrt_opencl_error("clBuildProgram", status);
    {
      char msg[512];
      snprintf(msg, sizeof(msg), "%s", tvmrt_peek_last_error());
      tvmrt_fail("ModuleLoadError",
                 "building the OpenCL program (format '%s') for opencl(%d) failed: %s%s%.1500s",
                 m->fmt, dev, msg, log[0] != '\0' ? "; build log: " : "", log);
    }
    return NULL;
  }
  m->programs[dev] = program;
  return program;
}

/* the cl_kernel of k on opencl(dev) (the program built there first) */
static void* kernel_on(cl_kernel_entry* k, int dev, const tvmrt_opencl_api* api, void* context,
                       void* device) {
  cl_module* m = k->mod;
  void *program, *kernel;
  int32_t status = 0;
  pthread_mutex_lock(&m->mu);
  if (k->kernels[dev] != NULL) {
    kernel = k->kernels[dev];
    pthread_mutex_unlock(&m->mu);
    return kernel;
  }
  if ((program = program_on(m, dev, api, context, device)) == NULL) {
    pthread_mutex_unlock(&m->mu);
    return NULL;
  }
  kernel = api->create_kernel(program, k->info->key, &status);
  if (kernel == NULL) {
    char msg[512];
    pthread_mutex_unlock(&m->mu);
    tvmrt_opencl_error("clCreateKernel", status != 0 ? status : -46);
    snprintf(msg, sizeof(msg), "%s", tvmrt_peek_last_error());
    tvmrt_fail("ModuleLoadError",
               "OpenCL program has no kernel '%.200s' that its FunctionInfo table lists: %s",
               k->info->key, msg);
    return NULL;
  }
  k->kernels[dev] = kernel;
  pthread_mutex_unlock(&m->mu);
  return kernel;
}

static int f_launch(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  cl_kernel_entry* k = (cl_kernel_entry*)self;
  const tvmrt_opencl_api* api;
  unsigned size[6], smem;
  uint64_t holder[TVMRT_MAX_KERNEL_ARGS];
  size_t global[3], local[3];
  int i, dev = tvmrt_current_device(kDLOpenCL);
  int32_t status = 0;
  const char* call = "clSetKernelArg";
  void *context, *device, *queue, *kernel;
  (void)ret;
  (void)rc;
  if (tvmrt_kernel_call_args(k->info, args, codes, n, holder, size, &smem) != 0) return -1;
  if (tvmrt_opencl_device(dev, &context, &device, &queue) != 0) {
    char msg[1024];
    const char* kind = "";
    const char* why = tvmrt_take_last_error(&kind);
    snprintf(msg, sizeof(msg), "%s", why != NULL ? why : "no OpenCL device");
    return tvmrt_fail("KernelError", "kernel '%.200s' cannot run: %s", k->info->key, msg);
  }
  api = tvmrt_opencl_driver();
  if ((kernel = kernel_on(k, dev, api, context, device)) == NULL) return -1;
  for (i = 0; i < k->info->num_args; ++i) { /* buffer handles become their cl_mem */
    if (k->info->kinds[i] == TVMRT_ARG_HANDLE && holder[i] != 0) {
      char what[256];
      void* mem;
      snprintf(what, sizeof(what), "kernel '%.200s' argument %d", k->info->key, i);
      if ((mem = tvmrt_opencl_buffer((void*)(uintptr_t)holder[i], what)) == NULL) return -1;
      holder[i] = (uint64_t)(uintptr_t)mem;
    }
  }
  for (i = 0; i < k->work_dim; ++i) {
    global[i] = (size_t)size[i] * size[3 + i];
    local[i] = size[3 + i];
  }
  pthread_mutex_lock(&k->mu);
  for (i = 0; i < k->info->num_args && status == 0; ++i) {
    int kind = k->info->kinds[i];
    size_t arg_size = kind == TVMRT_ARG_I32 || kind == TVMRT_ARG_U32 || kind == TVMRT_ARG_F32 ? 4
                      : kind == TVMRT_ARG_HANDLE ? sizeof(void*)
                                                 : 8;
    status = api->set_kernel_arg(kernel, (uint32_t)i, arg_size, &holder[i]);
  }
  if (status == 0) {
    call = "clEnqueueNDRangeKernel";
    status = api->enqueue_nd_range_kernel(queue, kernel, (uint32_t)k->work_dim, NULL, global, local,
                                          0, NULL, NULL);
  }
  pthread_mutex_unlock(&k->mu);
  if (status != 0) {
    char msg[512];
    tvmrt_opencl_error(call, status);
    snprintf(msg, sizeof(msg), "%s", tvmrt_peek_last_error());
    return tvmrt_fail("KernelError",
                      "launching OpenCL kernel '%.200s' on opencl(%d) with grid (%u, %u, %u) and "
                      "block (%u, %u, %u) failed: %s",
                      k->info->key, dev, size[0], size[1], size[2], size[3], size[4], size[5], msg);
  }
  return 0;
}

static tvmrt_func* opencl_lookup(tvmrt_module* self, const char* name) {
  cl_module* m = (cl_module*)self->impl;
  ptrdiff_t i = tvmrt_kernel_table_find(&m->table, name);
  return i < 0 ? NULL : tvmrt_func_new(f_launch, &m->kernels[i], &self->hdr);
}

static void free_module(cl_module* m) {
  const tvmrt_opencl_api* api = NULL;
  size_t i;
  int dev;
  for (dev = 0; dev < MAX_CL_DEVICES && api == NULL; ++dev) {
    if (m->programs[dev] != NULL) api = tvmrt_opencl_driver(); /* loaded: it built them */
  }
  for (i = 0; m->kernels != NULL && i < m->table.count; ++i) {
    for (dev = 0; dev < MAX_CL_DEVICES; ++dev) {
      if (m->kernels[i].kernels[dev] != NULL && api != NULL)
        api->release_kernel(m->kernels[i].kernels[dev]);
    }
    pthread_mutex_destroy(&m->kernels[i].mu);
  }
  for (dev = 0; dev < MAX_CL_DEVICES; ++dev) {
    if (m->programs[dev] != NULL && api != NULL) api->release_program(m->programs[dev]);
  }
  tvmrt_kernel_table_free(&m->table);
  free(m->kernels);
  free(m->data);
  pthread_mutex_destroy(&m->mu);
  free(m);
}

static void opencl_finalize(tvmrt_module* self) { free_module((cl_module*)self->impl); }

/* the work dimensions a kernel's launch tags use: 1 + the highest x/y/z index (TVM's
   LaunchParamConfig::work_dim) */
static int work_dim(const tvmrt_kernel_info* info) {
  int i, dim = 1;
  for (i = 0; i < info->num_slots; ++i) {
    if (info->slots[i] % 3 + 1 > dim) dim = info->slots[i] % 3 + 1;
  }
  return dim;
}

/* whether the n bytes are UTF-8 text (the Python loader decodes the source) */
static size_t utf8_problem(const unsigned char* s, size_t n) {
  size_t i = 0;
  while (i < n) {
    unsigned c = s[i];
    size_t extra, k;
    unsigned cp;
    if (c < 0x80) {
      ++i;
      continue;
    }
    if (c >= 0xC2 && c <= 0xDF) {
      extra = 1;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      extra = 2;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      extra = 3;
      cp = c & 0x07;
    } else {
      return i + 1;
    }
    if (extra > n - i - 1) return i + 1;
    for (k = 1; k <= extra; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return i + 1;
      cp = cp << 6 | (s[i + k] & 0x3F);
    }
    if ((extra == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
        (extra == 3 && (cp < 0x10000 || cp > 0x10FFFF))) {
      return i + 1;
    }
    i += extra + 1;
  }
  return 0;
}

tvmrt_module* tvmrt_opencl_module_load(tvmrt_reader* r) {
  cl_module* m = (cl_module*)calloc(1, sizeof(cl_module));
  tvmrt_module* mod;
  char* fmt = NULL;
  char what[192];
  size_t i, bad;
  int known;
  if (m == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate an OpenCL module");
    return NULL;
  }
  pthread_mutex_init(&m->mu, NULL);
  if (tvmrt_read_str(r, &fmt, NULL, "OpenCL module format") != 0) goto fail;
  known = strcmp(fmt, "cl") == 0;
  for (i = 0; i < sizeof(k_binary_formats) / sizeof(k_binary_formats[0]); ++i) {
    known |= strcmp(fmt, k_binary_formats[i]) == 0;
  }
  if (!known) {
    tvmrt_fail("ModuleLoadError",
               "%s: OpenCL module format '%.32s' is not one tvmrt loads: expected 'cl' (OpenCL C "
               "source) or a device binary (aocx, awsxclbin, xclbin)",
               r->what, fmt);
    goto fail;
  }
  snprintf(m->fmt, sizeof(m->fmt), "%s", fmt);
  snprintf(what, sizeof(what), "%s: OpenCL module (%s)", r->what, m->fmt);
  if (tvmrt_kernel_table_read(r, "OpenCL", what, &m->table) != 0) goto fail;
  m->kernels =
      (cl_kernel_entry*)calloc(m->table.count ? m->table.count : 1, sizeof(cl_kernel_entry));
  if (m->kernels == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate an OpenCL module's kernels");
    goto fail;
  }
  for (i = 0; i < m->table.count; ++i) {
    m->kernels[i].info = &m->table.kernels[i];
    m->kernels[i].work_dim = work_dim(&m->table.kernels[i]);
    m->kernels[i].mod = m;
    pthread_mutex_init(&m->kernels[i].mu, NULL);
  }
  if (tvmrt_read_str(r, &m->data, &m->len, "OpenCL program") != 0) goto fail;
  if (strcmp(m->fmt, "cl") == 0 &&
      (bad = utf8_problem((const unsigned char*)m->data, m->len)) != 0) {
    tvmrt_fail("ModuleLoadError",
               "OpenCL module: format 'cl' but the source is not text: byte %zu is not UTF-8",
               bad - 1);
    goto fail;
  }
  mod = tvmrt_module_new("opencl", m);
  if (mod == NULL) goto fail;
  mod->lookup = opencl_lookup;
  mod->finalize = opencl_finalize;
  free(fmt);
  return mod;
fail:
  free(fmt);
  free_module(m);
  return NULL;
}
