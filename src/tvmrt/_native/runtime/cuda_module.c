/*
 * The `cuda` module (TVM's CUDAModule) from a module blob entry: str fmt (ptx, cubin or
 * fatbin), the kernel table (name -> FunctionInfo: argument dtypes, launch-param tags; TVM
 * >= 0.21 adds arg_extra_tags per entry, read when the bytes hold that layout), str data.
 * As the Python loader (runtime/loaders/cuda.py) and TVM's CUDAWrappedFunc: the image is
 * loaded on a GPU at its first launch there (cuModuleLoadData); a call passes the kernel's
 * arguments, then one integer per launch tag (blockIdx.* grid extents, threadIdx.* block
 * extents, the last one the dynamic shared memory when tagged; a value <= 0 leaves 1, a
 * repeated tag's last value wins); arguments are packed as TVM's PackFuncVoidAddr (int32,
 * uint32 and float32 narrowed; 64-bit values and handles as they are) and the kernel is
 * queued on the thread's stream of the device __tvm_set_device chose, without waiting.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

#define MAX_GPUS 64
#define MAX_KERNEL_ARGS 1024
#define SMEM_DEFAULT_LIMIT (48 * 1024)

typedef struct {
  char* key;
  int num_args;
  unsigned char* kinds;
  int slots[16]; /* per valued launch tag: 0-2 grid x/y/z, 3-5 block x/y/z */
  int num_slots, dyn_smem;
  void* funcs[MAX_GPUS]; /* CUfunction per device, looked up at the first launch there */
  int smem_set[MAX_GPUS];
  struct cu_module* mod;
} cu_kernel;

typedef struct cu_module {
  char fmt[16];
  int source;     /* the image is CUDA C source: NVRTC makes PTX per GPU architecture */
  uint8_t* image; /* PTX (and source) gets a NUL after it */
  size_t num_kernels;
  cu_kernel* kernels;
  void* modules[MAX_GPUS];
  pthread_mutex_t mu;
} cu_module;

/* the work-size slot of a tag: 0-5, -1 the dynamic shared memory, -2 a launch flag, -3 bad */
static int tag_slot(const char* tag) {
  const char* dot = strchr(tag, '.');
  if (strcmp(tag, "tir.use_dyn_shared_memory") == 0 ||
      strcmp(tag, "tirx.use_dyn_shared_memory") == 0) {
    return -1;
  }
  if (dot != NULL && (strcmp(dot, ".use_programtic_dependent_launch") == 0 ||
                      strcmp(dot, ".use_cooperative_launch") == 0)) {
    return -2;
  }
  if (dot == NULL || strlen(dot) != 2 || dot[1] < 'x' || dot[1] > 'z') return -3;
  if ((size_t)(dot - tag) == 8 && strncmp(tag, "blockIdx", 8) == 0) return dot[1] - 'x';
  if ((size_t)(dot - tag) == 9 && strncmp(tag, "threadIdx", 9) == 0) return 3 + dot[1] - 'x';
  return -3;
}

static int read_tags(tvmrt_reader* r, cu_kernel* k) {
  uint64_t n, i;
  if (tvmrt_read_count(r, &n, 8, "launch param tags") != 0) return -1;
  for (i = 0; i < n; ++i) {
    char* tag = NULL;
    int slot;
    if (tvmrt_read_str(r, &tag, NULL, "launch param tag") != 0) return -1;
    slot = tag_slot(tag);
    if (slot >= 0 && k->num_slots == 16) {
      tvmrt_fail("ModuleLoadError",
                 "kernel '%.200s' has more than 16 launch param tags that take a value (TVM "
                 "writes at most six: blockIdx.x/y/z, threadIdx.x/y/z)",
                 k->key);
      free(tag);
      return -1;
    }
    if (slot == -3 || (slot >= -1 && k->dyn_smem) ||
        (slot == -2 && strstr(tag, "cooperative") != NULL)) {
      if (slot == -2) {
        tvmrt_fail("ModuleLoadError",
                   "kernel '%.200s' is a cooperative launch (%.100s); libtvmrt_runtime does not "
                   "launch cooperative kernels (the Python runtime does)",
                   k->key, tag);
      } else {
        tvmrt_fail("ModuleLoadError",
                   "kernel '%.200s': launch param tag '%.100s' is not blockIdx.x/y/z, "
                   "threadIdx.x/y/z or tir.use_dyn_shared_memory (the last tag)",
                   k->key, tag);
      }
      free(tag);
      return -1;
    }
    free(tag);
    if (slot == -1) k->dyn_smem = 1;
    if (slot >= 0) k->slots[k->num_slots++] = slot;
  }
  return 0;
}

