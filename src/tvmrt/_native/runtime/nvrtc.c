/*
 * CUDA C source to PTX with NVRTC, for a `cuda` module whose image is source (what PyPI's
 * TVM 0.27 exports: it has no nvcc to call). libnvrtc is dlopened at first need
 * (TVMRT_LIBNVRTC names it, else libnvrtc.so, .so.13, .so.12 on the library path; the
 * `nvrtc` extra installs NVIDIA's and tvmrt's Python points TVMRT_LIBNVRTC at it). The
 * headers the source includes under NVRTC (libcu++'s <cuda/std/...>) come from
 * TVMRT_CUDA_INCLUDE (folders, colon-separated), else the CUDA toolkit's.
 *
 * A compile is cached on disk by the SHA-256 of everything that changes its result (the
 * source, the architecture, the options, NVRTC's version): $TVMRT_CACHE_DIR/nvrtc, else
 * $XDG_CACHE_HOME/tvmrt/nvrtc, else ~/.cache/tvmrt/nvrtc. An entry is "<key>\n<PTX>"; one
 * whose first line is not its key is compiled again.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt.h"

#define MAX_INCLUDES 8
#define MAX_PTX_BYTES ((size_t)1 << 30)

typedef struct {
  int (*create)(void** prog, const char* src, const char* name, int n, const char* const* h,
                const char* const* names);
  int (*compile)(void* prog, int n, const char* const* options);
  int (*ptx_size)(void* prog, size_t* size);
  int (*ptx)(void* prog, char* out);
  int (*log_size)(void* prog, size_t* size);
  int (*log)(void* prog, char* out);
  int (*destroy)(void** prog);
  int (*version)(int* major, int* minor);
  const char* (*error_string)(int code);
} nvrtc_api;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static nvrtc_api g_api;
static int g_loaded; /* 1 loaded, -1 failed (g_why says why) */
static char g_why[512];

static const nvrtc_api* load_nvrtc(void) {
  static const char* const names[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"};
  void* lib = NULL;
  const char* env;
  size_t i;
  pthread_mutex_lock(&g_mu);
  if (g_loaded != 0) {
    pthread_mutex_unlock(&g_mu);
    return g_loaded > 0 ? &g_api : NULL;
  }
  env = getenv("TVMRT_LIBNVRTC");
  if (env != NULL && *env) {
    lib = dlopen(env, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) snprintf(g_why, sizeof(g_why), "TVMRT_LIBNVRTC=%s: %s", env, dlerror());
  } else {
    for (i = 0; i < sizeof(names) / sizeof(names[0]) && lib == NULL; ++i)
      lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) snprintf(g_why, sizeof(g_why), "libnvrtc.so is not on the library path");
  }
  if (lib != NULL) {
    *(void**)&g_api.create = dlsym(lib, "nvrtcCreateProgram");
    *(void**)&g_api.compile = dlsym(lib, "nvrtcCompileProgram");
    *(void**)&g_api.ptx_size = dlsym(lib, "nvrtcGetPTXSize");
    *(void**)&g_api.ptx = dlsym(lib, "nvrtcGetPTX");
    *(void**)&g_api.log_size = dlsym(lib, "nvrtcGetProgramLogSize");
    *(void**)&g_api.log = dlsym(lib, "nvrtcGetProgramLog");
    *(void**)&g_api.destroy = dlsym(lib, "nvrtcDestroyProgram");
    *(void**)&g_api.version = dlsym(lib, "nvrtcVersion");
    *(void**)&g_api.error_string = dlsym(lib, "nvrtcGetErrorString");
    if (!g_api.create || !g_api.compile || !g_api.ptx_size || !g_api.ptx || !g_api.log_size ||
        !g_api.log || !g_api.destroy || !g_api.version || !g_api.error_string) {
      snprintf(g_why, sizeof(g_why), "the library found lacks NVRTC's functions");
      lib = NULL;
    }
  }
  g_loaded = lib != NULL ? 1 : -1;
  pthread_mutex_unlock(&g_mu);
  return g_loaded > 0 ? &g_api : NULL;
}

