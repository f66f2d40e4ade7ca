/*
 * The `cuda` module (TVM's CUDAModule) from a module blob entry: str fmt (ptx, cubin or
 * fatbin), the kernel table (kernel_table.c: name -> FunctionInfo), str data. As the Python
 * loader (runtime/loaders/cuda.py) and TVM's CUDAWrappedFunc: the image is loaded on a GPU
 * at its first launch there (cuModuleLoadData); a call's arguments and launch extents are
 * kernel_table.c's, and the kernel is queued on the thread's stream of the device
 * __tvm_set_device chose, without waiting.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

#define MAX_GPUS TVMRT_MAX_DEVICES
#define SMEM_DEFAULT_LIMIT (48 * 1024)

typedef struct {
  const tvmrt_kernel_info* info;
  void* funcs[MAX_GPUS]; /* CUfunction per device, looked up at the first launch there */
  int smem_set[MAX_GPUS];
  struct cu_module* mod;
} cu_kernel;

typedef struct cu_module {
  char fmt[16];
  int source;     /* the image is CUDA C source: NVRTC makes PTX per GPU architecture */
  uint8_t* image; /* PTX (and source) gets a NUL after it */
  tvmrt_kernel_table table;
  cu_kernel* kernels; /* one per table entry */
  void* modules[MAX_GPUS];
  pthread_mutex_t mu;
} cu_module;

/* ---------------------------------------------------------------------------------- */
/* the image, checked before a driver sees it (cuModuleLoadData takes no length), with the
   Python loader's words (runtime/loaders/cuda_image.py): a cubin is a 64-bit ELF file for
   EM_CUDA, a fatbin's header and entries stay inside it and hold code, anything else is
   PTX text with its .version and .target lines */

#define FATBIN_MAGIC 0xBA55ED50u
#define FATBIN_HEADER 16
#define FATBIN_ENTRY 32

static uint32_t le32(const uint8_t* p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t* p) { return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32; }

/* whether a line of text (up to its first NUL) starts, after blanks, with `directive` and
   then blanks and `then` */
static int has_directive(const char* text, const char* directive, const char* then) {
  const char* line = text;
  size_t nd = strlen(directive), nt = strlen(then);
  while (line != NULL && *line != '\0') {
    const char* p = line;
    while (*p == ' ' || *p == '\t') ++p;
    if (strncmp(p, directive, nd) == 0 && (p[nd] == ' ' || p[nd] == '\t')) {
      p += nd;
      while (*p == ' ' || *p == '\t') ++p;
      if (strncmp(p, then, nt) == 0) return 1;
    }
    line = strchr(line, '\n');
    if (line != NULL) ++line;
  }
  return 0;
}

static int check_fatbin(const uint8_t* d, size_t len, const char* what) {
  uint64_t header = d[6] | (uint64_t)d[7] << 8, size = le64(d + 8), end = header + size, at;
  int code = 0;
  if (le32(d) != FATBIN_MAGIC || end > len) {
    return tvmrt_fail("ModuleLoadError", "%s: the fatbin header claims %llu bytes past its end",
                      what, (unsigned long long)size);
  }
  for (at = header; at + FATBIN_ENTRY <= end;) {
    uint32_t kind = d[at] | (uint32_t)d[at + 1] << 8, entry_header = le32(d + at + 4);
    uint64_t payload = le64(d + at + 8);
    if (entry_header < FATBIN_ENTRY || entry_header > end - at ||
        payload > end - at - entry_header) {
      return tvmrt_fail("ModuleLoadError", "%s: fatbin entry at byte %llu runs past the fatbin",
                        what, (unsigned long long)at);
    }
    code |= kind == 1 || kind == 2;
    at += entry_header + payload;
  }
  if (!code) {
    return tvmrt_fail("ModuleLoadError", "%s: the fatbin holds neither PTX nor machine code", what);
  }
  return 0;
}

