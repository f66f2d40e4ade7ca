/*
 * Mutation fuzzer for libtvmrt_runtime's parsers of outside bytes: graph JSON (parsed, then
 * planned and bound by a graph executor over no-op kernels), params blobs, the module
 * blob `__tvm_dev_mblob`, and the Relay VM's code.ro (read with the instruction hashes
 * unchecked, so that mutations reach the operand checks; then decoded and, when it loads,
 * `main` run over no-op kernels under small limits). Linked with libtvmrt_runtime.a to reach the
 * parsers directly; built with ASan + UBSan by the tests, so any out-of-bounds access, leak or
 * undefined behaviour fails the run. The rule checked here: every input either parses or fails with
 * an error message; nothing else.
 *
 *   fuzz_parsers graph|params|blob|vmcode SEED_FILE ITERATIONS RNG_SEED
 *
 * For `blob` the seed file is a factory .so; its __tvm_dev_mblob is the seed.
 */
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/graph.h"
#include "runtime/rt.h"
#include "runtime/vm.h"

static uint64_t g_rng;

static uint64_t next(void) { /* xorshift64* */
  g_rng ^= g_rng >> 12;
  g_rng ^= g_rng << 25;
  g_rng ^= g_rng >> 27;
  return g_rng * 2685821657736338717ULL;
}

static size_t below(size_t n) { return n ? (size_t)(next() % n) : 0; }

static int noop_kernel(TVMValue* a, int* c, int n, TVMValue* r, int* rc, void* res) {
  (void)a, (void)c, (void)n, (void)r, (void)rc, (void)res;
  return 0;
}

static tvmrt_func* noop_lookup(tvmrt_module* mod, const char* name) {
  (void)name;
  return tvmrt_func_backend(noop_kernel, &mod->hdr);
}

/* Apply 1..8 random edits to buf (capacity cap), returning the new size. */
static size_t mutate(uint8_t* buf, size_t size, size_t cap) {
  static const uint64_t wide[] = {
      0, 1, 0x7fffffffULL, 0x80000000ULL, 0xffffffffULL, 1ULL << 40, 0x7fffffffffffffffULL, ~0ULL};
  static const char* tokens[] = {"-1",           "99999999999", "[",     "]",    "{",  "}",
                                 "\"",           ",",           "1e300", "null", "[[", "0",
                                 "\"list_int\"", "4294967296"};
  int edits = 1 + (int)below(3), k;
  for (k = 0; k < edits && size > 0; ++k) {
    size_t at = below(size);
    switch (below(7)) {
      case 0: buf[at] ^= (uint8_t)(1u << below(8)); break;
      case 1: buf[at] = (uint8_t)(below(2) ? 0xff : below(256)); break;
      case 2:
        if (size >= 8) {
          uint64_t v = wide[below(sizeof(wide) / sizeof(wide[0]))];
          at = below(size - 7);
          memcpy(buf + at, &v, 8);
        }
        break;
      case 3: size = below(size + 1); break;
      case 4: { /* duplicate a chunk */
        uint8_t chunk[64];
        size_t len = below(64) + 1, to = below(size);
        if (at + len > size) len = size - at;
        if (size + len > cap) break;
        memcpy(chunk, buf + at, len);
        memmove(buf + to + len, buf + to, size - to);
        memcpy(buf + to, chunk, len);
        size += len;
        break;
      }
      case 5: { /* insert a JSON token */
        const char* t = tokens[below(sizeof(tokens) / sizeof(tokens[0]))];
        size_t len = strlen(t);
        if (size + len > cap) break;
        memmove(buf + at + len, buf + at, size - at);
        memcpy(buf + at, t, len);
        size += len;
        break;
      }
      default: { /* delete a chunk */
        size_t len = below(32) + 1;
        if (at + len > size) len = size - at;
        memmove(buf + at, buf + at + len, size - at - len);
        size -= len;
      }
    }
  }
  return size;
}

static int run_graph(const uint8_t* data, size_t size, tvmrt_module* lib) {
  DLDevice cpu = {kDLCPU, 0};
  tvmrt_module* exec = tvmrt_graph_executor_create((const char*)data, size, lib, cpu);
  TVMFunctionHandle run = NULL;
  TVMValue ret;
  int code, rc;
  if (exec == NULL) return -1;
  rc = TVMModGetFunction(exec, "run", 0, &run);
  if (rc == 0 && run != NULL) rc = TVMFuncCall(run, NULL, NULL, 0, &ret, &code);
  TVMFuncFree(run);
  TVMModFree(exec);
  return rc;
}

/* code.ro: read and decode (0 when it loads), then run `main` over no-op kernels, each input
   a float32 array of one element */
