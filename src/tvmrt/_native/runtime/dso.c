/*
 * CPU kernel libraries: a TVM shared library opened with dlopen (legacy `.so`, factory
 * `.so` with its `__tvm_dev_mblob`), and the system library (`runtime.SystemLib`): the
 * symbols that system-lib code registered with TVMBackendRegisterSystemLibSymbol.
 *
 * As TVM's loader (dso_library.cc, library_module.cc): fill the `__TVM*` function-pointer
 * slots the library has, point `__tvm_module_ctx` at the module, rebuild the module tree
 * from the blob. Libraries are never closed (kernels or registrations may outlive the
 * module), as in TVM.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr1 */
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* memfd_create by its number: the manylinux_2_17 wheel's glibc has no wrapper for it */
#ifndef SYS_memfd_create
#if defined(__x86_64__)
#define SYS_memfd_create 319
#elif defined(__aarch64__)
#define SYS_memfd_create 279
#elif defined(__arm__)
#define SYS_memfd_create 385
#endif
#endif

#include "rt.h"

typedef void* (*symbol_fn)(void* ctx, const char* name);

typedef struct {
  void* handle;  /* dlopen handle, or NULL for the system library */
  char* prefix;  /* system library: the symbol prefix */
  int plain_ffi; /* TVM 0.21's tvm-ffi library: kernels under plain names */
} dso_impl;

static void* dso_symbol(void* ctx, const char* name) { return dlsym(ctx, name); }

static void* syslib_symbol(void* ctx, const char* name) {
  const char* prefix = (const char*)ctx;
  char buf[RT_MAX_NAME];
  size_t np = strlen(prefix), nn = strlen(name);
  if (np == 0) return tvmrt_system_lib_lookup(name);
  if (np + nn + 1 > sizeof(buf)) return NULL;
  memcpy(buf, prefix, np);
  memcpy(buf + np, name, nn + 1);
  return tvmrt_system_lib_lookup(buf);
}

/* Write our services into the library's `__<name>` slots (any subset may exist). */
static void fill_slots(symbol_fn sym, void* ctx, tvmrt_module* mod) {
  static const struct {
    const char* slot;
    void* fn;
  } slots[] = {
      {"__TVMFuncCall", (void*)TVMFuncCall},
      {"__TVMAPISetLastError", (void*)TVMAPISetLastError},
      {"__TVMBackendGetFuncFromEnv", (void*)TVMBackendGetFuncFromEnv},
      {"__TVMBackendAllocWorkspace", (void*)TVMBackendAllocWorkspace},
      {"__TVMBackendFreeWorkspace", (void*)TVMBackendFreeWorkspace},
      {"__TVMBackendParallelLaunch", (void*)TVMBackendParallelLaunch},
      {"__TVMBackendParallelBarrier", (void*)TVMBackendParallelBarrier},
  };
  size_t i;
  void** ctx_slot;
  for (i = 0; i < sizeof(slots) / sizeof(slots[0]); ++i) {
    void** p = (void**)sym(ctx, slots[i].slot);
    if (p != NULL) *p = slots[i].fn;
  }
  ctx_slot = (void**)sym(ctx, "__tvm_module_ctx");
  if (ctx_slot != NULL) *ctx_slot = mod;
}

/* A kernel exported as __tvm_ffi_<name> (TVM >= 0.22), tvm-ffi's calling convention. */
static tvmrt_func* ffi_lookup(tvmrt_module* mod, void* handle, const char* name) {
  char buf[RT_MAX_NAME + 16];
  void* f;
  if (strlen(name) >= RT_MAX_NAME) return NULL;
  snprintf(buf, sizeof(buf), "__tvm_ffi_%s", name);
  f = dlsym(handle, buf);
  return f != NULL ? tvmrt_ffi_func(f, &mod->hdr, 0) : NULL;
}