static int read_kernel(tvmrt_reader* r, cu_kernel* k, int extra_tags) {
  uint64_t n, i;
  char* name = NULL;
  if (tvmrt_read_str(r, &k->key, NULL, "kernel name") != 0 ||
      tvmrt_read_str(r, &name, NULL, "FunctionInfo name") != 0 ||
      tvmrt_read_count(r, &n, 4, "number of argument types") != 0) {
    free(name);
    return -1;
  }
  free(name);
  if (n > MAX_KERNEL_ARGS) {
    return tvmrt_fail("ModuleLoadError", "kernel '%.200s' has %llu arguments (at most %d)", k->key,
                      (unsigned long long)n, MAX_KERNEL_ARGS);
  }
  k->num_args = (int)n;
  k->kinds = (unsigned char*)calloc(n ? n : 1, 1);
  if (k->kinds == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot read a kernel table");
  for (i = 0; i < n; ++i) {
    uint8_t t[4];
    int kind;
    if (tvmrt_read_bytes(r, t, 4, "argument type") != 0) return -1;
    kind = tvmrt_cuda_arg_kind(t[0], t[1], t[2] | t[3] << 8);
    if (kind < 0) {
      return tvmrt_fail("ModuleLoadError",
                        "CUDA kernel '%.200s': cannot handle argument %llu of type (code %u, bits "
                        "%u, lanes %u) as a device function argument (TVM passes only 32/64-bit "
                        "ints, floats and handles)",
                        k->key, (unsigned long long)i, t[0], t[1], (unsigned)(t[2] | t[3] << 8));
    }
    k->kinds[i] = (unsigned char)kind;
  }
  if (read_tags(r, k) != 0) return -1;
  if (extra_tags) {
    uint64_t m;
    if (tvmrt_read_count(r, &m, 4, "number of argument extra tags") != 0) return -1;
    if (m != n) {
      return tvmrt_fail("ModuleLoadError", "kernel '%.200s' has %llu arguments but %llu extra tags",
                        k->key, (unsigned long long)n, (unsigned long long)m);
    }
    for (i = 0; i < m; ++i) {
      int32_t tag;
      if (tvmrt_read_bytes(r, &tag, 4, "argument extra tag") != 0) return -1;
      if (tag == 1) {
        return tvmrt_fail("ModuleLoadError",
                          "kernel '%.200s' takes a TMA tensor map argument (arg_extra_tags = 1, "
                          "TVM >= 0.21); tvmrt does not pass tensor maps",
                          k->key);
      }
      if (tag != 0) {
        return tvmrt_fail("ModuleLoadError", "kernel '%.200s': unknown argument extra tag %d",
                          k->key, (int)tag);
      }
    }
  }
  return 0;
}

static void free_kernels(cu_module* m) {
  size_t i;
  for (i = 0; i < m->num_kernels; ++i) {
    free(m->kernels[i].key);
    free(m->kernels[i].kinds);
  }
  free(m->kernels);
  m->kernels = NULL;
  m->num_kernels = 0;
}

static int read_table(tvmrt_reader* r, cu_module* m, int extra_tags) {
  uint64_t n, i;
  if (tvmrt_read_count(r, &n, 32, "number of kernels") != 0) return -1;
  m->kernels = (cu_kernel*)calloc(n ? n : 1, sizeof(cu_kernel));
  if (m->kernels == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot read kernels");
  m->num_kernels = (size_t)n;
  for (i = 0; i < n; ++i) {
    m->kernels[i].mod = m;
    if (read_kernel(r, &m->kernels[i], extra_tags) != 0) return -1;
  }
  return 0;
}

/* The kernel table in TVM >= 0.21's layout if the bytes hold it, else the older one. When
   neither reads, the error is the one of the layout that read further (the other misread a
   field as a length), a short read named as the module's: "<what>: kernel table: ..." */
static int read_any_table(tvmrt_reader* r, cu_module* m, const char* what) {
  size_t at = r->off, reached, skip = strlen(r->what);
  const char* text;
  char first[1024];
  if (read_table(r, m, 1) == 0) return 0;
  reached = r->off;
  snprintf(first, sizeof(first), "%s", tvmrt_peek_last_error());
  free_kernels(m);
  r->off = at;
  tvmrt_clear_last_error();
  if (read_table(r, m, 0) == 0) return 0;
  if (reached <= r->off) snprintf(first, sizeof(first), "%s", tvmrt_peek_last_error());
  text = strncmp(first, "ModuleLoadError: ", 17) == 0 ? first + 17 : first;
  if (strncmp(text, r->what, skip) != 0 || strncmp(text + skip, ": ", 2) != 0) {
    return tvmrt_fail("ModuleLoadError", "%s", text); /* a kernel's own check */
  }
  return tvmrt_fail("ModuleLoadError", "%s: kernel table: %s", what, text + skip + 2);
}

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
      (rc = api->module_get_function(&k->funcs[dev], m->modules[dev], k->key)) != 0) {
    char msg[512];
    k->funcs[dev] = NULL;
    pthread_mutex_unlock(&m->mu);
    tvmrt_cuda_error("cuModuleGetFunction", rc);
    snprintf(msg, sizeof(msg), "%s", tvmrt_peek_last_error());
    tvmrt_fail("ModuleLoadError",
               "CUDA module (%s): the CUDA image has no kernel '%.200s' that its FunctionInfo "
               "table lists: %s",
               m->fmt, k->key, msg);
    return NULL;
  }
  f = k->funcs[dev];
  pthread_mutex_unlock(&m->mu);
  return f;
}

