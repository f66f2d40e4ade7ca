/* A recording stand-in for libcuda.so.1: the driver API entry points tvmrt calls, with the
 * driver's checks that matter for marshalling (a context current on the calling thread,
 * copies inside allocations, PTX NUL-terminated, the kernel's parameter count and sizes
 * read from the PTX's .entry) and a text log of every call. It never runs a kernel.
 * Memory is host memory, so copies round-trip for real. Tests load it through
 * TVMRT_LIBCUDA and read the log with fake_log(); fake_config() sets the GPU it pretends to be.
 * A process that cannot call them (a C program or a script under test) sets FAKE_LIBCUDA_GPUS
 * (the number of GPUs, read at cuInit), FAKE_LIBCUDA_SM (its compute capability, e.g. 90)
 * and FAKE_LIBCUDA_LOG (a file each line is appended to, and the count of live allocations
 * at exit).
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
enum { OK = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, INVALID_IMAGE = 200, INVALID_CONTEXT = 201 };
enum { NOT_FOUND = 500, INVALID_HANDLE = 400, NOT_INITIALIZED = 3, INVALID_DEVICE = 101 };

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_log[1 << 20];
static size_t g_len;
static int g_count = 1, g_major = 7, g_minor = 5, g_driver = 13000, g_inited;
static int g_ctx_token;
static _Thread_local void* t_ctx;

typedef struct {
  uint64_t base;
  size_t size;
} Alloc;
static Alloc g_allocs[4096];
static int g_nallocs;

typedef struct {
  char name[128];
  int nparams;
  int sizes[64];
  int max_smem;
} Func;

static FILE* g_file; /* FAKE_LIBCUDA_LOG: every line as it is logged (a killed process too) */

static void logf_(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  pthread_mutex_lock(&g_lock);
  if (g_len < sizeof(g_log) - 512) {
    size_t at = g_len;
    int n = vsnprintf(g_log + g_len, sizeof(g_log) - g_len, fmt, ap);
    if (n > 0) g_len += (size_t)n;
    g_log[g_len++] = '\n';
    g_log[g_len] = 0;
    if (g_file) {
      fputs(g_log + at, g_file);
      fflush(g_file);
    }
  }
  pthread_mutex_unlock(&g_lock);
  va_end(ap);
}

const char* fake_log(void) { return g_log; }
void fake_reset(void) {
  pthread_mutex_lock(&g_lock);
  g_len = 0;
  g_log[0] = 0;
  pthread_mutex_unlock(&g_lock);
}
void fake_config(int count, int major, int minor, int driver) {
  g_count = count;
  g_major = major;
  g_minor = minor;
  g_driver = driver;
}
int fake_live_allocations(void) { return g_nallocs; }
/* exact launch lines: each parameter's bytes in hex and the stream's address, so that two
   runs' launches can be compared byte for byte */
static int g_exact;
void fake_exact(int on) { g_exact = on; }

static CUresult need_ctx(const char* what) {
  if (!g_inited) return NOT_INITIALIZED;
  if (t_ctx != &g_ctx_token) {
    logf_("%s: no current context on this thread", what);
    return INVALID_CONTEXT;
  }
  return OK;
}

/* whether [ptr, ptr + n) lies inside one live allocation */
static int inside(uint64_t ptr, size_t n) {
  for (int i = 0; i < g_nallocs; ++i) {
    if (ptr >= g_allocs[i].base && ptr + n <= g_allocs[i].base + g_allocs[i].size) return 1;
  }
  return 0;
}

static void dump_log(void) {
  fprintf(g_file, "live allocations at exit: %d\n", g_nallocs);
  fclose(g_file);
}