static tvmrt_func* dso_lookup(tvmrt_module* mod, const char* name) {
  dso_impl* impl = (dso_impl*)mod->impl;
  symbol_fn sym = impl->handle != NULL ? dso_symbol : syslib_symbol;
  void* ctx = impl->handle != NULL ? impl->handle : (void*)impl->prefix;
  void* f;
  if (strcmp(name, "__tvm_main__") == 0) {
    const char* entry = (const char*)sym(ctx, "__tvm_main__"); /* a char array: the name */
    if (entry == NULL && impl->handle != NULL) return ffi_lookup(mod, impl->handle, "main");
    if (entry == NULL || memchr(entry, '\0', RT_MAX_NAME) == NULL) return NULL;
    f = sym(ctx, entry);
  } else {
    f = sym(ctx, name);
  }
  if (f == NULL && impl->handle != NULL &&
      (strncmp(name, "__", 2) != 0 ||
       strncmp(name, "__vmtir__", 9) == 0)) { /* a compiled Relax function */
    return ffi_lookup(mod, impl->handle, name);
  }
  if (f == NULL) return NULL;
  if (impl->plain_ffi) return tvmrt_ffi_func(f, &mod->hdr, 1);
  return tvmrt_func_backend((TVMBackendPackedCFunc)f, &mod->hdr);
}

static void dso_finalize(tvmrt_module* mod) {
  dso_impl* impl = (dso_impl*)mod->impl;
  void** ctx_slot =
      (void**)(impl->handle != NULL ? dso_symbol(impl->handle, "__tvm_module_ctx")
                                    : syslib_symbol(impl->prefix, "__tvm_module_ctx"));
  /* the library outlives this module: its kernels must not look functions up through a
     freed module (a NULL context is an error, see TVMBackendGetFuncFromEnv) */
  if (ctx_slot != NULL && *ctx_slot == mod) *ctx_slot = NULL;
  if (impl->handle != NULL) tvmrt_ffi_set_context(impl->handle, NULL, mod);
  free(impl->prefix);
  free(impl); /* the library stays open (see the file comment) */
}

static tvmrt_module* new_library(void* handle, const char* prefix) {
  dso_impl* impl = (dso_impl*)calloc(1, sizeof(dso_impl));
  tvmrt_module* mod;
  if (impl == NULL || (prefix != NULL && (impl->prefix = strdup(prefix)) == NULL)) {
    free(impl);
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate a library module");
    return NULL;
  }
  impl->handle = handle;
  mod = tvmrt_module_new("library", impl);
  if (mod == NULL) {
    free(impl->prefix);
    free(impl);
    return NULL;
  }
  mod->lookup = dso_lookup;
  mod->finalize = dso_finalize;
  return mod;
}

/* The root of the library's module tree (a new reference; `lib`'s reference is taken). */
static tvmrt_module* with_blob(tvmrt_module* lib, const uint8_t* blob, size_t limit,
                               int container) {
  tvmrt_module* root;
  if (blob == NULL) return lib;
  root = tvmrt_process_blob(blob, limit, lib, container);
  tvmrt_release(&lib->hdr);
  return root;
}

/* What the loader can check before dlopen: an ELF shared library for this machine (as the
   Python runtime's loaders/headers.py, in its words). */
static int check_header(const char* path) {
  static const struct {
    int machine;
    const char* text;
  } machines[] = {{3, "x86 (32-bit)"},
                  {40, "arm (ARM 32-bit)"},
                  {62, "x86-64"},
                  {183, "aarch64 (ARM 64-bit)"},
                  {243, "riscv (RISC-V)"},
                  {8, "mips (MIPS)"},
                  {21, "ppc64 (PowerPC 64-bit)"},
                  {22, "s390 (IBM Z)"}};
#if defined(__x86_64__)
  const int host = 62;
#elif defined(__aarch64__)
  const int host = 183;
#else
  const int host = -1;
#endif
  unsigned char h[20];
  size_t n, i;
  int machine;
  const char *built = NULL, *here = NULL;
  FILE* f = fopen(path, "rb");
  if (f == NULL) return tvmrt_fail("ModuleLoadError", "cannot load '%s': cannot open it", path);
  n = fread(h, 1, sizeof(h), f);
  fclose(f);
  if (n >= 2 && h[0] == 'M' && h[1] == 'Z') {
    return tvmrt_fail("ModuleLoadError",
                      "cannot load '%s': it is a Windows DLL, this machine runs "
                      "Linux; export the model for Linux",
                      path);
  }
  if (n >= 4 && ((h[0] == 0xcf && h[1] == 0xfa && h[2] == 0xed && h[3] == 0xfe) ||
                 (h[0] == 0xca && h[1] == 0xfe && h[2] == 0xba && h[3] == 0xbe))) {
    return tvmrt_fail("ModuleLoadError",
                      "cannot load '%s': it is a macOS Mach-O library, this "
                      "machine runs Linux; export the model for Linux",
                      path);
  }
  if (n < sizeof(h) || memcmp(h, "\177ELF", 4) != 0) {
    return tvmrt_fail("ModuleLoadError",
                      "cannot load '%s': not a shared library (it is not an "
                      "ELF file)",
                      path);
  }
  machine = h[18] | h[19] << 8;
  if (host < 0 || machine == host) return 0;
  for (i = 0; i < sizeof(machines) / sizeof(machines[0]); ++i) {
    if (machines[i].machine == machine) built = machines[i].text;
    if (machines[i].machine == host) here = machines[i].text;
  }
  if (built == NULL) {
    return tvmrt_fail("ModuleLoadError",
                      "cannot load '%s': built for ELF machine %d, this machine "
                      "is %s",
                      path, machine, here);
  }
  return tvmrt_fail("ModuleLoadError", "cannot load '%s': built for %s, this machine is %s", path,
                    built, here);
}

