/*
 * The Relax executable module (`relax.Executable` in TVM <= 0.19, `relax.VMExecutable` from
 * 0.20): the blob loaders of every era, the module's functions, and the global functions
 * that read and make the VM's values from outside (TVM's runtime.* names).
 *
 * The era comes from the file, never from the version string (which every release wrote as
 * "0.14"): the blob's container (relax.h, RT_BLOB_*) decides the constant tags, and the
 * payload's magic whether a memory-scope section follows. A payload is the executable's
 * bytes, with a u64 length before them in the old blob layout (SaveToBinary wrote a string).
 *
 * Functions: vm_load_executable / vm_profiler_load_executable (a new VirtualMachine), stats,
 * has_function(name), and tvmrt's describe(): JSON of the era, the functions (kind,
 * parameters, registers), the names the function table resolves and what provides each.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relax.h"

typedef struct {
  rx_exe exe;
  char kind[32];
} exec_impl;

static int f_load(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  tvmrt_module* mod = (tvmrt_module*)self;
  tvmrt_module* vm;
  (void)args;
  (void)codes;
  (void)n;
  vm = tvmrt_rx_machine_new(mod, &((exec_impl*)mod->impl)->exe);
  if (vm == NULL) return -1;
  ret->v_handle = vm;
  *rc = kTVMModuleHandle;
  return 0;
}

static int f_has_function(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  tvmrt_module* mod = (tvmrt_module*)self;
  if (n != 1 || codes[0] != kTVMStr) return tvmrt_fail("ArgumentTypeError", "has_function(name)");
  ret->v_int64 = tvmrt_rx_find_func(&((exec_impl*)mod->impl)->exe, args[0].v_str) >= 0;
  *rc = kDLInt;
  return 0;
}

static void json_str(FILE* f, const char* s) {
  fputc('"', f);
  for (; *s; ++s) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c < 0x20) fprintf(f, "\\u%04x", c);
    else fputc(c, f);
  }
  fputc('"', f);
}

/* what provides a function-table name: "kernel", "builtin", "registered", "runtime",
   "refused" (with the family) or "missing" */
static const char* provider(tvmrt_module* mod, const char* name, const char** family) {
  size_t k;
  tvmrt_func* f = NULL;
  *family = NULL;
  for (k = 0; k < mod->num_imports && f == NULL; ++k)
    f = tvmrt_module_get(mod->imports[k], name, 1);
  if (f != NULL) {
    tvmrt_release(&f->hdr);
    return "kernel";
  }
  if ((f = tvmrt_registry_find(name)) != NULL) {
    tvmrt_release(&f->hdr);
    return "registered";
  }
  if (tvmrt_rx_builtin(name) != NULL || tvmrt_rx_run_builtin(name) != NULL) return "builtin";
  if (tvmrt_native_function(name) != NULL) return "runtime";
  if ((f = tvmrt_registry_find_host(name)) != NULL) {
    tvmrt_release(&f->hdr);
    return "registered";
  }
  *family = tvmrt_rx_refused_family(name);
  return *family != NULL ? "refused" : "missing";
}

/* What a VM function's own checks say about register `reg` (a parameter, or the returned
   register): TVM's lowering checks every parameter and the result with check_*_info and
   match_shape, so the signature is read from those calls (dims a symbol binds are -1). */
typedef struct {
  const char* kind; /* "tensor", "tuple", "shape", "prim", "any" */
  int64_t ndim;     /* -1: unknown */
  DLDataType dtype;
  int has_dtype;
  int64_t shape[RT_MAX_NDIM];
  int has_shape;
  int64_t tuple_size;
  const char* annotation; /* the ErrorContext string, or NULL */
} signature;

static const char* callee_name(const rx_exe* exe, const int64_t* w) {
  return exe->funcs[w[2]].kind == RX_FUNC_PACKED ? exe->funcs[w[2]].name : "";
}

static int64_t imm_arg(const int64_t* w, int64_t k, int64_t fallback) {
  return k < w[3] && rx_arg_kind(w[4 + k]) == RX_ARG_IMM ? rx_arg_value(w[4 + k]) : fallback;
}

