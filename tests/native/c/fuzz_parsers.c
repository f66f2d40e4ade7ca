/*
 * Mutation fuzzer for libtvmrt_runtime's parsers of outside bytes: graph JSON (parsed, then
 * planned and bound by a graph executor over no-op kernels), params blobs, the module
 * blob `__tvm_dev_mblob`, an AOT build's TVMMetadata (aotmeta: the struct is flattened
 * into bytes, mutated, and rebuilt with its pointers before each parse), a single-file
 * tvm-ffi build's `__tvm_ffi__library_bin` (ffibin), and the Relay VM's code.ro (vmcode:
 * read with the instruction hashes unchecked, so that mutations reach the operand checks;
 * then decoded and, when it loads, `main` run over no-op kernels under small limits), and a
 * Relax VM executable's payload (relax: read by tvmrt_rx_read with all its checks, and when
 * it loads, made into a VirtualMachine over no-op kernels, initialised under small budgets
 * and its `main` run on tensors of the shapes its own checks ask for). Linked with
 * libtvmrt_runtime.a to reach the parsers directly; built with ASan + UBSan by the tests, so any
 * out-of-bounds access, leak or undefined behaviour fails the run. The rule checked here: every
 * input either parses or fails with an error message; nothing else.
 *
 *   fuzz_parsers graph|params|blob|aotmeta|ffibin|vmcode|relax SEED_FILE ITERATIONS RNG_SEED
 *
 * For `blob` the seed file is a factory .so; its __tvm_dev_mblob is the seed (`ffibin`: a
 * single-file tvm-ffi .so, its __tvm_ffi__library_bin). For `relax` it is a Relax model.so
 * of any era: the executable payload after its module blob's relax.Executable or
 * relax.VMExecutable key is the seed, and the blob's symbol gives the era. For `aotmeta`
 * it is an AOT build's .so; what its get_c_metadata returns, flattened, is the seed.
 */
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/graph.h"
#include "runtime/relax.h"
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

/* every kernel a graph or VM names, but not TVM 0.7/0.8's linked-param lookup (a library
   with one is refused by the graph executor) */