/* the bytes a data symbol holds (its ELF size), or SIZE_MAX when the size is unknown */
static size_t symbol_limit(const void* p) {
  Dl_info info;
  const ElfW(Sym)* sym = NULL;
  if (dladdr1(p, &info, (void**)&sym, RTLD_DL_SYMENT) != 0 && sym != NULL && sym->st_size != 0) {
    return (size_t)sym->st_size; /* a blob cannot claim more than its symbol holds */
  }
  return SIZE_MAX;
}

static const char kFdPaths[] = "/proc/self/fd/";

tvmrt_module* tvmrt_load_dso(const char* path) {
  int kept = -1; /* a memfd path's duplicate, kept open with the library */
  char* local = NULL;
  void* handle;
  tvmrt_module* lib;
  const uint8_t *blob, *ffi_bin;
  if (access(path, R_OK) != 0) {
    tvmrt_fail("ModuleFileNotFoundError", "module file '%s' does not exist", path);
    return NULL;
  }
  if (tvmrt_check_regular(path, "ModuleLoadError", "module file", RT_MAX_LIBRARY_BYTES) != 0 ||
      check_header(path) != 0) {
    return NULL;
  }
  if (strncmp(path, kFdPaths, sizeof(kFdPaths) - 1) == 0) {
    /* a memfd's /proc/self/fd/N (a model from memory): dlopen knows a library by its name, so
       once N is closed and reused, dlopen of the next /proc/self/fd/N would hand back this
       library. Load it through a duplicate of N that stays open as long as the library
       (for ever: libraries are never closed), whose name no other file can take. */
    kept = fcntl(atoi(path + sizeof(kFdPaths) - 1), F_DUPFD_CLOEXEC, 0);
    if (kept < 0) {
      tvmrt_fail("ModuleLoadError", "cannot keep the descriptor of %s open (%s)", path,
                 strerror(errno));
      return NULL;
    }
    local = (char*)malloc(sizeof(kFdPaths) + 12);
    if (local == NULL) {
      close(kept);
      tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate a path");
      return NULL;
    }
    snprintf(local, sizeof(kFdPaths) + 12, "%s%d", kFdPaths, kept);
  } else if (strchr(path, '/') == NULL) { /* dlopen would search the library path for a bare
                                              name */
    size_t n = strlen(path);
    local = (char*)malloc(n + 3);
    if (local == NULL) {
      tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate a path");
      return NULL;
    }
    memcpy(local, "./", 2);
    memcpy(local + 2, path, n + 1);
  }
  handle = dlopen(local != NULL ? local : path, RTLD_LAZY | RTLD_LOCAL);
  free(local);
  if (handle == NULL) {
    const char* why = dlerror();
    if (kept >= 0) close(kept);
    tvmrt_fail("ModuleLoadError", "Failed to load dynamic shared library %s %s", path,
               why != NULL ? why : "");
    return NULL;
  }
  if (tvmrt_ffi_link(handle, path) != 0) return NULL;
  lib = new_library(handle, NULL);
  if (lib == NULL) return NULL;
  tvmrt_ffi_is_ffi_library(handle, &((dso_impl*)lib->impl)->plain_ffi);
  fill_slots(dso_symbol, handle, lib);
  tvmrt_ffi_set_context(handle, lib, NULL);
  ffi_bin = (const uint8_t*)dlsym(handle, "__tvm_ffi__library_bin");
  if (ffi_bin != NULL) { /* a single-file tvm-ffi build (TVM >= 0.22) */
    tvmrt_module* root = tvmrt_ffi_library_bin(ffi_bin, symbol_limit(ffi_bin), lib);
    tvmrt_release(&lib->hdr);
    return root;
  }
  blob = (const uint8_t*)dlsym(handle, "__tvm_ffi_library_bin"); /* TVM 0.21's, the old layout */
  if (blob != NULL) return with_blob(lib, blob, symbol_limit(blob), RT_BLOB_FFI_021);
  blob = (const uint8_t*)dlsym(handle, "__tvm_dev_mblob");
  return with_blob(lib, blob, blob != NULL ? symbol_limit(blob) : SIZE_MAX, RT_BLOB_MBLOB);
}