static const rx_value* const_arg(const rx_exe* exe, const int64_t* w, int64_t k) {
  return k < w[3] && rx_arg_kind(w[4 + k]) == RX_ARG_CONST ? &exe->consts[rx_arg_value(w[4 + k])]
                                                           : NULL;
}

static void analyze(const rx_exe* exe, const rx_func_info* fn, int64_t reg, signature* out) {
  int64_t pc, k;
  memset(out, 0, sizeof(*out));
  out->kind = "any";
  out->ndim = -1;
  out->tuple_size = -1;
  for (pc = fn->start; pc < fn->end; ++pc) {
    const int64_t* w = exe->words + exe->offsets[pc];
    const char* name;
    const rx_value* c;
    if (w[0] != RX_OP_CALL || w[3] < 1 || rx_arg_kind(w[4]) != RX_ARG_REG ||
        rx_arg_value(w[4]) != reg)
      continue;
    name = callee_name(exe, w);
    if (strcmp(name, "vm.builtin.check_tensor_info") == 0 && strcmp(out->kind, "any") == 0) {
      out->kind = "tensor";
      out->ndim = imm_arg(w, 1, -1);
      if (w[3] == 4 && (c = const_arg(exe, w, 2)) != NULL && c->kind == RX_DTYPE &&
          !(c->v.t.code == kDLOpaqueHandle && c->v.t.bits == 0)) {
        out->dtype = c->v.t;
        out->has_dtype = 1;
      }
      if ((c = const_arg(exe, w, w[3] - 1)) != NULL && c->kind == RX_STR)
        out->annotation = tvmrt_rx_str(*c)->data;
    } else if (strcmp(name, "vm.builtin.match_shape") == 0 && !out->has_shape) {
      int64_t size = imm_arg(w, 2, -1);
      if (size < 0 || size > RT_MAX_NDIM || 3 + 2 * size > w[3]) continue;
      for (k = 0; k < size; ++k) {
        int64_t code = imm_arg(w, 3 + 2 * k, -1);
        out->shape[k] = code == 0 ? imm_arg(w, 4 + 2 * k, -1) : -1;
      }
      out->has_shape = 1;
      if (out->ndim < 0) out->ndim = size;
    } else if (strcmp(name, "vm.builtin.check_tuple_info") == 0 && strcmp(out->kind, "any") == 0) {
      out->kind = "tuple";
      out->tuple_size = imm_arg(w, 1, -1);
      if ((c = const_arg(exe, w, w[3] - 1)) != NULL && c->kind == RX_STR)
        out->annotation = tvmrt_rx_str(*c)->data;
    } else if (strcmp(name, "vm.builtin.check_shape_info") == 0 && strcmp(out->kind, "any") == 0) {
      out->kind = "shape";
      out->ndim = imm_arg(w, 1, -1);
    } else if (strcmp(name, "vm.builtin.check_prim_value_info") == 0 &&
               strcmp(out->kind, "any") == 0) {
      out->kind = "prim";
      if ((c = const_arg(exe, w, 1)) != NULL && c->kind == RX_DTYPE) {
        out->dtype = c->v.t;
        out->has_dtype = 1;
      }
    }
  }
}

static void write_signature(FILE* f, const signature* sig) {
  char dtype[48];
  int64_t k;
  fprintf(f, "{\"kind\": \"%s\"", sig->kind);
  if (sig->ndim >= 0) fprintf(f, ", \"ndim\": %lld", (long long)sig->ndim);
  if (sig->has_dtype)
    fprintf(f, ", \"dtype\": \"%s\"", tvmrt_dtype_text(sig->dtype, dtype, sizeof(dtype)));
  if (sig->has_shape && sig->ndim >= 0) {
    fprintf(f, ", \"shape\": [");
    for (k = 0; k < sig->ndim; ++k) fprintf(f, "%s%lld", k ? ", " : "", (long long)sig->shape[k]);
    fprintf(f, "]");
  }
  if (sig->tuple_size >= 0) fprintf(f, ", \"size\": %lld", (long long)sig->tuple_size);
  if (sig->annotation != NULL) {
    fprintf(f, ", \"annotation\": ");
    json_str(f, sig->annotation);
  }
  fprintf(f, "}");
}