CUresult cuInit(unsigned flags) {
  const char* gpus = getenv("FAKE_LIBCUDA_GPUS");
  const char* sm = getenv("FAKE_LIBCUDA_SM"); /* e.g. "90": the GPU's compute capability */
  const char* path = getenv("FAKE_LIBCUDA_LOG");
  if (gpus) g_count = atoi(gpus);
  if (sm) {
    g_major = atoi(sm) / 10;
    g_minor = atoi(sm) % 10;
  }
  if (!g_inited && path && (g_file = fopen(path, "a")) != NULL) atexit(dump_log);
  g_inited = 1;
  logf_("cuInit %u", flags);
  return flags ? INVALID_VALUE : OK;
}
CUresult cuDriverGetVersion(int* v) {
  *v = g_driver;
  return OK;
}
CUresult cuDeviceGetCount(int* n) {
  *n = g_count;
  return g_inited ? OK : NOT_INITIALIZED;
}
CUresult cuDeviceGet(int* d, int ordinal) {
  if (ordinal < 0 || ordinal >= g_count) return INVALID_DEVICE;
  *d = ordinal;
  return OK;
}
CUresult cuDeviceGetName(char* name, int len, int dev) {
  if (dev < 0 || dev >= g_count) return INVALID_DEVICE;
  snprintf(name, (size_t)len, "Fake GPU sm_%d%d", g_major, g_minor);
  return OK;
}
CUresult cuDeviceGetAttribute(int* out, int attr, int dev) {
  if (dev < 0 || dev >= g_count) return INVALID_DEVICE;
  switch (attr) {
    case 75: *out = g_major; break;
    case 76: *out = g_minor; break;
    case 1: *out = 1024; break;
    case 2: *out = 1024; break;
    case 3: *out = 1024; break;
    case 4: *out = 64; break;
    case 8: *out = 49152; break;
    case 10: *out = 32; break;
    case 12: *out = 65536; break;
    case 13: *out = 1500000; break;
    case 16: *out = 80; break;
    case 38: *out = 1 << 22; break;
    default: return INVALID_VALUE;
  }
  return OK;
}
CUresult cuDeviceTotalMem_v2(size_t* out, int dev) {
  *out = (size_t)16 << 30;
  return dev >= 0 && dev < g_count ? OK : INVALID_DEVICE;
}
CUresult cuDevicePrimaryCtxRetain(void** ctx, int dev) {
  if (dev < 0 || dev >= g_count) return INVALID_DEVICE;
  *ctx = &g_ctx_token;
  logf_("cuDevicePrimaryCtxRetain %d", dev);
  return OK;
}
CUresult cuCtxSetCurrent(void* ctx) {
  if (ctx != &g_ctx_token) return INVALID_CONTEXT;
  t_ctx = ctx;
  logf_("cuCtxSetCurrent");
  return OK;
}
static void run_host_functions(void);
CUresult cuCtxSynchronize(void) {
  run_host_functions();
  return need_ctx("cuCtxSynchronize");
}