static int run_vmcode(const uint8_t* data, size_t size, tvmrt_module* lib) {
  vm_exe exe;
  vm_state st;
  tvmrt_object* args[64];
  tvmrt_object* out = NULL;
  size_t i, nargs = 0;
  int rc = -1, k;
  if (tvmrt_vm_read(data, size, "code.ro", 0, &exe) != 0) return -1;
  memset(&st, 0, sizeof(st));
  if (tvmrt_vm_decode(&exe, "code.ro") != 0) goto done;
  st.exe = &exe;
  st.limits.max_frames = 64;
  st.limits.max_steps = 1000;
  st.limits.max_alloc_bytes = 1 << 20;
  st.limits.max_live_bytes = 1 << 22;
  st.pool = tvmrt_vm_pool_new(1, &st.limits);
  st.consts = (tvmrt_ndarray**)calloc(exe.num_consts + 1, sizeof(void*));
  st.kernels = (tvmrt_func**)calloc(exe.num_prims + 1, sizeof(void*));
  if (st.pool == NULL || st.consts == NULL || st.kernels == NULL) goto done;
  for (i = 0; i < exe.num_consts; ++i) {
    if ((st.consts[i] = exe.consts[i]) == NULL) {
      rc = tvmrt_fail("ModuleLoadError", "a late-bound constant");
      goto done;
    }
  }
  for (i = 0; i < exe.num_prims; ++i) st.kernels[i] = noop_lookup(lib, exe.prims[i]);
  k = tvmrt_vm_find_func(&exe, "main");
  if (k < 0 || exe.funcs[k].num_params > 64) {
    rc = tvmrt_fail("InputNotFoundError", "no main of at most 64 params");
    goto done;
  }
  for (nargs = 0; nargs < exe.funcs[k].num_params; ++nargs) {
    int64_t one = 1;
    DLDataType f32 = {kDLFloat, 32, 1};
    tvmrt_ndarray* a = tvmrt_ndarray_empty(&one, 1, f32);
    if (a == NULL) goto done;
    memset(a->dl.data, 0, 4);
    args[nargs] = &a->hdr;
  }
  /* kernels that compute nothing leave sizes unset: running may fail, with a message */
  if (tvmrt_vm_run(&st, k, args, nargs, &out) != 0) {
    const char* msg = TVMGetLastError();
    if (msg == NULL || strchr(msg, ':') == NULL) {
      fprintf(stderr, "a run failed without an error message: %s\n", msg != NULL ? msg : "(none)");
      exit(1);
    }
  }
  tvmrt_release(out);
  rc = 0;
done:
  for (i = 0; i < nargs; ++i) tvmrt_release(args[i]);
  for (i = 0; st.kernels != NULL && i < exe.num_prims; ++i) {
    if (st.kernels[i] != NULL) tvmrt_release(&st.kernels[i]->hdr);
  }
  free(st.kernels);
  free(st.consts); /* borrowed from exe */
  tvmrt_vm_pool_release(st.pool);
  tvmrt_vm_exe_free(&exe);
  return rc;
}

static int run_one(const char* kind, const uint8_t* data, size_t size, tvmrt_module* lib) {
  if (strcmp(kind, "graph") == 0) return run_graph(data, size, lib);
  if (strcmp(kind, "vmcode") == 0) return run_vmcode(data, size, lib);
  if (strcmp(kind, "params") == 0) {
    tvmrt_params p;
    int rc = tvmrt_params_parse(data, size, 0, &p);
    if (rc == 0) tvmrt_params_free(&p);
    return rc;
  } else {
    tvmrt_module* root = tvmrt_process_blob(data, size, lib);
    if (root == NULL) return -1;
    tvmrt_release(&root->hdr);
    return 0;
  }
}

static uint8_t* load_seed(const char* kind, const char* path, size_t* size) {
  uint8_t* buf;
  if (strcmp(kind, "blob") == 0) {
    void* h = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
    const uint8_t* blob = h != NULL ? (const uint8_t*)dlsym(h, "__tvm_dev_mblob") : NULL;
    Dl_info info;
    const ElfW(Sym)* sym = NULL;
    if (blob == NULL || dladdr1(blob, &info, (void**)&sym, RTLD_DL_SYMENT) == 0 || sym == NULL) {
      fprintf(stderr, "no __tvm_dev_mblob in %s\n", path);
      exit(2);
    }
    *size = sym->st_size;
    buf = (uint8_t*)malloc(*size);
    memcpy(buf, blob, *size);
    return buf; /* the library stays loaded: the blob's factory imports it */
  } else {
    FILE* f = fopen(path, "rb");
    long n;
    if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0) exit(2);
    rewind(f);
    buf = (uint8_t*)malloc((size_t)n + 1);
    if (buf == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n) exit(2);
    fclose(f);
    *size = (size_t)n;
    return buf;
  }
}

int main(int argc, char** argv) {
  const char* kind;
  uint8_t *seed, *buf;
  size_t seed_size, cap, i, iterations, parsed = 0, refused = 0;
  tvmrt_module* lib;
  if (argc != 5) {
    fprintf(stderr, "usage: fuzz_parsers graph|params|blob|vmcode SEED_FILE ITERATIONS RNG_SEED\n");
    return 2;
  }
  kind = argv[1];
  seed = load_seed(kind, argv[2], &seed_size);
  iterations = (size_t)strtoull(argv[3], NULL, 10);
  g_rng = strtoull(argv[4], NULL, 10) * 0x9E3779B97F4A7C15ULL + 1;
  cap = seed_size * 2 + 4096;
  buf = (uint8_t*)malloc(cap);
  tvmrt_init();
  lib = tvmrt_module_new("library", NULL);
  lib->lookup = noop_lookup;
  if (run_one(kind, seed, seed_size, lib) != 0) {
    fprintf(stderr, "the unmutated seed does not parse: %s\n", TVMGetLastError());
    return 1;
  }
  for (i = 0; i < iterations; ++i) {
    size_t size;
    memcpy(buf, seed, seed_size);
    size = mutate(buf, seed_size, cap);
    TVMAPISetLastError("");
    if (run_one(kind, buf, size, lib) == 0) {
      ++parsed;
    } else {
      const char* msg = TVMGetLastError();
      if (msg == NULL || *msg == '\0' || strchr(msg, ':') == NULL) {
        fprintf(stderr, "iteration %zu failed without an error message\n", i);
        free(buf);
        free(seed);
        return 1;
      }
      ++refused;
    }
  }
  printf("%s: %zu inputs, %zu parsed, %zu refused with an error\n", kind, iterations, parsed,
         refused);
  tvmrt_release(&lib->hdr);
  free(buf);
  free(seed);
  return 0;
}