static tvmrt_func* noop_lookup(tvmrt_module* mod, const char* name) {
  if (strcmp(name, "_lookup_linked_param") == 0) return NULL;
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
  tvmrt_module* exec = tvmrt_graph_executor_create((const char*)data, size, lib, &cpu, 1);
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

/* ---------------------------------------------------------------------------------- */
/* relax: a Relax VM executable's payload                                               */

static int g_relax_era;                    /* RX_ERA_* of the seed's container */
static size_t g_relax_code, g_relax_words; /* where the seed's instruction words start, count */
static size_t g_relax_ran, g_relax_failed; /* main's runs that returned, and that failed */

/* the kernels of a Relax executable: no-ops, but never a vm.builtin or relax.run name (so
   that those resolve to the VM's builtins) */
static tvmrt_func* relax_kernel_lookup(tvmrt_module* mod, const char* name) {
  if (strncmp(name, "vm.", 3) == 0 || strncmp(name, "relax.run.", 10) == 0) return NULL;
  return tvmrt_func_backend(noop_kernel, &mod->hdr);
}

/* the immediate argument k of Call words w, or fallback */
static int64_t relax_imm(const int64_t* w, int64_t k, int64_t fallback) {
  return k < w[3] && rx_arg_kind(w[4 + k]) == RX_ARG_IMM ? rx_arg_value(w[4 + k]) : fallback;
}

/* an input for parameter `reg` of VM function f: the rank, dtype and static dims that f's
   own check_tensor_info and match_shape calls ask for (2 where a symbol binds a dim) */
static tvmrt_ndarray* relax_input(const rx_exe* exe, const rx_func_info* f, int64_t reg) {
  int64_t shape[RT_MAX_NDIM], pc, k, ndim = 1;
  DLDataType dtype = {kDLFloat, 32, 1};
  tvmrt_ndarray* a;
  size_t nbytes;
  for (k = 0; k < RT_MAX_NDIM; ++k) shape[k] = 2;
  for (pc = f->start; f->kind == RX_FUNC_VM && pc < f->end; ++pc) { /* (vm_tir: no code) */
    const int64_t* w = exe->words + exe->offsets[pc];
    const char* name;
    if (w[0] != RX_OP_CALL || w[3] < 2 || rx_arg_kind(w[4]) != RX_ARG_REG ||
        rx_arg_value(w[4]) != reg || exe->funcs[w[2]].kind != RX_FUNC_PACKED)
      continue;
    name = exe->funcs[w[2]].name;
    if (strcmp(name, "vm.builtin.check_tensor_info") == 0) {
      ndim = relax_imm(w, 1, ndim);
      if (w[3] >= 3 && rx_arg_kind(w[6]) == RX_ARG_CONST &&
          exe->consts[rx_arg_value(w[6])].kind == RX_DTYPE) {
        DLDataType t = exe->consts[rx_arg_value(w[6])].v.t;
        if (t.bits > 0 && t.bits <= 64 && t.lanes == 1) dtype = t;
      }
    } else if (strcmp(name, "vm.builtin.match_shape") == 0) {
      int64_t size = relax_imm(w, 2, -1);
      if (size < 0 || size > RT_MAX_NDIM) continue;
      ndim = size;
      for (k = 0; k < size && 4 + 2 * k < w[3]; ++k) {
        int64_t dim = relax_imm(w, 4 + 2 * k, 2);
        shape[k] = relax_imm(w, 3 + 2 * k, -1) == 0 && dim >= 0 && dim <= 64 ? dim : 2;
      }
    }
  }
  if (ndim < 0 || ndim > 4) ndim = 1; /* keep inputs small */
  a = tvmrt_ndarray_empty(shape, (int)ndim, dtype);
  if (a != NULL && tvmrt_tensor_nbytes(&a->dl, &nbytes) == 0) memset(a->dl.data, 0, nbytes);
  return a;
}

static int relax_call(TVMModuleHandle mod, const char* name, TVMValue* a, int* c, int n,
                      TVMValue* ret, int* rc) {
  TVMFunctionHandle f = NULL;
  int status = TVMModGetFunction(mod, name, 0, &f);
  if (status != 0 || f == NULL) return -1;
  status = TVMFuncCall(f, a, c, n, ret, rc);
  TVMFuncFree(f);
  return status;
}

/* read the payload (0 when it loads), then run main in a VM over no-op kernels */
static int run_relax(const uint8_t* data, size_t size, tvmrt_module* kernels) {
  tvmrt_reader r = {data, size, 0, "relax payload", g_relax_era, NULL};
  tvmrt_module* exec =
      g_relax_era == RX_ERA_LEGACY ? tvmrt_rx_exec_load_blob_019(&r) : tvmrt_rx_exec_load_blob(&r);
  const rx_exe* exe;
  TVMModuleHandle vm = NULL;
  TVMValue a[64], ret;
  int c[64], rc, k, nargs = 0;
  if (exec == NULL) return -1;
  exe = tvmrt_rx_exec_of(exec);
  if (tvmrt_module_import(exec, kernels) != 0 ||
      relax_call(exec, "vm_load_executable", NULL, NULL, 0, &ret, &rc) != 0) {
    tvmrt_release(&exec->hdr);
    return -1;
  }
  vm = ret.v_handle;
  for (k = 0; k < 4; ++k) c[k] = kDLInt;
  a[0].v_int64 = 1000;    /* steps */
  a[1].v_int64 = 64;      /* frames */
  a[2].v_int64 = 1 << 22; /* live bytes */
  a[3].v_int64 = 1 << 20; /* one storage */
  if (relax_call(vm, "set_limits", a, c, 4, &ret, &rc) != 0) goto done;
  a[0].v_int64 = kDLCPU, a[1].v_int64 = 0, a[2].v_int64 = 2;
  /* a VM the executable cannot initialise (a missing name, a constant's scope) is refused */
  if (relax_call(vm, "vm_initialization", a, c, 3, &ret, &rc) == 0) {
    int f = tvmrt_rx_find_func(exe, "main");
    if (f >= 0 && exe->funcs[f].kind != RX_FUNC_PACKED && exe->funcs[f].num_args <= 64) {
      for (nargs = 0; nargs < exe->funcs[f].num_args; ++nargs) {
        tvmrt_ndarray* x = relax_input(exe, &exe->funcs[f], nargs);
        if (x == NULL) break;
        a[nargs].v_handle = &x->dl;
        c[nargs] = kTVMNDArrayHandle;
      }
      if (nargs == exe->funcs[f].num_args && relax_call(vm, "main", a, c, nargs, &ret, &rc) == 0) {
        ++g_relax_ran;
        if (rc == kTVMNDArrayHandle) TVMArrayFree(ret.v_handle);
        else if (rc == kTVMObjectHandle || rc == kTVMModuleHandle || rc == kTVMPackedFuncHandle)
          tvmrt_release((tvmrt_object*)ret.v_handle);
      } else {
        const char* msg = TVMGetLastError();
        ++g_relax_failed;
        if (msg == NULL || strchr(msg, ':') == NULL) {
          fprintf(stderr, "a run failed without an error message: %s\n", msg ? msg : "(none)");
          exit(1);
        }
        if (getenv("FUZZ_VERBOSE") != NULL) fprintf(stderr, "main: %s\n", msg);
      }
      for (k = 0; k < nargs; ++k) TVMArrayFree(a[k].v_handle);
    }
  }
done:
  TVMModFree(vm);
  tvmrt_release(&exec->hdr);
  return 0;
}

/* Half of the relax inputs: 1..4 instruction words of the seed set to small values (an
   opcode, register, offset, count or index near the tables' sizes, or an argument word of
   any kind), the layout kept, so that mutations reach the code checks and the run loop. */
static void mutate_words(uint8_t* buf) {
  int edits = 1 + (int)below(4), k;
  for (k = 0; k < edits && g_relax_words > 0; ++k) {
    size_t at = g_relax_code + 8 * below(g_relax_words);
    int64_t v = (int64_t)below(48) - 8;
    if (below(3) == 0) v = (int64_t)((uint64_t)below(5) << 56 | (uint64_t)below(40));
    if (below(8) == 0) v = (int64_t)1 << (40 + below(23));
    memcpy(buf + at, &v, 8);
  }
}

/* ---------------------------------------------------------------------------------- */
/* aotmeta: TVM's TVMMetadata flattened into int64 fields:                               */
/*   version, num_inputs, num_outputs, num_workspace_pools, null_flags, then per tensor  */
/*   (inputs, then outputs; at most FLAT_TENSORS) num_shape, code, bits, lanes, 8 dims, */
/*   a 32-byte name; then a 32-byte model name. Rebuilt with memory for every count and */
/*   rank the parser accepts, so only the parser's checks stand between it and a bad    */
/*   read.                                                                              */

#define FLAT_TENSORS 8
#define FLAT_TENSOR_BYTES (12 * 8 + 32)
#define FLAT_BYTES (5 * 8 + FLAT_TENSORS * FLAT_TENSOR_BYTES + 32)
#define META_CAP ((1 << 16) + 1)

typedef struct {
  const char* name;
  const int64_t* shape;
  int64_t num_shape;
  DLDataType dtype;
} meta_info;

typedef struct {
  int64_t version;
  const meta_info* inputs;
  int64_t num_inputs;
  const meta_info* outputs;
  int64_t num_outputs;
  const meta_info* pools;
  int64_t num_pools;
  const void* constants;
  int64_t num_constants;
  const char* mod_name;
} meta_struct;

static int64_t flat_get(const uint8_t* data, size_t size, size_t at) {
  int64_t v = 0;
  if (at + 8 <= size) memcpy(&v, data + at, 8);
  return v;
}

static void flat_put(uint8_t* data, size_t at, int64_t v) { memcpy(data + at, &v, 8); }

static uint8_t* flatten_metadata(const meta_struct* m, size_t* size) {
  uint8_t* out = (uint8_t*)calloc(1, FLAT_BYTES);
  int64_t t, d, n = m->num_inputs + m->num_outputs;
  flat_put(out, 0, m->version);
  flat_put(out, 8, m->num_inputs);
  flat_put(out, 16, m->num_outputs);
  flat_put(out, 24, m->num_pools);
  for (t = 0; t < n && t < FLAT_TENSORS; ++t) {
    const meta_info* info = t < m->num_inputs ? &m->inputs[t] : &m->outputs[t - m->num_inputs];
    size_t at = 40 + (size_t)t * FLAT_TENSOR_BYTES;
    flat_put(out, at, info->num_shape);
    flat_put(out, at + 8, info->dtype.code);
    flat_put(out, at + 16, info->dtype.bits);
    flat_put(out, at + 24, info->dtype.lanes);
    for (d = 0; d < info->num_shape && d < 8; ++d) flat_put(out, at + 32 + 8 * d, info->shape[d]);
    strncpy((char*)out + at + 96, info->name, 31);
  }
  strncpy((char*)out + FLAT_BYTES - 32, m->mod_name, 31);
  *size = FLAT_BYTES;
  return out;
}

static int run_aotmeta(const uint8_t* data, size_t size) {
  static meta_info infos[2][META_CAP]; /* inputs, outputs: every slot a count may reach */
  static int64_t shapes[FLAT_TENSORS][RT_MAX_NDIM], zeros[RT_MAX_NDIM];
  static char names[FLAT_TENSORS][33], mod_name[33];
  static int ready;
  meta_struct m;
  tvmrt_aot_meta out;
  int64_t flags = flat_get(data, size, 32), t, d, n_in;
  int rc, list;
  if (!ready) {
    for (t = 0; t < META_CAP * 2; ++t) {
      infos[t / META_CAP][t % META_CAP].shape = zeros;
      infos[t / META_CAP][t % META_CAP].name = "";
    }
    ready = 1;
  }
  m.version = flat_get(data, size, 0);
  m.num_inputs = flat_get(data, size, 8);
  m.num_outputs = flat_get(data, size, 16);
  m.num_pools = flat_get(data, size, 24);
  m.pools = infos[0];
  m.constants = NULL;
  m.num_constants = 0;
  n_in = m.num_inputs < 0 ? 0 : m.num_inputs > FLAT_TENSORS ? FLAT_TENSORS : m.num_inputs;
  for (list = 0; list < 2; ++list) {
    for (t = 0; t < FLAT_TENSORS; ++t) {
      memset(&infos[list][t], 0, sizeof(meta_info));
      infos[list][t].shape = zeros;
      infos[list][t].name = "";
    }
  }
  for (t = 0; t < FLAT_TENSORS; ++t) {
    size_t at = 40 + (size_t)t * FLAT_TENSOR_BYTES;
    meta_info* info = t < n_in ? &infos[0][t] : &infos[1][t - n_in];
    info->num_shape = flat_get(data, size, at);
    info->dtype.code = (uint8_t)flat_get(data, size, at + 8);
    info->dtype.bits = (uint8_t)flat_get(data, size, at + 16);
    info->dtype.lanes = (uint16_t)flat_get(data, size, at + 24);
    for (d = 0; d < RT_MAX_NDIM; ++d) {
      shapes[t][d] = d < 8 ? flat_get(data, size, at + 32 + 8 * (size_t)d) : 0;
    }
    info->shape = shapes[t];
    memset(names[t], 0, sizeof(names[t]));
    if (at + 96 + 32 <= size) memcpy(names[t], data + at + 96, 32);
    info->name = (flags & 8) ? NULL : names[t];
  }
  memset(mod_name, 0, sizeof(mod_name));
  if (size >= 32) memcpy(mod_name, data + size - 32, 32);
  m.inputs = (flags & 1) ? NULL : infos[0];
  m.outputs = (flags & 2) ? NULL : infos[1];
  m.mod_name = (flags & 4) ? NULL : mod_name;
  rc = tvmrt_aot_read_metadata(&m, &out);
  if (rc == 0) tvmrt_aot_meta_free(&out);
  return rc;
}

static int run_one(const char* kind, const uint8_t* data, size_t size, tvmrt_module* lib) {
  if (strcmp(kind, "graph") == 0) return run_graph(data, size, lib);
  if (strcmp(kind, "vmcode") == 0) return run_vmcode(data, size, lib);
  if (strcmp(kind, "relax") == 0) return run_relax(data, size, lib);
  if (strcmp(kind, "aotmeta") == 0) return run_aotmeta(data, size);
  if (strcmp(kind, "ffibin") == 0) {
    tvmrt_module* root = tvmrt_ffi_library_bin(data, size, lib);
    if (root == NULL) return -1;
    tvmrt_release(&root->hdr);
    return 0;
  }
  if (strcmp(kind, "params") == 0) {
    tvmrt_params p;
    int rc = tvmrt_params_parse(data, size, 0, &p);
    if (rc == 0) tvmrt_params_free(&p);
    return rc;
  } else {
    tvmrt_module* root = tvmrt_process_blob(data, size, lib, RT_BLOB_MBLOB);
    if (root == NULL) return -1;
    tvmrt_release(&root->hdr);
    return 0;
  }
}

static uint8_t* load_seed(const char* kind, const char* path, size_t* size) {
  uint8_t* buf;
  if (strcmp(kind, "blob") == 0 || strcmp(kind, "ffibin") == 0) {
    const char* symbol = kind[0] == 'b' ? "__tvm_dev_mblob" : "__tvm_ffi__library_bin";
    void* h = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
    const uint8_t* blob = h != NULL ? (const uint8_t*)dlsym(h, symbol) : NULL;
    Dl_info info;
    const ElfW(Sym)* sym = NULL;
    if (blob == NULL || dladdr1(blob, &info, (void**)&sym, RTLD_DL_SYMENT) == 0 || sym == NULL) {
      fprintf(stderr, "no %s in %s\n", symbol, path);
      exit(2);
    }
    *size = sym->st_size;
    buf = (uint8_t*)malloc(*size);
    memcpy(buf, blob, *size);
    return buf; /* the library stays loaded: the blob's factory imports it */
  } else if (strcmp(kind, "relax") == 0) { /* the payload after the executable's key */
    size_t n, i;
    uint8_t* file = load_seed("file", path, &n);
    static const char* const keys[] = {"relax.Executable", "relax.VMExecutable"};
    g_relax_era = memmem(file, n, "__tvm_ffi__library_bin", 23) != NULL  ? RX_ERA_FFI
                  : memmem(file, n, "__tvm_ffi_library_bin", 22) != NULL ? RX_ERA_021
                                                                         : RX_ERA_LEGACY;
    for (i = 0; i < 2; ++i) {
      uint8_t key[40];
      uint64_t len = strlen(keys[i]), plen;
      const uint8_t* at;
      memcpy(key, &len, 8);
      memcpy(key + 8, keys[i], len);
      at = (const uint8_t*)memmem(file, n, key, 8 + len);
      if (at == NULL || at + 16 + len > file + n) continue;
      memcpy(&plen, at + 8 + len, 8);
      if (plen > (uint64_t)(file + n - (at + 16 + len))) break;
      buf = (uint8_t*)malloc((size_t)plen);
      memcpy(buf, at + 16 + len, (size_t)plen);
      *size = (size_t)plen;
      free(file);
      return buf;
    }
    fprintf(stderr, "no Relax executable in %s\n", path);
    exit(2);
  } else if (strcmp(kind, "aotmeta") == 0) {
    void* h = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
    void* get = h != NULL ? dlsym(h, "get_c_metadata") : NULL;
    TVMValue ret;
    int code = 0;
    if (get == NULL || ((TVMBackendPackedCFunc)get)(NULL, NULL, 0, &ret, &code, NULL) != 0) {
      fprintf(stderr, "no get_c_metadata in %s\n", path);
      exit(2);
    }
    return flatten_metadata((const meta_struct*)ret.v_handle, size);
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
    fprintf(stderr,
            "usage: fuzz_parsers graph|params|blob|aotmeta|ffibin|vmcode|relax SEED_FILE "
            "ITERATIONS RNG_SEED\n");
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
  lib->lookup = strcmp(kind, "relax") == 0 ? relax_kernel_lookup : noop_lookup;
  if (run_one(kind, seed, seed_size, lib) != 0) {
    fprintf(stderr, "the unmutated seed does not parse: %s\n", TVMGetLastError());
    return 1;
  }
  if (strcmp(kind, "relax") == 0) { /* the instruction words: the payload's last vector */
    rx_exe exe;
    if (tvmrt_rx_read(seed, seed_size, g_relax_era, "seed", &exe) != 0) return 1;
    g_relax_words = exe.num_words;
    g_relax_code = seed_size - 8 * exe.num_words;
    tvmrt_rx_exe_free(&exe);
  }
  for (i = 0; i < iterations; ++i) {
    size_t size;
    memcpy(buf, seed, seed_size);
    if (g_relax_words > 0 && below(2)) {
      mutate_words(buf);
      size = seed_size;
    } else {
      size = mutate(buf, seed_size, cap);
    }
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
  if (strcmp(kind, "relax") == 0) /* the seed's run included */
    printf("relax: main returned %zu times, failed with an error %zu times\n", g_relax_ran,
           g_relax_failed);
  tvmrt_release(&lib->hdr);
  free(buf);
  free(seed);
  return 0;
}