/* the register function fn returns, or -1 (several returns, or none) */
static int64_t returned_reg(const rx_exe* exe, const rx_func_info* fn) {
  int64_t pc, reg = -1;
  for (pc = fn->start; pc < fn->end; ++pc) {
    const int64_t* w = exe->words + exe->offsets[pc];
    if (w[0] != RX_OP_RET) continue;
    if (reg >= 0 && reg != w[1]) return -1;
    reg = w[1];
  }
  return reg < RX_VOID_REG ? reg : -1;
}

static int f_describe(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  tvmrt_module* mod = (tvmrt_module*)self;
  exec_impl* impl = (exec_impl*)mod->impl;
  const rx_exe* exe = &impl->exe;
  char* text = NULL;
  size_t len = 0, i, k, tensors = 0;
  uint64_t tensor_bytes = 0;
  FILE* f;
  (void)args;
  (void)codes;
  (void)n;
  f = open_memstream(&text, &len);
  if (f == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "describe: no memory");
  fprintf(f, "{\"kind\": ");
  json_str(f, impl->kind);
  fprintf(f, ", \"era\": ");
  json_str(f, tvmrt_rx_era_names[exe->era]);
  fprintf(f, ", \"magic\": \"%#llx\", \"version\": ", (unsigned long long)exe->magic);
  json_str(f, exe->version);
  fprintf(f, ", \"functions\": [");
  for (i = 0; i < exe->num_funcs; ++i) {
    const rx_func_info* fn = &exe->funcs[i];
    static const char* const kinds[] = {"packed", "vm", "vm_tir"};
    fprintf(f, "%s{\"name\": ", i ? ", " : "");
    json_str(f, fn->name);
    fprintf(f, ", \"kind\": \"%s\"", kinds[fn->kind]);
    if (fn->kind == RX_FUNC_PACKED) {
      const char* family;
      const char* by = provider(mod, fn->name, &family);
      fprintf(f, ", \"provided_by\": \"%s\"", by);
      if (family != NULL) {
        fprintf(f, ", \"family\": ");
        json_str(f, family);
      }
    } else {
      fprintf(f, ", \"num_args\": %lld, \"registers\": %lld, \"instructions\": %lld, \"params\": [",
              (long long)fn->num_args, (long long)fn->num_regs,
              (long long)(fn->kind == RX_FUNC_VM ? fn->end - fn->start : 0));
      for (k = 0; k < fn->num_params; ++k) {
        if (k) fprintf(f, ", ");
        json_str(f, fn->params[k]);
      }
      fprintf(f, "]");
      if (fn->kind == RX_FUNC_VM) {
        signature sig;
        int64_t r = returned_reg(exe, fn);
        fprintf(f, ", \"signature\": [");
        for (k = 0; (int64_t)k < fn->num_args; ++k) {
          analyze(exe, fn, (int64_t)k, &sig);
          if (k) fprintf(f, ", ");
          write_signature(f, &sig);
        }
        fprintf(f, "], \"returns\": ");
        if (r >= 0) {
          analyze(exe, fn, r, &sig);
          write_signature(f, &sig);
        } else {
          fprintf(f, "{\"kind\": \"any\"}");
        }
      }
    }
    fprintf(f, "}");
  }
  for (i = 0; i < exe->num_consts; ++i) {
    tvmrt_ndarray* t = tvmrt_rx_tensor(exe->consts[i]);
    size_t nb;
    if (t != NULL && tvmrt_tensor_nbytes(&t->dl, &nb) == 0) {
      tensors++;
      tensor_bytes += nb;
    }
  }
  fprintf(f,
          "], \"constants\": %zu, \"tensor_constants\": %zu, \"tensor_constant_bytes\": %llu, "
          "\"instructions\": %zu}",
          exe->num_consts, tensors, (unsigned long long)tensor_bytes, exe->num_code);
  fclose(f);
  {
    rx_str* s = tvmrt_rx_str_new(text, len);
    free(text);
    if (s == NULL) return -1;
    ret->v_handle = &s->hdr;
    *rc = kTVMObjectHandle;
  }
  return 0;
}

