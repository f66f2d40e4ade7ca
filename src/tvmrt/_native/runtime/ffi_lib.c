/*
 * tvm-ffi kernel libraries (TVM >= 0.21) in the C runtime: linking a dlopen-ed library to
 * the runtime's services, and calling its kernels (tvm-ffi's TVMFFISafeCallType,
 * `int f(void* self, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result)`).
 *
 * As the Python runtime's loader (runtime/loaders/ffi.py), without libtvm_ffi and without
 * exporting tvm-ffi's names (services.c says why): the library's imports of the services
 * below are written into its GOT (the entries its relocations name), its `__<name>` slots
 * are filled, and an import of a tvm-ffi function the runtime does not provide refuses the
 * library by name before any of its code runs (it would end the process at its first call).
 * Kernels get tensors as `DLTensor*` (type index 7) with DLPack dtype codes (bool is
 * (6, 8, 1), not TVM 0.19's (1, 1, 1)) and the byte offset folded into `data`.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dlinfo */
#endif
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "relax.h"
#include "rt.h"

/* tvm-ffi's services by their names, and the runtime's implementations (services.c,
   func_env.c); kernel_services.py's FFI_FUNCTIONS */
static const struct {
  const char* name;
  void* fn;
} k_services[] = {
    {"TVMBackendAllocWorkspace", (void*)TVMBackendAllocWorkspace},
    {"TVMBackendFreeWorkspace", (void*)TVMBackendFreeWorkspace},
    {"TVMBackendParallelLaunch", (void*)TVMBackendParallelLaunch},
    {"TVMBackendParallelBarrier", (void*)TVMBackendParallelBarrier},
    {"TVMFFIErrorSetRaisedFromCStr", (void*)tvmrt_ffi_error_set_raised_from_cstr},
    {"TVMFFIErrorSetRaisedFromCStrParts", (void*)tvmrt_ffi_error_set_raised_from_cstr_parts},
    {"TVMFFIHandleInitOnce", (void*)tvmrt_ffi_handle_init_once},
    {"TVMBackendGetFuncFromEnv", (void*)tvmrt_ffi_get_func_from_env},
    {"TVMFFIEnvModLookupFromImports", (void*)tvmrt_ffi_env_mod_lookup_from_imports},
    {"TVMFFIFunctionCall", (void*)tvmrt_ffi_function_call},
    /* compiled Relax functions (relax_tir.c): the tvm-ffi any-list */
    {"TVMBackendAnyListSetPackedArg", (void*)tvmrt_rx_anylist_set_packed_arg},
    {"TVMBackendAnyListResetItem", (void*)tvmrt_rx_anylist_reset_item},
    {"TVMBackendAnyListMoveFromPackedReturn", (void*)tvmrt_rx_anylist_move_from_return},
};
#define NUM_SERVICES (sizeof(k_services) / sizeof(k_services[0]))

int tvmrt_ffi_is_ffi_library(void* handle, int* plain_names) {
  static const char* const markers[] = {"__tvm_ffi__library_ctx", "__tvm_ffi__library_bin",
                                        "__tvm_ffi_main"};
  size_t i;
  /* TVM 0.21 exported kernels under their plain names, with these markers */
  *plain_names = dlsym(handle, "__tvm_ffi_library_ctx") != NULL ||
                 dlsym(handle, "__tvm_ffi_library_bin") != NULL;
  if (*plain_names) return 1;
  for (i = 0; i < sizeof(markers) / sizeof(markers[0]); ++i) {
    if (dlsym(handle, markers[i]) != NULL) return 1;
  }
  return 0;
}

/* ---------------------------------------------------------------------------------- */
/* linking: the GOT entries of the library's imports, then its slots                   */

static int g_linking_ffi; /* the library being linked is a tvm-ffi one (under g_link_mu) */

#if defined(__x86_64__) || defined(__aarch64__)
#if defined(__x86_64__)
#define R_SLOT R_X86_64_JUMP_SLOT
#define R_GLOB R_X86_64_GLOB_DAT
#else
#define R_SLOT R_AARCH64_JUMP_SLOT
#define R_GLOB R_AARCH64_GLOB_DAT
#endif

/* What a legacy library (TVM <= 0.20) imports by name from TVM's runtime: its C API and
   backend services (C-target kernels, compiled Relax code's any-lists, whose ABI differs
   from tvm-ffi's). They are written into its GOT too, so that a TVM loaded into the process
   first (RTLD_GLOBAL), which exports the same names, does not answer them. */