static int check_image(const uint8_t* d, size_t len, const char* what) {
  if (len >= 4 && memcmp(d, "\177ELF", 4) == 0) {
    unsigned machine;
    if (len < 64 || d[4] != 2)
      return tvmrt_fail("ModuleLoadError", "%s: the cubin is not a 64-bit ELF file", what);
    machine = d[18] | (unsigned)d[19] << 8;
    if (machine != 190) {
      return tvmrt_fail("ModuleLoadError",
                        "%s: the ELF file is for machine %u, not NVIDIA CUDA (190)", what, machine);
    }
    return 0;
  }
  if (len >= FATBIN_HEADER && le32(d) == FATBIN_MAGIC) return check_fatbin(d, len, what);
  /* the image was read with a NUL after it */
  if (!has_directive((const char*)d, ".version", "") ||
      !has_directive((const char*)d, ".target", "sm_")) {
    return tvmrt_fail("ModuleLoadError",
                      "%s: the CUDA module is neither PTX (no '.version'/'.target sm_XX' "
                      "lines), a cubin (ELF) nor a fatbin",
                      what);
  }
  return 0;
}

/* the CUfunction of k on device dev (the image loaded there first) */
static void* kernel_function(cu_kernel* k, int dev, const tvmrt_cuda_api* api) {
  cu_module* m = k->mod;
  void* f;
  int rc = 0;
  pthread_mutex_lock(&m->mu);
  if (m->modules[dev] == NULL && m->source) { /* compiled for this GPU's architecture */
    int cudev = 0, major = 0, minor = 0;
    char* ptx;
    char what[64];
    snprintf(what, sizeof(what), "CUDA module (cuda source) on cuda(%d)", dev);
    if ((rc = api->device_get(&cudev, dev)) != 0 ||
        (rc = api->device_get_attribute(&major, 75, cudev)) !=
            0 || /* ..._COMPUTE_CAPABILITY_MAJOR */
        (rc = api->device_get_attribute(&minor, 76, cudev)) != 0) {
      pthread_mutex_unlock(&m->mu);
      tvmrt_cuda_error("cuDeviceGetAttribute", rc);
      return NULL;
    }
    ptx = tvmrt_nvrtc_compile((const char*)m->image, major, minor, what);
    if (ptx == NULL) {
      pthread_mutex_unlock(&m->mu);
      return NULL;
    }
    rc = api->module_load_data(&m->modules[dev], ptx);
    free(ptx);
    if (rc != 0) {
      m->modules[dev] = NULL;
      pthread_mutex_unlock(&m->mu);
      tvmrt_cuda_error("cuModuleLoadData", rc);
      return NULL;
    }
  }
  if (m->modules[dev] == NULL && (rc = api->module_load_data(&m->modules[dev], m->image)) != 0) {
    m->modules[dev] = NULL;
    pthread_mutex_unlock(&m->mu);
    tvmrt_cuda_error("cuModuleLoadData", rc);
    return NULL;
  }
  if (k->funcs[dev] == NULL &&
      (rc = api->module_get_function(&k->funcs[dev], m->modules[dev], k->info->key)) != 0) {
    char msg[512];
    k->funcs[dev] = NULL;
    pthread_mutex_unlock(&m->mu);
    tvmrt_cuda_error("cuModuleGetFunction", rc);
    snprintf(msg, sizeof(msg), "%s", tvmrt_peek_last_error());
    tvmrt_fail("ModuleLoadError",
               "CUDA module (%s): the CUDA image has no kernel '%.200s' that its FunctionInfo "
               "table lists: %s",
               m->fmt, k->info->key, msg);
    return NULL;
  }
  f = k->funcs[dev];
  pthread_mutex_unlock(&m->mu);
  return f;
}