static int f_stats(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  tvmrt_module* mod = (tvmrt_module*)self;
  const rx_exe* exe = &((exec_impl*)mod->impl)->exe;
  char* text = NULL;
  size_t len = 0, i;
  FILE* f;
  (void)args;
  (void)codes;
  (void)n;
  f = open_memstream(&text, &len);
  if (f == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "stats: no memory");
  fprintf(f, "Relax VM executable statistics:\n  Constant pool (# %zu)\n  Globals (#%zu): [",
          exe->num_consts, exe->num_funcs);
  for (i = 0; i < exe->num_funcs; ++i) fprintf(f, "%s%s", i ? ", " : "", exe->funcs[i].name);
  fprintf(f, "]\n");
  fclose(f);
  {
    rx_str* s = tvmrt_rx_str_new(text, len);
    free(text);
    if (s == NULL) return -1;
    ret->v_handle = &s->hdr;
    *rc = kTVMObjectHandle;
  }
  return 0;
}

static tvmrt_func* exec_lookup(tvmrt_module* self, const char* name) {
  if (strcmp(name, "vm_load_executable") == 0 || strcmp(name, "vm_profiler_load_executable") == 0)
    return tvmrt_func_new(f_load, self, &self->hdr);
  if (strcmp(name, "has_function") == 0) return tvmrt_func_new(f_has_function, self, &self->hdr);
  if (strcmp(name, "stats") == 0) return tvmrt_func_new(f_stats, self, &self->hdr);
  if (strcmp(name, "describe") == 0) return tvmrt_func_new(f_describe, self, &self->hdr);
  return NULL;
}

static void exec_finalize(tvmrt_module* self) {
  exec_impl* impl = (exec_impl*)self->impl;
  tvmrt_rx_exe_free(&impl->exe);
  free(impl);
}

const rx_exe* tvmrt_rx_exec_of(tvmrt_module* mod) {
  if (mod == NULL || mod->lookup != exec_lookup) return NULL;
  return &((exec_impl*)mod->impl)->exe;
}

static tvmrt_module* load(tvmrt_reader* r, const char* kind) {
  uint64_t first;
  const uint8_t* data;
  size_t size, at = r->off;
  exec_impl* impl;
  tvmrt_module* mod;
  int era = r->container == RT_BLOB_FFI       ? RX_ERA_FFI
            : r->container == RT_BLOB_FFI_021 ? RX_ERA_021
                                              : RX_ERA_LEGACY;
  if (tvmrt_read_u64(r, &first, "Relax executable") != 0) return NULL;
  if (first == RX_MAGIC_V1 || first == RX_MAGIC_V2) { /* the bytes themselves */
    data = r->data + at;
    size = r->size - at;
    r->off = r->size;
  } else { /* a string: its length, then the bytes */
    if (first > r->size - r->off) {
      tvmrt_read_short(r, "Relax executable", (size_t)(first > SIZE_MAX ? SIZE_MAX : first));
      return NULL;
    }
    data = r->data + r->off;
    size = (size_t)first;
    r->off += size;
  }
  impl = (exec_impl*)calloc(1, sizeof(exec_impl));
  if (impl == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate a Relax executable");
    return NULL;
  }
  snprintf(impl->kind, sizeof(impl->kind), "%s", kind);
  if (tvmrt_rx_read(data, size, era, kind, &impl->exe) != 0) {
    free(impl);
    return NULL;
  }
  mod = tvmrt_module_new(kind, impl);
  if (mod == NULL) {
    tvmrt_rx_exe_free(&impl->exe);
    free(impl);
    return NULL;
  }
  mod->lookup = exec_lookup;
  mod->finalize = exec_finalize;
  return mod;
}

tvmrt_module* tvmrt_rx_exec_load_blob(tvmrt_reader* r) { return load(r, "relax.VMExecutable"); }
tvmrt_module* tvmrt_rx_exec_load_blob_019(tvmrt_reader* r) { return load(r, "relax.Executable"); }

/* ---------------------------------------------------------------------------------- */
/* the VM's values from outside: TVM's runtime.* functions                             */