CUresult cuMemAlloc_v2(uint64_t* ptr, size_t n) {
  CUresult r = need_ctx("cuMemAlloc");
  if (r) return r;
  if (n == 0) return INVALID_VALUE;
  if (n > ((size_t)1 << 32) || g_nallocs == 4096) return OUT_OF_MEMORY;
  void* p = aligned_alloc(256, (n + 255) / 256 * 256);
  if (!p) return OUT_OF_MEMORY;
  memset(p, 0, n);
  pthread_mutex_lock(&g_lock);
  g_allocs[g_nallocs].base = (uint64_t)(uintptr_t)p;
  g_allocs[g_nallocs++].size = n;
  pthread_mutex_unlock(&g_lock);
  *ptr = (uint64_t)(uintptr_t)p;
  logf_("cuMemAlloc %zu", n);
  return OK;
}
CUresult cuMemFree_v2(uint64_t ptr) {
  CUresult r = need_ctx("cuMemFree");
  if (r) return r;
  pthread_mutex_lock(&g_lock);
  for (int i = 0; i < g_nallocs; ++i) {
    if (g_allocs[i].base == ptr) {
      size_t size = g_allocs[i].size;
      g_allocs[i] = g_allocs[--g_nallocs];
      pthread_mutex_unlock(&g_lock);
      logf_("cuMemFree %zu", size);
      free((void*)(uintptr_t)ptr);
      return OK;
    }
  }
  pthread_mutex_unlock(&g_lock);
  logf_("cuMemFree of an unknown pointer");
  return INVALID_VALUE;
}
CUresult cuMemAllocHost_v2(void** p, size_t n) {
  *p = malloc(n ? n : 1);
  return *p ? OK : OUT_OF_MEMORY;
}
CUresult cuMemFreeHost(void* p) {
  free(p);
  return OK;
}
CUresult cuMemcpyHtoDAsync_v2(uint64_t dst, const void* src, size_t n, void* stream) {
  CUresult r = need_ctx("cuMemcpyHtoDAsync");
  if (r) return r;
  if (!inside(dst, n)) return INVALID_VALUE;
  memcpy((void*)(uintptr_t)dst, src, n);
  logf_("cuMemcpyHtoDAsync %zu stream=%s", n, stream ? "user" : "0");
  return OK;
}
CUresult cuMemcpyHtoD_v2(uint64_t dst, const void* src, size_t n) {
  return cuMemcpyHtoDAsync_v2(dst, src, n, NULL);
}
CUresult cuMemcpyDtoHAsync_v2(void* dst, uint64_t src, size_t n, void* stream) {
  CUresult r = need_ctx("cuMemcpyDtoHAsync");
  if (r) return r;
  if (!inside(src, n)) return INVALID_VALUE;
  memcpy(dst, (void*)(uintptr_t)src, n);
  logf_("cuMemcpyDtoHAsync %zu stream=%s", n, stream ? "user" : "0");
  return OK;
}
CUresult cuMemcpyDtoDAsync_v2(uint64_t dst, uint64_t src, size_t n, void* stream) {
  CUresult r = need_ctx("cuMemcpyDtoDAsync");
  if (r) return r;
  if (!inside(src, n) || !inside(dst, n)) return INVALID_VALUE;
  memmove((void*)(uintptr_t)dst, (void*)(uintptr_t)src, n);
  logf_("cuMemcpyDtoDAsync %zu stream=%s", n, stream ? "user" : "0");
  return OK;
}
CUresult cuMemsetD32_v2(uint64_t dst, unsigned v, size_t n) {
  CUresult r = need_ctx("cuMemsetD32");
  if (r) return r;
  if (!inside(dst, n * 4)) return INVALID_VALUE;
  for (size_t i = 0; i < n; ++i) ((unsigned*)(uintptr_t)dst)[i] = v;
  logf_("cuMemsetD32 %u x%zu", v, n);
  return OK;
}

CUresult cuStreamCreate(void** s, unsigned flags) {
  CUresult r = need_ctx("cuStreamCreate");
  if (r) return r;
  *s = malloc(1);
  logf_("cuStreamCreate flags=%u", flags);
  return OK;
}
CUresult cuStreamDestroy_v2(void* s) {
  free(s);
  logf_("cuStreamDestroy");
  return s ? OK : INVALID_HANDLE;
}
/* host functions queued with cuLaunchHostFunc run at the next synchronisation, as a real
 * stream runs them once the work queued before them is done */
typedef void (*HostFn)(void*);
static HostFn g_hostfn[16];
static void* g_hostdata[16];
static int g_nhostfn;
static void run_host_functions(void) {
  for (int i = 0; i < g_nhostfn; i++) g_hostfn[i](g_hostdata[i]);
  g_nhostfn = 0;
}
CUresult cuLaunchHostFunc(void* s, HostFn fn, void* data) {
  CUresult r = need_ctx("cuLaunchHostFunc");
  if (r) return r;
  if (!fn || g_nhostfn == 16) return INVALID_VALUE;
  g_hostfn[g_nhostfn] = fn;
  g_hostdata[g_nhostfn++] = data;
  logf_("cuLaunchHostFunc stream=%s", s ? "user" : "0");
  return OK;
}
CUresult cuStreamSynchronize(void* s) {
  CUresult r = need_ctx("cuStreamSynchronize");
  if (!r) logf_("cuStreamSynchronize %s", s ? "user" : "0");
  run_host_functions();
  return r;
}