static const struct {
  const char* name;
  void* fn;
} k_legacy[] = {
    {"TVMBackendAnyListSetPackedArg", (void*)TVMBackendAnyListSetPackedArg},
    {"TVMBackendAnyListResetItem", (void*)TVMBackendAnyListResetItem},
    {"TVMBackendAnyListMoveFromPackedReturn", (void*)TVMBackendAnyListMoveFromPackedReturn},
    {"TVMBackendAllocWorkspace", (void*)TVMBackendAllocWorkspace},
    {"TVMBackendFreeWorkspace", (void*)TVMBackendFreeWorkspace},
    {"TVMBackendParallelLaunch", (void*)TVMBackendParallelLaunch},
    {"TVMBackendParallelBarrier", (void*)TVMBackendParallelBarrier},
    {"TVMBackendGetFuncFromEnv", (void*)TVMBackendGetFuncFromEnv},
    {"TVMFuncCall", (void*)TVMFuncCall},
    {"TVMAPISetLastError", (void*)TVMAPISetLastError},
};

/* The service of that name for this library: a library without tvm-ffi's markers (a legacy
   one, or a kernel library that has none) takes the legacy entries first; the any-list
   functions are the only names whose ABI differs. */

static void* service(const char* name) {
  size_t i;
  if (!g_linking_ffi) {
    for (i = 0; i < sizeof(k_legacy) / sizeof(k_legacy[0]); ++i) {
      if (strcmp(k_legacy[i].name, name) == 0) return k_legacy[i].fn;
    }
    if (strncmp(name, "TVMBackendAnyList", 17) == 0) return NULL;
  }
  for (i = 0; i < NUM_SERVICES; ++i) {
    if (strcmp(k_services[i].name, name) == 0) return k_services[i].fn;
  }
  return NULL;
}

typedef struct {
  ElfW(Addr) base, relro_lo, relro_hi;
  const ElfW(Sym) * symtab;
  const char* strtab;
  size_t strsz;
  const char* path;
} dyn_info;

static int find_relro(struct dl_phdr_info* info, size_t size, void* data) {
  dyn_info* d = (dyn_info*)data;
  int i;
  (void)size;
  if (info->dlpi_addr != d->base) return 0;
  for (i = 0; i < info->dlpi_phnum; ++i) {
    if (info->dlpi_phdr[i].p_type == PT_GNU_RELRO) {
      d->relro_lo = d->base + info->dlpi_phdr[i].p_vaddr;
      d->relro_hi = d->relro_lo + info->dlpi_phdr[i].p_memsz;
    }
  }
  return 1;
}

static int write_got(const dyn_info* d, ElfW(Addr) where, void* value) {
  if (where >= d->relro_lo && where < d->relro_hi) { /* read-only after relocation */
    long page = sysconf(_SC_PAGESIZE);
    void* start = (void*)(where & ~(ElfW(Addr))(page - 1));
    if (mprotect(start, (size_t)page, PROT_READ | PROT_WRITE) != 0) {
      return tvmrt_fail("ModuleLoadError", "cannot load '%s': cannot write its GOT", d->path);
    }
    *(void**)where = value;
    mprotect(start, (size_t)page, PROT_READ);
    return 0;
  }
  *(void**)where = value;
  return 0;
}

/* one relocation table: point the imports the runtime serves at their services, refuse an
   import of tvm-ffi's (or a TVM service) that nothing here provides */
static int link_table(const dyn_info* d, const ElfW(Rela) * rel, size_t bytes) {
  size_t i, n = rel != NULL ? bytes / sizeof(ElfW(Rela)) : 0;
  for (i = 0; i < n; ++i) {
    unsigned type = (unsigned)ELF64_R_TYPE(rel[i].r_info);
    const ElfW(Sym)* sym = &d->symtab[ELF64_R_SYM(rel[i].r_info)];
    const char* name;
    void* fn;
    if ((type != R_SLOT && type != R_GLOB) || ELF64_R_SYM(rel[i].r_info) == 0) continue;
    if (sym->st_shndx != SHN_UNDEF || sym->st_name >= d->strsz) continue;
    name = d->strtab + sym->st_name;
    fn = service(name);
    if (fn != NULL) {
      if (write_got(d, d->base + rel[i].r_offset, fn) != 0) return -1;
    } else if (strncmp(name, "TVMFFI", 6) == 0 ||
               (strncmp(name, "TVM", 3) == 0 && dlsym(RTLD_DEFAULT, name) == NULL)) {
      return tvmrt_fail("ModuleLoadError",
                        "cannot load '%s': it was built for a tvm-ffi ABI version the C runtime "
                        "does not support (it runs the tvm-ffi ABI of TVM 0.21 to 0.27); it "
                        "needs %.200s, which the runtime does not provide",
                        d->path, name);
    }
  }
  return 0;
}