tvmrt_module* tvmrt_load_dso_memory(const void* data, size_t size) {
#ifdef SYS_memfd_create
  char path[64];
  size_t done = 0;
  tvmrt_module* lib;
  int fd;
  if (size > RT_MAX_LIBRARY_BYTES) {
    tvmrt_fail("ModuleLoadError",
               "TVMModLoadFromMemory: the library is %zu bytes, over the limit of %llu bytes "
               "for a library",
               size, (unsigned long long)RT_MAX_LIBRARY_BYTES);
    return NULL;
  }
  fd = (int)syscall(SYS_memfd_create, "tvmrt-model", 1u /* MFD_CLOEXEC */);
  if (fd < 0) {
    tvmrt_fail("ModuleLoadError", "TVMModLoadFromMemory: memfd_create failed (%s)",
               strerror(errno));
    return NULL;
  }
  while (done < size) { /* anonymous memory: nothing of the model reaches a disk */
    ssize_t n = write(fd, (const char*)data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      tvmrt_fail("ModuleLoadError", "TVMModLoadFromMemory: cannot copy the library (%s)",
                 n < 0 ? strerror(errno) : "short write");
      close(fd);
      return NULL;
    }
    done += (size_t)n;
  }
  snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
  lib = tvmrt_load_dso(path); /* checked and loaded as the same file would be, through a */
  close(fd);                  /* duplicate of fd that stays open with the library */
  return lib;
#else
  (void)data;
  (void)size;
  tvmrt_fail("ModuleLoadError",
             "TVMModLoadFromMemory needs memfd_create (Linux); load the library from a file");
  return NULL;
#endif
}

/* ---------------------------------------------------------------------------------- */
/* the system library                                                                  */

static pthread_mutex_t g_syslib_mu = PTHREAD_MUTEX_INITIALIZER;
static tvmrt_module* g_syslib; /* the root for prefix "", rebuilt after registrations */
static int64_t g_syslib_gen = -1;

static tvmrt_module* build_system_lib(const char* prefix) {
  tvmrt_module* lib = new_library(NULL, prefix);
  void* ctx;
  if (lib == NULL) return NULL;
  ctx = ((dso_impl*)lib->impl)->prefix;
  fill_slots(syslib_symbol, ctx, lib);
  return with_blob(lib, (const uint8_t*)syslib_symbol(ctx, "__tvm_dev_mblob"), SIZE_MAX,
                   RT_BLOB_MBLOB);
}

tvmrt_module* tvmrt_system_lib(const char* prefix) {
  tvmrt_module* m;
  int64_t gen;
  if (prefix != NULL && *prefix != '\0') return build_system_lib(prefix);
  pthread_mutex_lock(&g_syslib_mu);
  gen = tvmrt_system_lib_generation();
  if (g_syslib == NULL || gen != g_syslib_gen) {
    m = build_system_lib("");
    if (m == NULL) {
      pthread_mutex_unlock(&g_syslib_mu);
      return NULL;
    }
    if (g_syslib != NULL) tvmrt_release(&g_syslib->hdr);
    g_syslib = m;
    g_syslib_gen = gen;
  }
  m = g_syslib;
  tvmrt_retain(&m->hdr);
  pthread_mutex_unlock(&g_syslib_mu);
  return m;
}