static int f_launch(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  cu_kernel* k = (cu_kernel*)self;
  const tvmrt_cuda_api* api;
  unsigned size[6] = {1, 1, 1, 1, 1, 1}, smem = 0;
  uint64_t holder[MAX_KERNEL_ARGS];
  void* ptrs[MAX_KERNEL_ARGS];
  int i, dev = tvmrt_cuda_current_device(), code;
  void* func;
  (void)ret;
  (void)rc;
  if (n != k->num_args + k->num_slots + k->dyn_smem) {
    return tvmrt_fail("KernelError",
                      "kernel '%.200s' takes %d arguments and %d launch parameters, got %d values",
                      k->key, k->num_args, k->num_slots + k->dyn_smem, n);
  }
  for (i = 0; i < k->num_args; ++i) {
    int kind = k->kinds[i];
    if (tvmrt_cuda_pack_arg(kind, args[i], codes[i], &holder[i]) != 0) {
      return tvmrt_fail("KernelError",
                        "kernel '%.200s': argument %d must be a %s value, got type code %d", k->key,
                        i,
                        kind == TVMRT_CUDA_HANDLE                          ? "handle"
                        : kind == TVMRT_CUDA_F32 || kind == TVMRT_CUDA_F64 ? "float"
                                                                           : "integer",
                        codes[i]);
    }
    ptrs[i] = &holder[i];
  }
  for (i = 0; i < k->num_slots + k->dyn_smem; ++i) {
    code = codes[k->num_args + i];
    if (code != kDLInt && code != kDLUInt) {
      return tvmrt_fail("KernelError", "kernel '%.200s': launch parameter %d must be an integer",
                        k->key, i);
    }
    if (i < k->num_slots) {
      int64_t v = args[k->num_args + i].v_int64;
      if (v > 0) size[k->slots[i]] = v > 0x7fffffff ? 0x7fffffffu : (unsigned)v;
    } else {
      int64_t v = args[k->num_args + i].v_int64;
      smem = v > 0 && v < 0x7fffffff ? (unsigned)v : 0;
    }
  }
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
                      k->key, dev, size[0], size[1], size[2], size[3], size[4], size[5], smem, msg);
  }
  return 0;
}

static tvmrt_func* cuda_lookup(tvmrt_module* self, const char* name) {
  cu_module* m = (cu_module*)self->impl;
  size_t i;
  for (i = 0; i < m->num_kernels; ++i) {
    if (strcmp(m->kernels[i].key, name) == 0)
      return tvmrt_func_new(f_launch, &m->kernels[i], &self->hdr);
  }
  return NULL;
}

static void cuda_finalize(tvmrt_module* self) {
  cu_module* m = (cu_module*)self->impl;
  int dev;
  for (dev = 0; dev < MAX_GPUS; ++dev) {
    if (m->modules[dev] != NULL && tvmrt_cuda_activate(dev) == 0) {
      tvmrt_cuda_driver()->module_unload(m->modules[dev]);
    }
  }
  free_kernels(m);
  free(m->image);
  pthread_mutex_destroy(&m->mu);
  free(m);
}

tvmrt_module* tvmrt_cuda_module_load(tvmrt_reader* r) {
  cu_module* m = (cu_module*)calloc(1, sizeof(cu_module));
  tvmrt_module* mod;
  char* fmt = NULL;
  char what[192];
  size_t len = 0;
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
  if (read_any_table(r, m, what) != 0) goto fail;
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
  free_kernels(m);
  free(m->image);
  pthread_mutex_destroy(&m->mu);
  free(m);
  return NULL;
}