/* the PTX's ".entry name(" parameter list: count and byte sizes */
static void ptx_params(const char* ptx, Func* f) {
  char pat[160];
  snprintf(pat, sizeof pat, ".entry %s(", f->name);
  const char* at = strstr(ptx, pat);
  f->nparams = -1;
  if (!at) return;
  const char* end = strchr(at, ')');
  f->nparams = 0;
  for (const char* p = strstr(at, ".param"); p && end && p < end; p = strstr(p + 6, ".param")) {
    const char* t = p + 7;
    int bits = atoi(t + 2);
    f->sizes[f->nparams++] = bits ? bits / 8 : 8;
    if (f->nparams == 64) break;
  }
}

typedef struct {
  char* image;
  size_t size;
  int ptx;
  uint64_t barrier;
} Mod;

CUresult cuModuleLoadData(void** out, const void* data) {
  CUresult r = need_ctx("cuModuleLoadData");
  if (r) return r;
  const unsigned char* b = data;
  Mod* m = calloc(1, sizeof(Mod));
  if (!memcmp(b,
              "\x7f"
              "ELF",
              4) ||
      !memcmp(b, "\x50\xed\x55\xba", 4)) {
    m->ptx = 0;
    logf_("cuModuleLoadData binary");
  } else {
    const char* text = data;
    size_t n = strnlen(text, 1 << 26);
    if (n == 1 << 26 || !strstr(text, ".version")) {
      free(m);
      logf_("cuModuleLoadData: not NUL-terminated PTX");
      return INVALID_IMAGE;
    }
    m->ptx = 1;
    m->image = strdup(text);
    logf_("cuModuleLoadData ptx %zu", n);
  }
  *out = m;
  return OK;
}
CUresult cuModuleUnload(void* m) {
  logf_("cuModuleUnload");
  free(((Mod*)m)->image);
  free(m);
  return OK;
}
CUresult cuModuleGetFunction(void** out, void* mod, const char* name) {
  CUresult r = need_ctx("cuModuleGetFunction");
  if (r) return r;
  Mod* m = mod;
  Func* f = calloc(1, sizeof(Func));
  snprintf(f->name, sizeof f->name, "%s", name);
  f->nparams = -1;
  if (m->ptx) {
    ptx_params(m->image, f);
    if (f->nparams < 0) {
      free(f);
      logf_("cuModuleGetFunction %s: not found", name);
      return NOT_FOUND;
    }
  }
  *out = f;
  logf_("cuModuleGetFunction %s params=%d", name, f->nparams);
  return OK;
}
CUresult cuModuleGetGlobal_v2(uint64_t* ptr, size_t* size, void* mod, const char* name) {
  CUresult r = need_ctx("cuModuleGetGlobal");
  if (r) return r;
  Mod* m = mod;
  if (!m->barrier && cuMemAlloc_v2(&m->barrier, 4)) return OUT_OF_MEMORY;
  *ptr = m->barrier;
  *size = 4;
  logf_("cuModuleGetGlobal %s", name);
  return OK;
}
CUresult cuFuncSetAttribute(void* func, int attr, int value) {
  Func* f = func;
  if (attr == 8) f->max_smem = value;
  logf_("cuFuncSetAttribute %s %d=%d", f->name, attr, value);
  return OK;
}