static int value_arg(TVMValue* args, int* codes, int n, int i, int kind, const char* fn,
                     rx_value* out) {
  if (i >= n || tvmrt_rx_from_packed(args[i], codes[i], 0, out) != 0) {
    if (i >= n) tvmrt_fail("InvalidArgumentError", "%s: missing argument %d", fn, i);
    return -1;
  }
  if (kind >= 0 && out->kind != kind) {
    tvmrt_fail("ArgumentTypeError", "%s: argument %d must be %s, got %s", fn, i,
               tvmrt_rx_kind_names[kind], tvmrt_rx_type_key(*out));
    tvmrt_rx_release(out);
    return -1;
  }
  return 0;
}

static void hand_out(rx_value v, TVMValue* ret, int* rc) {
  tvmrt_object* temp = NULL;
  if (v.kind == RX_STR) {
    ret->v_handle = v.v.obj;
    *rc = kTVMObjectHandle;
    return;
  }
  tvmrt_rx_to_packed(v, 0, ret, rc, &temp);
}

static int g_shape(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  int64_t dims[RT_MAX_NDIM * 8];
  rx_shape* s;
  int i;
  (void)self;
  if (n > (int)(sizeof(dims) / sizeof(dims[0])))
    return tvmrt_fail("InvalidArgumentError", "runtime.ShapeTuple: %d dimensions", n);
  for (i = 0; i < n; ++i) {
    if (codes[i] != kDLInt) return tvmrt_fail("ArgumentTypeError", "runtime.ShapeTuple takes ints");
    dims[i] = args[i].v_int64;
  }
  s = tvmrt_rx_shape_new(dims, (size_t)n);
  if (s == NULL) return -1;
  tvmrt_object_publish(&s->hdr); /* the caller's handle */
  ret->v_handle = &s->hdr;
  *rc = kTVMObjectHandle;
  return 0;
}

static int g_shape_size(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  rx_value v;
  (void)self;
  if (value_arg(args, codes, n, 0, RX_SHAPE, "runtime.GetShapeTupleSize", &v) != 0) return -1;
  ret->v_int64 = (int64_t)tvmrt_rx_shape(v)->ndim;
  *rc = kDLInt;
  tvmrt_rx_release(&v);
  return 0;
}

static int g_shape_elem(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  rx_value v;
  rx_shape* s;
  (void)self;
  if (value_arg(args, codes, n, 0, RX_SHAPE, "runtime.GetShapeTupleElem", &v) != 0) return -1;
  s = tvmrt_rx_shape(v);
  if (n < 2 || codes[1] != kDLInt || args[1].v_int64 < 0 || (uint64_t)args[1].v_int64 >= s->ndim) {
    tvmrt_rx_release(&v);
    return tvmrt_fail("IndexOutOfRangeError", "runtime.GetShapeTupleElem: index out of range");
  }
  ret->v_int64 = s->dims[args[1].v_int64];
  *rc = kDLInt;
  tvmrt_rx_release(&v);
  return 0;
}

static int g_string(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  rx_value v;
  (void)self;
  if (value_arg(args, codes, n, 0, RX_STR, "runtime.GetFFIString", &v) != 0) return -1;
  ret->v_str = tvmrt_rx_str(v)->data; /* the caller holds the string object */
  *rc = kTVMStr;
  tvmrt_rx_release(&v);
  return 0;
}

static int g_array(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  rx_tuple* t = tvmrt_rx_tuple_new((size_t)(n > 0 ? n : 0));
  int i;
  (void)self;
  if (t == NULL) return -1;
  for (i = 0; i < n; ++i) {
    if (tvmrt_rx_from_packed(args[i], codes[i], 0, &t->items[i]) != 0) {
      tvmrt_release(&t->hdr);
      return -1;
    }
  }
  ret->v_handle = &t->hdr;
  *rc = kTVMObjectHandle;
  return 0;
}

static int g_array_size(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  rx_value v;
  (void)self;
  if (value_arg(args, codes, n, 0, RX_TUPLE, "runtime.ArraySize", &v) != 0) return -1;
  ret->v_int64 = (int64_t)tvmrt_rx_tuple(v)->size;
  *rc = kDLInt;
  tvmrt_rx_release(&v);
  return 0;
}