static ElfW(Addr) dyn_ptr(ElfW(Addr) base, ElfW(Addr) value) {
  /* glibc relocates the dynamic section's pointers where it may write it; else offsets */
  return value < base ? base + value : value;
}

static int link_imports(void* handle, const char* path) {
  struct link_map* lm = NULL;
  dyn_info d;
  const ElfW(Dyn) * dyn;
  const ElfW(Rela)* jmprel = NULL;
  const ElfW(Rela)* rela = NULL;
  size_t pltrelsz = 0, relasz = 0;
  memset(&d, 0, sizeof(d));
  d.path = path;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || lm == NULL) {
    return tvmrt_fail("ModuleLoadError", "cannot load '%s': no link map", path);
  }
  d.base = lm->l_addr;
  for (dyn = lm->l_ld; dyn->d_tag != DT_NULL; ++dyn) {
    switch (dyn->d_tag) {
      case DT_SYMTAB: d.symtab = (const ElfW(Sym)*)dyn_ptr(d.base, dyn->d_un.d_ptr); break;
      case DT_STRTAB: d.strtab = (const char*)dyn_ptr(d.base, dyn->d_un.d_ptr); break;
      case DT_STRSZ: d.strsz = dyn->d_un.d_val; break;
      case DT_JMPREL: jmprel = (const ElfW(Rela)*)dyn_ptr(d.base, dyn->d_un.d_ptr); break;
      case DT_PLTRELSZ: pltrelsz = dyn->d_un.d_val; break;
      case DT_RELA: rela = (const ElfW(Rela)*)dyn_ptr(d.base, dyn->d_un.d_ptr); break;
      case DT_RELASZ: relasz = dyn->d_un.d_val; break;
      default: break;
    }
  }
  if (d.symtab == NULL || d.strtab == NULL) return 0; /* imports nothing */
  dl_iterate_phdr(find_relro, &d);
  if (link_table(&d, jmprel, pltrelsz) != 0) return -1;
  return link_table(&d, rela, relasz);
}
#else
static int link_imports(void* handle, const char* path) {
  (void)handle;
  if (!g_linking_ffi) return 0; /* a legacy library's imports bind by name, as they always did */
  return tvmrt_fail("UnsupportedError",
                    "cannot load '%s': the C runtime links tvm-ffi libraries on x86-64 and "
                    "aarch64 only",
                    path);
}
#endif

/* one library linked at a time: two threads loading the same file get the same handle, and
   one must not make a GOT page read-only again while the other writes it */
static pthread_mutex_t g_link_mu = PTHREAD_MUTEX_INITIALIZER;

int tvmrt_ffi_link(void* handle, const char* path) {
  char slot[64];
  size_t i;
  int status;
  int plain, ffi = tvmrt_ffi_is_ffi_library(handle, &plain);
  pthread_mutex_lock(&g_link_mu);
  g_linking_ffi = ffi;
  status = link_imports(handle, path);
  pthread_mutex_unlock(&g_link_mu);
  if (status != 0) return -1;
  for (i = 0; i < NUM_SERVICES; ++i) {
    void** p;
    if (!ffi && strncmp(k_services[i].name, "TVMBackendAnyList", 17) == 0) continue;
    snprintf(slot, sizeof(slot), "__%s", k_services[i].name);
    p = (void**)dlsym(handle, slot);
    if (p != NULL) *p = k_services[i].fn;
  }
  return 0;
}

void tvmrt_ffi_set_context(void* handle, void* module, void* only_if) {
  static const char* const names[] = {"__tvm_ffi__library_ctx", "__tvm_ffi_library_ctx"};
  size_t i;
  for (i = 0; i < sizeof(names) / sizeof(names[0]); ++i) {
    void** p = (void**)dlsym(handle, names[i]);
    if (p != NULL && (only_if == NULL || *p == only_if)) *p = module;
  }
}

/* ---------------------------------------------------------------------------------- */
/* calling                                                                             */

enum { FFI_NONE = 0, FFI_INT = 1, FFI_BOOL = 2, FFI_FLOAT = 3, FFI_PTR = 4 };
enum { FFI_DTYPE = 5, FFI_DEVICE = 6, FFI_TENSOR = 7, FFI_RAW_STR = 8 };
#define SMALL_ARGS 16

/* TVM 0.19's bool, (kDLUInt, 1), is DLPack's (kDLBool, 8) in tvm-ffi from TVM 0.22 on;
   TVM 0.21's kernels still check for (kDLUInt, 1) */