static CUresult launch(const char* kind, void* func, unsigned gx, unsigned gy, unsigned gz,
                       unsigned bx, unsigned by, unsigned bz, unsigned smem, void* stream,
                       void** params) {
  CUresult r = need_ctx(kind);
  if (r) return r;
  Func* f = func;
  if ((unsigned long long)bx * by * bz > 1024 || !gx || !gy || !gz || !bx || !by || !bz) {
    logf_("%s %s: invalid grid/block", kind, f->name);
    return INVALID_VALUE;
  }
  if (smem > 49152 && (int)smem > f->max_smem) {
    logf_("%s %s: %u bytes of shared memory above the function's limit", kind, f->name, smem);
    return INVALID_VALUE;
  }
  char args[2048] = "";
  size_t at = 0;
  for (int i = 0; i < f->nparams && at < sizeof args - 64; ++i) {
    if (g_exact) {
      const unsigned char* b = params[i];
      at += (size_t)snprintf(args + at, sizeof args - at, " ");
      for (int k = 0; k < f->sizes[i]; ++k)
        at += (size_t)snprintf(args + at, sizeof args - at, "%02x", b[k]);
    } else if (f->sizes[i] == 4) {
      uint32_t v;
      memcpy(&v, params[i], 4);
      at += (size_t)snprintf(args + at, sizeof args - at, " u32:%u", v);
    } else {
      uint64_t v;
      memcpy(&v, params[i], 8);
      if (inside(v, 1)) {
        at += (size_t)snprintf(args + at, sizeof args - at, " dev");
      } else {
        at += (size_t)snprintf(args + at, sizeof args - at, " u64:%llu", (unsigned long long)v);
      }
    }
  }
  char where[32];
  snprintf(where, sizeof where, "%s", stream ? "user" : "0");
  if (g_exact && stream) snprintf(where, sizeof where, "%p", stream);
  logf_("%s %s grid=%u,%u,%u block=%u,%u,%u smem=%u stream=%s args=%s", kind, f->name, gx, gy, gz,
        bx, by, bz, smem, where, args);
  return OK;
}
CUresult cuLaunchKernel(void* func, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned smem, void* stream, void** params, void** extra) {
  if (extra) return INVALID_VALUE;
  return launch("cuLaunchKernel", func, gx, gy, gz, bx, by, bz, smem, stream, params);
}
CUresult cuLaunchCooperativeKernel(void* func, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                   unsigned by, unsigned bz, unsigned smem, void* stream,
                                   void** params) {
  return launch("cuLaunchCooperativeKernel", func, gx, gy, gz, bx, by, bz, smem, stream, params);
}

CUresult cuEventCreate(void** e, unsigned flags) {
  *e = malloc(1);
  return flags ? INVALID_VALUE : OK;
}
CUresult cuEventRecord(void* e, void* s) {
  logf_("cuEventRecord stream=%s", s ? "user" : "0");
  return e ? OK : INVALID_HANDLE;
}
CUresult cuEventSynchronize(void* e) {
  run_host_functions();
  return e ? OK : INVALID_HANDLE;
}
CUresult cuEventElapsedTime(float* ms, void* a, void* b) {
  *ms = 0.25f; /* every timed kernel "takes" 250 us: a value wall time never gives */
  logf_("cuEventElapsedTime");
  return a && b ? OK : INVALID_HANDLE;
}
CUresult cuEventDestroy_v2(void* e) {
  free(e);
  return OK;
}
CUresult cuGetErrorName(CUresult code, const char** out) {
  switch (code) {
    case INVALID_VALUE: *out = "CUDA_ERROR_INVALID_VALUE"; break;
    case OUT_OF_MEMORY: *out = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case INVALID_IMAGE: *out = "CUDA_ERROR_INVALID_IMAGE"; break;
    case INVALID_CONTEXT: *out = "CUDA_ERROR_INVALID_CONTEXT"; break;
    case NOT_FOUND: *out = "CUDA_ERROR_NOT_FOUND"; break;
    case INVALID_DEVICE: *out = "CUDA_ERROR_INVALID_DEVICE"; break;
    default: *out = NULL; return INVALID_VALUE;
  }
  return OK;
}
CUresult cuGetErrorString(CUresult code, const char** out) {
  *out = code == INVALID_VALUE ? "invalid argument" : NULL;
  return *out ? OK : INVALID_VALUE;
}