static int g_array_item(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  rx_value v, item = {RX_NULL, 0, {0}};
  rx_tuple* t;
  (void)self;
  if (value_arg(args, codes, n, 0, RX_TUPLE, "runtime.ArrayGetItem", &v) != 0) return -1;
  t = tvmrt_rx_tuple(v);
  if (n < 2 || codes[1] != kDLInt || args[1].v_int64 < 0 || (uint64_t)args[1].v_int64 >= t->size) {
    tvmrt_rx_release(&v);
    return tvmrt_fail("IndexOutOfRangeError", "runtime.ArrayGetItem: index out of range");
  }
  tvmrt_rx_copy(&item, t->items[args[1].v_int64]);
  tvmrt_rx_release(&v);
  hand_out(item, ret, rc);
  return 0;
}

/* TVM's Map globals (src/runtime/container.cc): size, item by key, count of a key, and the
   items as an Array of key, value, key, value... */
static int map_arg(TVMValue* args, int* codes, int n, int want, const char* fn, rx_value* v) {
  if (n != want) {
    return tvmrt_fail("InvalidArgumentError", "%s takes %d argument%s, got %d", fn, want,
                      want == 1 ? "" : "s", n);
  }
  if (value_arg(args, codes, n, 0, RX_MAP, fn, v) != 0) return -1;
  if (want == 2 && codes[1] != kTVMStr && codes[1] != kTVMObjectHandle) {
    tvmrt_rx_release(v);
    return tvmrt_fail("ArgumentTypeError", "%s: the key must be a string, got type code %d", fn,
                      codes[1]);
  }
  return 0;
}

/* the pair index of a string key (a kTVMStr or a String object), or -1 */
static int64_t map_find(const rx_tuple* m, TVMValue key, int code) {
  const char* k = code == kTVMStr ? key.v_str : NULL;
  size_t i;
  if (k == NULL && tvmrt_object_live(key.v_handle, RT_MAGIC_RX_STR))
    k = ((rx_str*)key.v_handle)->data;
  for (i = 0; k != NULL && 2 * i < m->size; ++i) {
    if (strcmp(((rx_str*)m->items[2 * i].v.obj)->data, k) == 0) return (int64_t)i;
  }
  return -1;
}

static int g_map_size(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  rx_value v;
  (void)self;
  if (map_arg(args, codes, n, 1, "runtime.MapSize", &v) != 0) return -1;
  ret->v_int64 = (int64_t)(tvmrt_rx_map(v)->size / 2);
  *rc = kDLInt;
  tvmrt_rx_release(&v);
  return 0;
}

static int g_map_count(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  rx_value v;
  (void)self;
  if (map_arg(args, codes, n, 2, "runtime.MapCount", &v) != 0) return -1;
  ret->v_int64 = map_find(tvmrt_rx_map(v), args[1], codes[1]) >= 0;
  *rc = kDLInt;
  tvmrt_rx_release(&v);
  return 0;
}

static int g_map_item(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  rx_value v, item = {RX_NULL, 0, {0}};
  int64_t i;
  (void)self;
  if (map_arg(args, codes, n, 2, "runtime.MapGetItem", &v) != 0) return -1;
  if ((i = map_find(tvmrt_rx_map(v), args[1], codes[1])) < 0) {
    tvmrt_rx_release(&v);
    return tvmrt_fail("IndexOutOfRangeError",
                      "runtime.MapGetItem: cannot find the corresponding key in the Map");
  }
  tvmrt_rx_copy(&item, tvmrt_rx_map(v)->items[2 * i + 1]);
  tvmrt_rx_release(&v);
  hand_out(item, ret, rc);
  return 0;
}

static int g_map_items(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  rx_value v;
  rx_tuple *m, *t;
  size_t i;
  (void)self;
  if (map_arg(args, codes, n, 1, "runtime.MapItems", &v) != 0) return -1;
  m = tvmrt_rx_map(v);
  if ((t = tvmrt_rx_tuple_new(m->size)) == NULL) {
    tvmrt_rx_release(&v);
    return -1;
  }
  for (i = 0; i < m->size; ++i) tvmrt_rx_copy(&t->items[i], m->items[i]);
  tvmrt_rx_release(&v);
  ret->v_handle = &t->hdr;
  *rc = kTVMObjectHandle;
  return 0;
}