static DLDataType ffi_dtype(DLDataType t, int legacy_bool) {
  if (!legacy_bool && t.code == kDLUInt && t.bits == 1) {
    t.code = 6;
    t.bits = 8;
  } else if (legacy_bool && t.code == 6 && t.bits == 8) {
    t.code = kDLUInt;
    t.bits = 1;
  }
  return t;
}

static int to_ffi(const TVMValue* v, int code, int i, TVMFFIAny* out, DLTensor* tensor,
                  int legacy_bool) {
  memset(out, 0, sizeof(*out));
  memcpy(&out->v_int64, v, sizeof(TVMValue));
  switch (code) {
    case kDLInt: out->type_index = FFI_INT; return 0;
    case kDLFloat: out->type_index = FFI_FLOAT; return 0;
    case kTVMOpaqueHandle: out->type_index = FFI_PTR; return 0;
    case kTVMNullptr: out->type_index = FFI_NONE; return 0;
    case kDLDevice: out->type_index = FFI_DEVICE; return 0;
    case kTVMStr: out->type_index = FFI_RAW_STR; return 0;
    case kTVMDataType: {
      DLDataType t = ffi_dtype(v->v_type, legacy_bool);
      out->type_index = FFI_DTYPE;
      memcpy(&out->v_int64, &t, sizeof(t));
      return 0;
    }
    case kTVMDLTensorHandle:
    case kTVMNDArrayHandle: {
      const DLTensor* t = (const DLTensor*)v->v_handle;
      if (t == NULL) break;
      *tensor = *t;
      tensor->data = (char*)t->data + t->byte_offset;
      tensor->byte_offset = 0;
      tensor->dtype = ffi_dtype(t->dtype, legacy_bool);
      out->type_index = FFI_TENSOR;
      memcpy(&out->v_int64, &tensor, sizeof(tensor));
      return 0;
    }
    default: break;
  }
  return tvmrt_fail("ArgumentTypeError",
                    "tvm-ffi kernel argument %d has type code %d; the C runtime passes numbers, "
                    "pointers, strings, dtypes, devices and tensors to tvm-ffi kernels",
                    i, code);
}

static int call(TVMFFISafeCallType fn, int legacy_bool, TVMValue* args, int* codes, int n,
                TVMValue* ret, int* ret_code) {
  TVMFFIAny small[SMALL_ARGS] = {{0, 0, 0}}, result;
  DLTensor tsmall[SMALL_ARGS];
  TVMFFIAny* in = small;
  DLTensor* tensors = tsmall;
  int i, rc = 0;
  if (n > SMALL_ARGS) {
    in = (TVMFFIAny*)malloc((size_t)n * sizeof(TVMFFIAny));
    tensors = (DLTensor*)malloc((size_t)n * sizeof(DLTensor));
    if (in == NULL || tensors == NULL) {
      free(in);
      free(tensors);
      return tvmrt_fail("DeviceOutOfMemoryError", "cannot pass %d arguments", n);
    }
  }
  for (i = 0; i < n && rc == 0; ++i)
    rc = to_ffi(&args[i], codes[i], i, &in[i], &tensors[i], legacy_bool);
  if (rc == 0) {
    memset(&result, 0, sizeof(result));
    rc = fn(NULL, in, n, &result) == 0 ? 0 : -1;
    if (rc == 0 && result.type_index == FFI_NONE) {
      *ret_code = kTVMNullptr;
    } else if (rc == 0 && (result.type_index == FFI_INT || result.type_index == FFI_BOOL)) {
      *ret_code = kDLInt;
      ret->v_int64 = result.v_int64;
    } else if (rc == 0 && (result.type_index == FFI_FLOAT || result.type_index == FFI_PTR)) {
      *ret_code = result.type_index == FFI_FLOAT ? kDLFloat : kTVMOpaqueHandle;
      memcpy(ret, &result.v_int64, sizeof(TVMValue));
    } else if (rc == 0) {
      rc = tvmrt_fail("UnsupportedError",
                      "a tvm-ffi kernel returned a value of type index %d; the C runtime takes "
                      "numbers and pointers back",
                      (int)result.type_index);
    }
  }
  if (in != small) {
    free(in);
    free(tensors);
  }
  return rc;
}

static int ffi_call(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code) {
  return call((TVMFFISafeCallType)self, 0, args, codes, n, ret, ret_code);
}

static int ffi_call_021(void* self, TVMValue* args, int* codes, int n, TVMValue* ret,
                        int* ret_code) {
  return call((TVMFFISafeCallType)self, 1, args, codes, n, ret, ret_code);
}

tvmrt_func* tvmrt_ffi_func(void* fn, tvmrt_object* owner, int tvm021) {
  return tvmrt_func_new(tvm021 ? ffi_call_021 : ffi_call, fn, owner);
}