static int f_launch(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  cu_kernel* k = (cu_kernel*)self;
  const tvmrt_cuda_api* api;
  unsigned size[6], smem;
  uint64_t holder[TVMRT_MAX_KERNEL_ARGS];
  void* ptrs[TVMRT_MAX_KERNEL_ARGS];
  int i, dev = tvmrt_current_device(kDLCUDA), code;
  void* func;
  (void)ret;
  (void)rc;
  if (tvmrt_kernel_call_args(k->info, args, codes, n, holder, size, &smem) != 0) return -1;
  for (i = 0; i < k->info->num_args; ++i) ptrs[i] = &holder[i];
  if (tvmrt_cuda_activate(dev) != 0) return -1;
  api = tvmrt_cuda_driver();
  if ((func = kernel_function(k, dev, api)) == NULL) return -1;
  if (smem >= SMEM_DEFAULT_LIMIT && (int)smem > k->smem_set[dev]) {
    if ((code = api->func_set_attribute(func, 8, (int)smem)) != 0) {
      return tvmrt_cuda_error("cuFuncSetAttribute", code);
    }
    k->smem_set[dev] = (int)smem;
  }
  code = api->launch_kernel(func, size[0], size[1], size[2], size[3], size[4], size[5], smem,
                            tvmrt_cuda_stream(dev), ptrs, NULL);
  if (code != 0) {
    char msg[512];
    tvmrt_cuda_error("cuLaunchKernel", code);
    snprintf(msg, sizeof(msg), "%s", tvmrt_peek_last_error());
    return tvmrt_fail("KernelError",
                      "launching CUDA kernel '%.200s' on cuda(%d) with grid (%u, %u, %u), block "
                      "(%u, %u, %u) and %u bytes of dynamic shared memory failed: %s",
                      k->info->key, dev, size[0], size[1], size[2], size[3], size[4], size[5], smem,
                      msg);
  }
  return 0;
}

static tvmrt_func* cuda_lookup(tvmrt_module* self, const char* name) {
  cu_module* m = (cu_module*)self->impl;
  ptrdiff_t i = tvmrt_kernel_table_find(&m->table, name);
  return i < 0 ? NULL : tvmrt_func_new(f_launch, &m->kernels[i], &self->hdr);
}

static void cuda_finalize(tvmrt_module* self) {
  cu_module* m = (cu_module*)self->impl;
  int dev;
  for (dev = 0; dev < MAX_GPUS; ++dev) {
    if (m->modules[dev] != NULL && tvmrt_cuda_activate(dev) == 0) {
      tvmrt_cuda_driver()->module_unload(m->modules[dev]);
    }
  }
  tvmrt_kernel_table_free(&m->table);
  free(m->kernels);
  free(m->image);
  pthread_mutex_destroy(&m->mu);
  free(m);
}

tvmrt_module* tvmrt_cuda_module_load(tvmrt_reader* r) {
  cu_module* m = (cu_module*)calloc(1, sizeof(cu_module));
  tvmrt_module* mod;
  char* fmt = NULL;
  char what[192];
  size_t len = 0, i;
  if (m == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate a CUDA module");
    return NULL;
  }
  pthread_mutex_init(&m->mu, NULL);
  if (tvmrt_read_str(r, &fmt, NULL, "CUDA module format") != 0) goto fail;
  m->source = strcmp(fmt, "cu") == 0 || strcmp(fmt, "cuda") == 0;
  if (m->source && tvmrt_nvrtc_available(r->what) != 0) goto fail;
  if (!m->source && strcmp(fmt, "ptx") != 0 && strcmp(fmt, "cubin") != 0 &&
      strcmp(fmt, "fatbin") != 0) {
    tvmrt_fail("ModuleLoadError",
               "%s: CUDA module format '%.32s' is not one tvmrt loads: expected ptx, cubin, "
               "fatbin or CUDA C source (cuda)",
               r->what, fmt);
    goto fail;
  }
  snprintf(m->fmt, sizeof(m->fmt), "%s", fmt);
  snprintf(what, sizeof(what), "%s: CUDA module (%s)", r->what, m->fmt);
  if (tvmrt_kernel_table_read(r, "CUDA", what, &m->table) != 0) goto fail;
  m->kernels = (cu_kernel*)calloc(m->table.count ? m->table.count : 1, sizeof(cu_kernel));
  if (m->kernels == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate a CUDA module's kernels");
    goto fail;
  }
  for (i = 0; i < m->table.count; ++i) {
    m->kernels[i].info = &m->table.kernels[i];
    m->kernels[i].mod = m;
  }
  if (tvmrt_read_str(r, (char**)&m->image, &len, "CUDA image") != 0) goto fail;
  if (!m->source && check_image(m->image, len, what) != 0) goto fail;
  mod = tvmrt_module_new("cuda", m);
  if (mod == NULL) goto fail;
  mod->lookup = cuda_lookup;
  mod->finalize = cuda_finalize;
  free(fmt);
  return mod;
fail:
  free(fmt);
  tvmrt_kernel_table_free(&m->table);
  free(m->kernels);
  free(m->image);
  pthread_mutex_destroy(&m->mu);
  free(m);
  return NULL;
}