TVM_DLL int tvmrt_value_peek(void* obj, int64_t* size, const void** data) {
  *size = 0;
  *data = NULL;
  switch (tvmrt_object_live_magic(obj)) {
    case RT_MAGIC_RX_TUPLE: *size = (int64_t)((rx_tuple*)obj)->size; return TVMRT_VALUE_TUPLE;
    case RT_MAGIC_RX_SHAPE:
      *size = (int64_t)((rx_shape*)obj)->ndim;
      *data = ((rx_shape*)obj)->dims;
      return TVMRT_VALUE_SHAPE;
    case RT_MAGIC_RX_STR:
      *size = (int64_t)((rx_str*)obj)->len;
      *data = ((rx_str*)obj)->data;
      return TVMRT_VALUE_STR;
    default: return TVMRT_VALUE_OTHER;
  }
}

TVM_DLL int tvmrt_value_tuple_item(void* obj, int64_t i, TVMValue* value, int* code) {
  rx_tuple* t = (rx_tuple*)obj;
  rx_value item = {RX_NULL, 0, {0}};
  if (!tvmrt_object_live(obj, RT_MAGIC_RX_TUPLE))
    return tvmrt_fail("ArgumentTypeError", "tvmrt_value_tuple_item: %p is not a live tuple", obj);
  if (i < 0 || (uint64_t)i >= t->size)
    return tvmrt_fail("IndexOutOfRangeError", "tvmrt_value_tuple_item: index out of range");
  tvmrt_rx_copy(&item, t->items[i]);
  hand_out(item, value, code);
  return 0;
}

/* tvmrt.relax.kind(value): the RX_* kind of a value, or RX_KIND_RELAY_ADT (for the Python
   face, which turns each kind into its Python value) */
static int g_kind(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  rx_value v;
  (void)self;
  if (n >= 1 && codes[0] == kTVMObjectHandle && tvmrt_object_live(args[0].v_handle, RT_MAGIC_ADT)) {
    ret->v_int64 = RX_KIND_RELAY_ADT;
    *rc = kDLInt;
    return 0;
  }
  if (value_arg(args, codes, n, 0, -1, "tvmrt.relax.kind", &v) != 0) return -1;
  ret->v_int64 = v.kind;
  *rc = kDLInt;
  tvmrt_rx_release(&v);
  return 0;
}

/* tvmrt.retain(x): one more reference to a runtime object (the caller owns it) */
static int g_retain(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  rx_value v;
  (void)self;
  (void)ret;
  (void)rc;
  if (value_arg(args, codes, n, 0, -1, "tvmrt.retain", &v) != 0) return -1;
  if (!tvmrt_rx_is_object(v.kind)) tvmrt_rx_release(&v);
  return 0; /* the reference from_packed took stays with the caller */
}

static const struct {
  const char* name;
  tvmrt_fn fn;
} k_globals[] = {
    {"runtime.ShapeTuple", g_shape},
    {"runtime.GetShapeTupleSize", g_shape_size},
    {"runtime.GetShapeTupleElem", g_shape_elem},
    {"runtime.GetFFIString", g_string},
    {"runtime.Array", g_array},
    {"runtime.ArraySize", g_array_size},
    {"runtime.ArrayGetItem", g_array_item},
    {"runtime.MapSize", g_map_size},
    {"runtime.MapCount", g_map_count},
    {"runtime.MapGetItem", g_map_item},
    {"runtime.MapItems", g_map_items},
    {"tvmrt.relax.kind", g_kind},
    {"tvmrt.retain", g_retain},
};
#define NUM_GLOBALS (sizeof(k_globals) / sizeof(k_globals[0]))

tvmrt_func* tvmrt_rx_global(const char* name) {
  size_t i;
  for (i = 0; i < NUM_GLOBALS; ++i) {
    if (strcmp(k_globals[i].name, name) == 0) return tvmrt_func_new(k_globals[i].fn, NULL, NULL);
  }
  return NULL;
}

const char* tvmrt_rx_global_name(size_t i) { return i < NUM_GLOBALS ? k_globals[i].name : NULL; }