int tvmrt_nvrtc_available(const char* what) {
  if (load_nvrtc() != NULL) return 0;
  return tvmrt_fail("ModuleLoadError",
                    "%s: the CUDA image is CUDA C source; compiling it needs NVRTC, which was not "
                    "found (%s). Install it with pip install 'tvmrt[nvrtc]', or set "
                    "TVMRT_LIBNVRTC to a libnvrtc.so",
                    what, g_why);
}

/* ---------------------------------------------------------------------------------- */
/* SHA-256 (FIPS 180-4), for the cache key                                             */

typedef struct {
  uint32_t h[8];
  uint64_t bytes;
  uint8_t block[64];
  size_t used;
} sha256;

static const uint32_t k_round[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha_block(sha256* s, const uint8_t* p) {
  uint32_t w[64], a, b, c, d, e, f, g, h;
  int i;
  for (i = 0; i < 16; ++i)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 |
           p[4 * i + 3];
  for (i = 16; i < 64; ++i) {
    uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  a = s->h[0], b = s->h[1], c = s->h[2], d = s->h[3];
  e = s->h[4], f = s->h[5], g = s->h[6], h = s->h[7];
  for (i = 0; i < 64; ++i) {
    uint32_t t1 =
        h + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + k_round[i] + w[i];
    uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    h = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
  }
  s->h[0] += a, s->h[1] += b, s->h[2] += c, s->h[3] += d;
  s->h[4] += e, s->h[5] += f, s->h[6] += g, s->h[7] += h;
}

static void sha_init(sha256* s) {
  static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  memcpy(s->h, h0, sizeof(h0));
  s->bytes = 0;
  s->used = 0;
}

static void sha_update(sha256* s, const void* data, size_t n) {
  const uint8_t* p = (const uint8_t*)data;
  s->bytes += n;
  while (n > 0) {
    size_t take = 64 - s->used < n ? 64 - s->used : n;
    memcpy(s->block + s->used, p, take);
    s->used += take, p += take, n -= take;
    if (s->used == 64) {
      sha_block(s, s->block);
      s->used = 0;
    }
  }
}

static void sha_hex(sha256* s, char out[65]) {
  uint64_t bits = s->bytes * 8;
  uint8_t pad = 0x80, zero = 0, len[8];
  int i;
  sha_update(s, &pad, 1);
  while (s->used != 56) sha_update(s, &zero, 1);
  for (i = 0; i < 8; ++i) len[i] = (uint8_t)(bits >> (56 - 8 * i));
  sha_update(s, len, 8);
  for (i = 0; i < 8; ++i) snprintf(out + 8 * i, 9, "%08x", s->h[i]);
}

/* ---------------------------------------------------------------------------------- */
/* the cache                                                                           */

static int cache_dir(char* out, size_t n) {
  const char* base = getenv("TVMRT_CACHE_DIR");
  const char* xdg = getenv("XDG_CACHE_HOME");
  const char* home = getenv("HOME");
  if (base != NULL && *base) snprintf(out, n, "%s/nvrtc", base);
  else if (xdg != NULL && *xdg) snprintf(out, n, "%s/tvmrt/nvrtc", xdg);
  else if (home != NULL && *home) snprintf(out, n, "%s/.cache/tvmrt/nvrtc", home);
  else return -1;
  return 0;
}

static int make_dirs(char* path) {
  char* p;
  for (p = path + 1; *p; ++p) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(path, 0700) != 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  return mkdir(path, 0700) != 0 && errno != EEXIST ? -1 : 0;
}

/* the cached PTX of key, or NULL (no entry, or one that is no regular file of at most its
   bound: compiled again) */
static char* cache_read(const char* file, const char* key) {
  char* data = NULL;
  size_t size = 0;
  if (tvmrt_read_regular(file, "ModuleLoadError", "the NVRTC cache entry", MAX_PTX_BYTES + 65, NULL,
                         &data, &size) != 0) {
    tvmrt_clear_last_error();
    return NULL;
  }
  if (size < 65 || memcmp(data, key, 64) != 0 || data[64] != '\n') {
    free(data);
    return NULL;
  }
  memmove(data, data + 65, size - 65 + 1); /* with the reader's NUL */
  return data;
}

static void cache_write(const char* dir, const char* file, const char* key, const char* ptx) {
  char tmp[4240];
  FILE* f;
  char copy[4096];
  snprintf(copy, sizeof(copy), "%s", dir);
  if (make_dirs(copy) != 0) return;
  snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", file, (long)getpid());
  f = fopen(tmp, "wb");
  if (f == NULL) return;
  if (fwrite(key, 1, 64, f) == 64 && fputc('\n', f) != EOF &&
      fwrite(ptx, 1, strlen(ptx), f) == strlen(ptx) && fclose(f) == 0) {
    rename(tmp, file); /* whole or not at all */
  } else {
    remove(tmp);
  }
}

/* ---------------------------------------------------------------------------------- */
/* compile                                                                             */

char* tvmrt_nvrtc_compile(const char* source, int major, int minor, const char* what) {
  const nvrtc_api* api = load_nvrtc();
  char arch[64], key[65], dir[4096], file[4200], version[32];
  char include_opts[MAX_INCLUDES][4200];
  const char* options[MAX_INCLUDES + 4];
  int nopt = 0, i, rc, vmaj = 0, vmin = 0;
  void* prog = NULL;
  char* ptx = NULL;
  size_t size = 0;
  sha256 sha;
  const char* env = getenv("TVMRT_CUDA_INCLUDE");
  char includes[4096];
  if (api == NULL) {
    tvmrt_nvrtc_available(what);
    return NULL;
  }
  snprintf(arch, sizeof(arch), "--gpu-architecture=compute_%d%d", major, minor);
  options[nopt++] = arch;
  options[nopt++] = "-default-device";
  options[nopt++] = "--std=c++17";
  if (env != NULL && *env) snprintf(includes, sizeof(includes), "%s", env);
  else snprintf(includes, sizeof(includes), "/usr/local/cuda/include/cccl:/usr/local/cuda/include");
  {
    char* save = NULL;
    char* dirp = strtok_r(includes, ":", &save);
    for (i = 0; dirp != NULL && i < MAX_INCLUDES; dirp = strtok_r(NULL, ":", &save)) {
      if (access(dirp, R_OK) != 0) continue;
      snprintf(include_opts[i], sizeof(include_opts[i]), "--include-path=%s", dirp);
      options[nopt++] = include_opts[i++];
    }
  }
  api->version(&vmaj, &vmin);
  snprintf(version, sizeof(version), "nvrtc %d.%d", vmaj, vmin);
  sha_init(&sha);
  sha_update(&sha, version, strlen(version) + 1);
  for (i = 0; i < nopt; ++i) sha_update(&sha, options[i], strlen(options[i]) + 1);
  sha_update(&sha, source, strlen(source));
  sha_hex(&sha, key);
  if (cache_dir(dir, sizeof(dir)) == 0) {
    snprintf(file, sizeof(file), "%s/%s.ptx", dir, key);
    ptx = cache_read(file, key);
    if (ptx != NULL) return ptx;
  } else {
    dir[0] = '\0';
  }
  if ((rc = api->create(&prog, source, "tvmrt_cuda_module.cu", 0, NULL, NULL)) != 0) {
    tvmrt_fail("ModuleLoadError", "%s: nvrtcCreateProgram failed: %s", what, api->error_string(rc));
    return NULL;
  }
  rc = api->compile(prog, nopt, options);
  if (rc != 0) {
    size_t n = 0;
    char* log = NULL;
    if (api->log_size(prog, &n) == 0 && n > 0 && n < ((size_t)1 << 24) &&
        (log = (char*)malloc(n + 1)) != NULL && api->log(prog, log) == 0)
      log[n] = '\0';
    tvmrt_fail("ModuleLoadError",
               "%s: NVRTC could not compile the CUDA source for compute_%d%d: "
               "%s%s%.2000s",
               what, major, minor, api->error_string(rc), log != NULL ? "\n" : "",
               log != NULL ? log : "");
    free(log);
    api->destroy(&prog);
    return NULL;
  }
  if (api->ptx_size(prog, &size) != 0 || size == 0 || size > MAX_PTX_BYTES ||
      (ptx = (char*)malloc(size + 1)) == NULL || api->ptx(prog, ptx) != 0) {
    free(ptx);
    api->destroy(&prog);
    tvmrt_fail("ModuleLoadError", "%s: NVRTC gave no PTX", what);
    return NULL;
  }
  ptx[size] = '\0';
  api->destroy(&prog);
  if (dir[0]) cache_write(dir, file, key, ptx);
  return ptx;
}
