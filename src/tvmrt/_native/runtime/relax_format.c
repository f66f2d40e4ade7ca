/*
 * A Relax VM executable's bytes (TVM's Executable::SaveToBinary / VMExecutable::SaveToBytes),
 * every era, read with the bounded reader:
 *
 *   u64 magic            ...151D; ...151E from TVM 0.23 (a memory-scope section follows)
 *   str version          "0.14" in every release: never trusted, the era decides
 *   vec<VMFuncInfo>      i32 kind, str name, i64 start, end, num_args, register_file_size,
 *                        vec<str> param_names
 *   [V2] u64 n, n x (i64 constant index, str scope)
 *   u64 n, n x (i32 tag, value)     the tags of the era (relax.h)
 *   vec<i64> instr_offset, vec<i64> instr_data
 *
 * Then every instruction of every VM function is checked once (opcode, field count,
 * registers, function and constant indexes, jump targets inside the function, no falling
 * off its end), so the run loop reads them without checks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relax.h"

const char* const tvmrt_rx_era_names[3] = {"TVM <= 0.20", "TVM 0.21", "TVM >= 0.22"};

static int fail_at(tvmrt_reader* r, const char* what, const char* msg) {
  return tvmrt_fail("ModuleLoadError", "%s: invalid Relax VM executable: %s at byte offset %zu",
                    what, msg, r->off);
}

static int read_i64(tvmrt_reader* r, int64_t* out, const char* field) {
  return tvmrt_read_u64(r, (uint64_t*)out, field);
}

static int read_i32(tvmrt_reader* r, int32_t* out, const char* field) {
  uint8_t b[4];
  if (tvmrt_read_bytes(r, b, 4, field) != 0) return -1;
  *out =
      (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24);
  return 0;
}

static int read_funcs(tvmrt_reader* r, rx_exe* exe, const char* what) {
  uint64_t n, i, k;
  /* a function is at least 4 + 8 + 5 * 8 + 8 bytes */
  if (tvmrt_read_count(r, &n, 60, "number of functions") != 0) return -1;
  if (n > RX_MAX_FUNCS) return fail_at(r, what, "more than 2^20 functions");
  exe->funcs = (rx_func_info*)calloc(n ? n : 1, sizeof(rx_func_info));
  if (exe->funcs == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot read %s", what);
  exe->num_funcs = (size_t)n;
  for (i = 0; i < n; ++i) {
    rx_func_info* f = &exe->funcs[i];
    uint64_t np;
    if (read_i32(r, &f->kind, "function kind") != 0 ||
        tvmrt_read_str(r, &f->name, NULL, "function name") != 0 ||
        read_i64(r, &f->start, "function start") != 0 ||
        read_i64(r, &f->end, "function end") != 0 ||
        read_i64(r, &f->num_args, "function arity") != 0 ||
        read_i64(r, &f->num_regs, "register file size") != 0 ||
        tvmrt_read_count(r, &np, 8, "number of parameter names") != 0) {
      return -1;
    }
    if (f->kind < RX_FUNC_PACKED || f->kind > RX_FUNC_VM_TIR) {
      return tvmrt_fail("ModuleLoadError",
                        "%s: function '%.100s' has kind %d; expected 0 (packed), 1 (vm) or 2 "
                        "(vm_tir)",
                        what, f->name, f->kind);
    }
    f->params = (char**)calloc(np ? np : 1, sizeof(char*));
    if (f->params == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot read %s", what);
    f->num_params = (size_t)np;
    for (k = 0; k < np; ++k) {
      if (tvmrt_read_str(r, &f->params[k], NULL, "parameter name") != 0) return -1;
    }
  }
  return 0;
}

/* >= 0.23: (constant index, scope) pairs, kept until the pool's size is known */
typedef struct {
  size_t n;
  int64_t* index;
  char** scope;
} scope_pairs;

static void pairs_free(scope_pairs* p) {
  size_t i;
  for (i = 0; i < p->n; ++i) free(p->scope[i]);
  free(p->index);
  free(p->scope);
  memset(p, 0, sizeof(*p));
}

static int read_scopes(tvmrt_reader* r, scope_pairs* out) {
  uint64_t n, i;
  if (tvmrt_read_count(r, &n, 16, "number of memory scopes") != 0) return -1;
  out->index = (int64_t*)calloc(n ? n : 1, sizeof(int64_t));
  out->scope = (char**)calloc(n ? n : 1, sizeof(char*));
  if (out->index == NULL || out->scope == NULL)
    return tvmrt_fail("DeviceOutOfMemoryError", "cannot read the memory scopes");
  for (i = 0; i < n; ++i, ++out->n) {
    if (read_i64(r, &out->index[i], "memory scope constant") != 0 ||
        tvmrt_read_str(r, &out->scope[i], NULL, "memory scope") != 0)
      return -1;
  }
  return 0;
}

/* one scope per constant (NULL where none is given) */
static int assign_scopes(rx_exe* exe, const scope_pairs* p, const char* what) {
  size_t i;
  if (p->n == 0) return 0;
  exe->const_scopes = (char**)calloc(exe->num_consts ? exe->num_consts : 1, sizeof(char*));
  if (exe->const_scopes == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "no memory");
  for (i = 0; i < p->n; ++i) {
    int64_t idx = p->index[i];
    if (idx < 0 || (uint64_t)idx >= exe->num_consts || exe->const_scopes[idx] != NULL) {
      return tvmrt_fail("ModuleLoadError",
                        "%s: invalid Relax VM executable: memory scope of constant %lld (the "
                        "pool has %zu, each given one scope at most)",
                        what, (long long)idx, exe->num_consts);
    }
    exe->const_scopes[idx] = strdup(p->scope[i]);
    if (exe->const_scopes[idx] == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "no memory");
  }
  return 0;
}

/* the kind of a constant tag in an era: RX_TENSOR, RX_DTYPE, RX_SHAPE, RX_STR, RX_INT,
   RX_FLOAT, or -1 */
static int tag_kind(int era, int32_t tag) {
  if (era == RX_ERA_LEGACY) {
    static const int k[] = {RX_TENSOR, RX_DTYPE, RX_SHAPE, RX_STR, RX_INT, RX_FLOAT};
    return tag >= 0 && tag < 6 ? k[tag] : -1;
  }
  switch (tag) {
    case 1: return RX_INT;
    case 3: return RX_FLOAT;
    case 5: return RX_DTYPE;
    case 65: return RX_STR;
    case 69: return era == RX_ERA_FFI ? RX_SHAPE : -1;
    case 70: return era == RX_ERA_FFI ? RX_TENSOR : -1;
    case 71: return era == RX_ERA_021 ? RX_SHAPE : -1;
    case 72: return era == RX_ERA_021 ? RX_TENSOR : -1;
    default: return -1;
  }
}

static int read_const(tvmrt_reader* r, int kind, rx_value* out) {
  uint64_t n;
  switch (kind) {
    case RX_TENSOR: {
      tvmrt_ndarray* a = NULL;
      if (tvmrt_read_tensor(r, &a) != 0) return -1;
      *out = tvmrt_rx_object(RX_TENSOR, &a->hdr);
      return 0;
    }
    case RX_DTYPE: {
      uint8_t b[4];
      if (tvmrt_read_bytes(r, b, 4, "data type constant") != 0) return -1;
      out->kind = RX_DTYPE;
      out->v.t.code = b[0];
      out->v.t.bits = b[1];
      out->v.t.lanes = (uint16_t)(b[2] | b[3] << 8);
      return 0;
    }
    case RX_SHAPE: {
      rx_shape* shape;
      int64_t* dims;
      uint64_t i;
      if (tvmrt_read_count(r, &n, 8, "shape constant size") != 0) return -1;
      dims = (int64_t*)malloc((size_t)(n ? n : 1) * sizeof(int64_t));
      if (dims == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot read a shape");
      for (i = 0; i < n; ++i) {
        if (read_i64(r, &dims[i], "shape constant") != 0) {
          free(dims);
          return -1;
        }
      }
      shape = tvmrt_rx_shape_new(dims, (size_t)n);
      free(dims);
      if (shape == NULL) return -1;
      *out = tvmrt_rx_object(RX_SHAPE, &shape->hdr);
      return 0;
    }
    case RX_STR: {
      rx_str* s;
      if (tvmrt_read_count(r, &n, 1, "string constant size") != 0) return -1;
      s = tvmrt_rx_str_new((const char*)r->data + r->off, (size_t)n);
      if (s == NULL) return -1;
      r->off += (size_t)n;
      *out = tvmrt_rx_object(RX_STR, &s->hdr);
      return 0;
    }
    case RX_INT: out->kind = RX_INT; return read_i64(r, &out->v.i, "int constant");
    default: /* RX_FLOAT */
      out->kind = RX_FLOAT;
      return tvmrt_read_bytes(r, &out->v.f, 8, "float constant");
  }
}

static int read_consts(tvmrt_reader* r, rx_exe* exe, const char* what) {
  uint64_t n, i;
  if (tvmrt_read_count(r, &n, 4, "number of constants") != 0) return -1;
  if (n > RX_MAX_CONSTS) return fail_at(r, what, "more than 2^24 constants");
  exe->consts = (rx_value*)calloc(n ? n : 1, sizeof(rx_value));
  exe->const_tags = (int32_t*)calloc(n ? n : 1, sizeof(int32_t));
  if (exe->consts == NULL || exe->const_tags == NULL)
    return tvmrt_fail("DeviceOutOfMemoryError", "cannot read %s", what);
  exe->num_consts = (size_t)n;
  for (i = 0; i < n; ++i) {
    int32_t tag;
    int kind;
    if (read_i32(r, &tag, "constant tag") != 0) return -1;
    kind = tag_kind(exe->era, tag);
    if (kind < 0) {
      return tvmrt_fail("ModuleLoadError",
                        "%s: invalid Relax VM executable: constant %llu has tag %d, which the "
                        "%s format does not define (byte offset %zu)",
                        what, (unsigned long long)i, (int)tag, tvmrt_rx_era_names[exe->era],
                        r->off - 4);
    }
    exe->const_tags[i] = tag;
    if (read_const(r, kind, &exe->consts[i]) != 0) return -1;
  }
  return 0;
}

static int read_i64_vec(tvmrt_reader* r, int64_t** out, size_t* n, const char* field) {
  uint64_t count;
  if (tvmrt_read_u64_vec(r, (uint64_t**)out, &count, field) != 0) return -1;
  *n = (size_t)count;
  return 0;
}

/* ---------------------------------------------------------------------------------- */
/* the code                                                                            */

static int bad_ins(const rx_exe* exe, const rx_func_info* f, int64_t pc, const char* what,
                   const char* msg) {
  (void)exe;
  return tvmrt_fail("ModuleLoadError",
                    "%s: invalid Relax VM executable: function '%.100s', instruction %lld: %s",
                    what, f->name, (long long)(pc - f->start), msg);
}

static int reg_ok(const rx_func_info* f, int64_t reg) {
  return (reg >= 0 && reg < f->num_regs) || reg == RX_VOID_REG || reg == RX_VM_REG;
}

static int check_function(const rx_exe* exe, const rx_func_info* f, const char* what) {
  int64_t pc;
  char msg[160];
  for (pc = f->start; pc < f->end; ++pc) {
    int64_t at = exe->offsets[pc], next;
    const int64_t* w;
    size_t avail;
    next = (size_t)pc + 1 < exe->num_code ? exe->offsets[pc + 1] : (int64_t)exe->num_words;
    if (at < 0 || next > (int64_t)exe->num_words || next <= at)
      return bad_ins(exe, f, pc, what, "its offset is outside the code or not increasing");
    w = exe->words + at;
    avail = (size_t)(next - at);
    switch (w[0]) {
      case RX_OP_CALL: {
        int64_t k, nargs;
        if (avail < 4) return bad_ins(exe, f, pc, what, "Call has fewer than 4 fields");
        nargs = w[3];
        if (nargs < 0 || nargs > RX_MAX_ARGS || (size_t)nargs > avail - 4) {
          snprintf(msg, sizeof(msg), "Call has %lld arguments in %zu fields (at most %d)",
                   (long long)nargs, avail - 4, RX_MAX_ARGS);
          return bad_ins(exe, f, pc, what, msg);
        }
        if (!reg_ok(f, w[1])) return bad_ins(exe, f, pc, what, "Call writes no register");
        if (w[2] < 0 || (size_t)w[2] >= exe->num_funcs) {
          snprintf(msg, sizeof(msg), "Call of function %lld (the table has %zu)", (long long)w[2],
                   exe->num_funcs);
          return bad_ins(exe, f, pc, what, msg);
        }
        for (k = 0; k < nargs; ++k) {
          int kind = rx_arg_kind(w[4 + k]);
          int64_t v = rx_arg_value(w[4 + k]);
          int ok = kind == RX_ARG_IMM || (kind == RX_ARG_REG && reg_ok(f, v)) ||
                   (kind == RX_ARG_CONST && v >= 0 && (size_t)v < exe->num_consts) ||
                   (kind == RX_ARG_FUNC && v >= 0 && (size_t)v < exe->num_funcs);
          if (!ok) {
            snprintf(msg, sizeof(msg), "argument %lld (kind %d, value %lld) names nothing",
                     (long long)k, kind, (long long)v);
            return bad_ins(exe, f, pc, what, msg);
          }
        }
        if (pc == f->end - 1) return bad_ins(exe, f, pc, what, "the function ends with a Call");
        break;
      }
      case RX_OP_RET:
        if (avail < 2 || !reg_ok(f, w[1]))
          return bad_ins(exe, f, pc, what, "Ret names no register");
        break;
      case RX_OP_GOTO:
        if (avail < 2 || w[1] < f->start - pc || w[1] >= f->end - pc || w[1] == 0)
          return bad_ins(exe, f, pc, what, "Goto jumps outside its function (or onto itself)");
        break;
      case RX_OP_IF:
        if (avail < 3 || !reg_ok(f, w[1])) return bad_ins(exe, f, pc, what, "If names no register");
        if (w[2] <= 1 || w[2] >= f->end - pc || pc + 1 >= f->end)
          return bad_ins(exe, f, pc, what, "If jumps outside its function");
        break;
      default:
        snprintf(msg, sizeof(msg), "opcode %lld is not Call (1), Ret (2), Goto (3) or If (4)",
                 (long long)w[0]);
        return bad_ins(exe, f, pc, what, msg);
    }
  }
  return 0;
}

static int check_code(rx_exe* exe, const char* what) {
  size_t i;
  for (i = 0; i < exe->num_funcs; ++i) {
    rx_func_info* f = &exe->funcs[i];
    if (f->kind == RX_FUNC_PACKED) continue;
    if (f->num_args < 0 || f->num_args > RX_MAX_ARGS || f->num_regs < 0 ||
        f->num_regs > RX_MAX_REGISTERS || f->num_regs < f->num_args + (f->kind == RX_FUNC_VM_TIR)) {
      return tvmrt_fail("ModuleLoadError",
                        "%s: invalid Relax VM executable: function '%.100s' takes %lld arguments "
                        "in %lld registers (at most %d arguments and %d registers)",
                        what, f->name, (long long)f->num_args, (long long)f->num_regs, RX_MAX_ARGS,
                        RX_MAX_REGISTERS);
    }
    if (f->num_params != 0 && f->num_params != (size_t)f->num_args) {
      return tvmrt_fail("ModuleLoadError",
                        "%s: invalid Relax VM executable: function '%.100s' takes %lld arguments "
                        "but names %zu parameters",
                        what, f->name, (long long)f->num_args, f->num_params);
    }
    if (f->kind == RX_FUNC_VM_TIR) continue;
    if (f->start < 0 || f->end <= f->start || (size_t)f->end > exe->num_code) {
      return tvmrt_fail("ModuleLoadError",
                        "%s: invalid Relax VM executable: function '%.100s' spans instructions "
                        "%lld to %lld of %zu",
                        what, f->name, (long long)f->start, (long long)f->end, exe->num_code);
    }
    if (check_function(exe, f, what) != 0) return -1;
  }
  return 0;
}

int tvmrt_rx_read(const uint8_t* data, size_t size, int era, const char* what, rx_exe* out) {
  tvmrt_reader r = {data, size, 0, what, 0, NULL};
  scope_pairs pairs = {0, NULL, NULL};
  memset(out, 0, sizeof(*out));
  out->era = era;
  if (tvmrt_read_u64(&r, &out->magic, "magic") != 0) goto fail;
  if (out->magic != RX_MAGIC_V1 && out->magic != RX_MAGIC_V2) {
    tvmrt_fail("ModuleLoadError",
               "%s: not a Relax VM executable: magic %#llx, expected %#llx or (TVM >= 0.23) "
               "%#llx",
               what, (unsigned long long)out->magic, RX_MAGIC_V1, RX_MAGIC_V2);
    goto fail;
  }
  if (out->magic == RX_MAGIC_V2 && era != RX_ERA_FFI) {
    tvmrt_fail("ModuleLoadError",
               "%s: a Relax VM executable of TVM >= 0.23 (magic %#llx) in a %s library; the "
               "file mixes eras",
               what, RX_MAGIC_V2, tvmrt_rx_era_names[era]);
    goto fail;
  }
  if (tvmrt_read_str(&r, &out->version, NULL, "version") != 0) goto fail;
  if (read_funcs(&r, out, what) != 0) goto fail;
  if (out->magic == RX_MAGIC_V2 && read_scopes(&r, &pairs) != 0) goto fail;
  if (read_consts(&r, out, what) != 0 || assign_scopes(out, &pairs, what) != 0) goto fail;
  if (read_i64_vec(&r, &out->offsets, &out->num_code, "instruction offsets") != 0 ||
      read_i64_vec(&r, &out->words, &out->num_words, "instruction data") != 0)
    goto fail;
  if (r.off != r.size) {
    tvmrt_fail("ModuleLoadError", "%s: invalid Relax VM executable: %zu bytes after the code", what,
               r.size - r.off);
    goto fail;
  }
  if (check_code(out, what) != 0) goto fail;
  pairs_free(&pairs);
  return 0;
fail:
  pairs_free(&pairs);
  tvmrt_rx_exe_free(out);
  return -1;
}

void tvmrt_rx_exe_free(rx_exe* exe) {
  size_t i, k;
  for (i = 0; i < exe->num_funcs; ++i) {
    free(exe->funcs[i].name);
    for (k = 0; exe->funcs[i].params != NULL && k < exe->funcs[i].num_params; ++k)
      free(exe->funcs[i].params[k]);
    free(exe->funcs[i].params);
  }
  free(exe->funcs);
  for (i = 0; exe->consts != NULL && i < exe->num_consts; ++i) {
    tvmrt_rx_release(&exe->consts[i]);
    if (exe->const_scopes != NULL) free(exe->const_scopes[i]);
  }
  free(exe->consts);
  free(exe->const_scopes);
  free(exe->const_tags);
  free(exe->version);
  free(exe->offsets);
  free(exe->words);
  memset(exe, 0, sizeof(*exe));
}

int tvmrt_rx_find_func(const rx_exe* exe, const char* name) {
  size_t i;
  for (i = 0; i < exe->num_funcs; ++i) {
    if (strcmp(exe->funcs[i].name, name) == 0) return (int)i;
  }
  return -1;
}
