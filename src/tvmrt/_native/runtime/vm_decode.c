/*
 * Every operand of a Relay VM executable checked at load, before anything runs, as the
 * Python reader's decode.py: every register below its function's register count (the stale
 * pointer of a shaped AllocStorage excepted, which is never read), every constant, function,
 * kernel and device index present, every jump inside its function, every dtype one tvmrt
 * holds, every static allocation sized, and no path off a function's end (its last
 * instruction is Ret, Goto, If or Fatal). Each instruction is decoded into a vm_ins once.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vm.h"

typedef struct {
  const vm_exe* exe;
  const vm_func* fn;
  const char* what;
  size_t pc;
  const int64_t* f; /* the fields */
} checker;

static int ck_fail(const checker* ck, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static int ck_fail(const checker* ck, const char* fmt, ...) {
  char msg[512];
  va_list ap;
  int op = (int)ck->fn->words[ck->fn->starts[ck->pc]];
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  return tvmrt_fail("ModuleLoadError", "%s: function '%.100s', instruction %zu (%s): %s", ck->what,
                    ck->fn->name, ck->pc, tvmrt_vm_opcode_names[op], msg);
}

static int reg(const checker* ck, int64_t v, const char* role, int32_t* out) {
  if (v < 0 || v >= ck->fn->num_regs) {
    return ck_fail(ck, "%s register %lld is out of range: the function has %lld registers", role,
                   (long long)v, (long long)ck->fn->num_regs);
  }
  *out = (int32_t)v;
  return 0;
}

static int index_in(const checker* ck, int64_t v, size_t size, const char* role) {
  if (v < 0 || (uint64_t)v >= size) {
    return ck_fail(ck, "%s %lld is out of range: expected 0 to %lld", role, (long long)v,
                   (long long)size - 1);
  }
  return 0;
}

static int target(const checker* ck, int64_t off) {
  int64_t to = (int64_t)ck->pc + off;
  if (off == 0 || off < -(int64_t)ck->fn->num_code || to < 0 || to >= (int64_t)ck->fn->num_code) {
    return ck_fail(ck,
                   "jump offset %lld lands on instruction %lld, outside 0 to %lld (or on itself)",
                   (long long)off, (long long)to, (long long)ck->fn->num_code - 1);
  }
  return 0;
}

static int dtype(const checker* ck, const int64_t* f, DLDataType* out) {
  int64_t code = f[0], bits = f[1], lanes = f[2];
  int ok = 0;
  if (code >= 0 && code < 256 && bits > 0 && bits < 256 && lanes > 0 && lanes < 65536) {
    switch (code) {
      case kDLInt: ok = bits == 8 || bits == 16 || bits == 32 || bits == 64; break;
      case kDLUInt: ok = bits == 1 || bits == 8 || bits == 16 || bits == 32 || bits == 64; break;
      case kDLFloat: ok = bits == 16 || bits == 32 || bits == 64; break;
      case kDLBfloat: ok = bits == 16; break;
      case 6: ok = bits == 8; break; /* kDLBool */
      default: ok = 0;
    }
  }
  if (!ok) {
    return ck_fail(ck, "dtype (code=%lld, bits=%lld, lanes=%lld) is invalid or unsupported",
                   (long long)code, (long long)bits, (long long)lanes);
  }
  out->code = (uint8_t)code;
  out->bits = (uint8_t)bits;
  out->lanes = (uint16_t)lanes;
  if (code == 6) out->code = kDLUInt, out->bits = 1; /* bool, as TVM's (1, 1, 1) */
  return 0;
}

/* a static shape: its dims copied into ins, its byte count into *nbytes */
static int shape(const checker* ck, const int64_t* dims, int64_t ndim, DLDataType t, vm_ins* ins,
                 int64_t* nbytes) {
  int64_t i, count = 1, item = (int64_t)((t.bits + 7) / 8) * t.lanes;
  if (ndim > RT_MAX_NDIM) {
    return ck_fail(ck, "shape has %lld dimensions, more than %d", (long long)ndim, RT_MAX_NDIM);
  }
  for (i = 0; i < ndim; ++i) {
    if (dims[i] < 0) return ck_fail(ck, "shape has a negative dimension %lld", (long long)dims[i]);
    if (dims[i] != 0 && count > VM_MAX_STATIC_BYTES / dims[i]) count = VM_MAX_STATIC_BYTES + 1;
    else count *= dims[i];
  }
  if (count > VM_MAX_STATIC_BYTES / item) { /* in 64 bits: size_t may have 32 */
    return ck_fail(ck, "a static shape of %lld dimensions needs more than %lld bytes",
                   (long long)ndim, (long long)VM_MAX_STATIC_BYTES);
  }
  ins->ndim = (int32_t)ndim;
  ins->shape = (int64_t*)malloc((size_t)(ndim ? ndim : 1) * sizeof(int64_t));
  if (ins->shape == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate a shape");
  if (ndim > 0) memcpy(ins->shape, dims, (size_t)ndim * sizeof(int64_t));
  *nbytes = count * item;
  return 0;
}

static int regs(const checker* ck, const int64_t* f, int64_t n, const char* role, vm_ins* ins) {
  int64_t i;
  ins->nargs = (int32_t)n;
  ins->args = (int32_t*)malloc((size_t)(n ? n : 1) * sizeof(int32_t));
  if (ins->args == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate operands");
  for (i = 0; i < n; ++i) {
    if (reg(ck, f[i], role, &ins->args[i]) != 0) return -1;
  }
  return 0;
}

static int decode(checker* ck, vm_ins* ins) {
  const int64_t* f = ck->f;
  const vm_exe* exe = ck->exe;
  size_t nf = ck->fn->lengths[ck->pc];
  int op = ins->op;
  ins->dst = ins->r0 = ins->r1 = ins->r2 = -1;
  switch (op) {
    case VM_MOVE:
      return reg(ck, f[0], "source", &ins->r0) || reg(ck, f[1], "destination", &ins->dst);
    case VM_RET: return reg(ck, f[0], "result", &ins->r0);
    case VM_INVOKE:
    case VM_ALLOC_CLOSURE:
      if (index_in(ck, f[0], exe->num_funcs, "function index") != 0) return -1;
      ins->imm = f[0];
      if (regs(ck, f + 3, (int64_t)nf - 3, "argument", ins) != 0) return -1;
      if (op == VM_INVOKE && (size_t)ins->nargs != exe->funcs[f[0]].num_params) {
        return ck_fail(ck, "calls '%.100s' with %d arguments, it takes %zu", exe->funcs[f[0]].name,
                       ins->nargs, exe->funcs[f[0]].num_params);
      }
      return reg(ck, f[2], "destination", &ins->dst);
    case VM_INVOKE_CLOSURE:
      return reg(ck, f[0], "closure", &ins->r0) ||
             regs(ck, f + 3, (int64_t)nf - 3, "argument", ins) ||
             reg(ck, f[2], "destination", &ins->dst);
    case VM_INVOKE_PACKED:
      if (index_in(ck, f[0], exe->num_prims, "kernel index") != 0) return -1;
      if (f[2] < 0 || f[2] > f[1]) {
        return ck_fail(ck, "output_size %lld is not between 0 and arity %lld", (long long)f[2],
                       (long long)f[1]);
      }
      ins->imm = f[0];
      ins->imm2 = f[2];
      return regs(ck, f + 3, (int64_t)nf - 3, "argument", ins);
    case VM_ALLOC_TENSOR:
      return dtype(ck, f + 2, &ins->dtype) || shape(ck, f + 7, f[5], ins->dtype, ins, &ins->imm) ||
             reg(ck, f[0], "storage", &ins->r0) || reg(ck, f[1], "offset", &ins->r1) ||
             reg(ck, f[6], "destination", &ins->dst);
    case VM_ALLOC_TENSOR_REG:
      return dtype(ck, f + 3, &ins->dtype) || reg(ck, f[0], "storage", &ins->r0) ||
             reg(ck, f[1], "offset", &ins->r1) || reg(ck, f[2], "shape", &ins->r2) ||
             reg(ck, f[6], "destination", &ins->dst);
    case VM_ALLOC_ADT:
      if (f[0] < INT32_MIN || f[0] > INT32_MAX) {
        return ck_fail(ck, "constructor tag %lld does not fit an int32", (long long)f[0]);
      }
      ins->imm = f[0];
      return regs(ck, f + 3, (int64_t)nf - 3, "field", ins) ||
             reg(ck, f[2], "destination", &ins->dst);
    case VM_GET_FIELD:
      if (f[1] < 0) return ck_fail(ck, "field index %lld is negative", (long long)f[1]);
      ins->imm = f[1];
      return reg(ck, f[0], "object", &ins->r0) || reg(ck, f[2], "destination", &ins->dst);
    case VM_IF:
      ins->imm = f[2];
      ins->imm2 = f[3];
      return reg(ck, f[0], "test", &ins->r0) || reg(ck, f[1], "target", &ins->r1) ||
             target(ck, f[2]) || target(ck, f[3]);
    case VM_LOAD_CONST:
      ins->imm = f[0];
      return index_in(ck, f[0], exe->num_consts, "constant index") ||
             index_in(ck, f[1], exe->num_devs, "virtual device index") ||
             reg(ck, f[2], "destination", &ins->dst);
    case VM_GOTO: ins->imm = f[0]; return target(ck, f[0]);
    case VM_GET_TAG:
      return reg(ck, f[0], "object", &ins->r0) || reg(ck, f[1], "destination", &ins->dst);
    case VM_LOAD_CONSTI: ins->imm = f[0]; return reg(ck, f[1], "destination", &ins->dst);
    case VM_FATAL: return 0;
    case VM_ALLOC_STORAGE:
      if (dtype(ck, f + 2, &ins->dtype) != 0 ||
          index_in(ck, f[5], exe->num_devs, "virtual device index") != 0) {
        return -1;
      }
      ins->dev = (int32_t)f[5];
      if (f[6] > 0) { /* a static shape: field 0 is a stale pointer (never read) */
        int64_t a = (int64_t)((ins->dtype.bits + 7) / 8) * ins->dtype.lanes;
        if (shape(ck, f + 8, f[6], ins->dtype, ins, &ins->imm) != 0) return -1;
        ins->imm2 = a > 64 ? a : 64;
      } else {
        ins->imm = -1;
        ins->imm2 = f[1];
        if (f[1] <= 0 || f[1] > 4096 || (f[1] & (f[1] - 1)) != 0) {
          return ck_fail(ck, "alignment %lld is not a power of two up to 4096", (long long)f[1]);
        }
        if (reg(ck, f[0], "size", &ins->r0) != 0) return -1;
      }
      return reg(ck, f[7], "destination", &ins->dst);
    case VM_SHAPE_OF:
      return reg(ck, f[0], "tensor", &ins->r0) || reg(ck, f[1], "destination", &ins->dst);
    case VM_RESHAPE_TENSOR:
      return reg(ck, f[0], "tensor", &ins->r0) || reg(ck, f[1], "shape", &ins->r1) ||
             reg(ck, f[2], "destination", &ins->dst);
    case VM_DEVICE_COPY:
      ins->imm = f[1];
      ins->imm2 = f[2];
      return index_in(ck, f[1], exe->num_devs, "source device index") ||
             index_in(ck, f[2], exe->num_devs, "destination device index") ||
             reg(ck, f[0], "source", &ins->r0) || reg(ck, f[3], "destination", &ins->dst);
    default: return reg(ck, f[0], "register", &ins->r0); /* KillRegister */
  }
}

static int decode_function(vm_exe* exe, vm_func* fn, const char* what) {
  checker ck = {exe, fn, what, 0, NULL};
  size_t i;
  int last;
  if (fn->num_params > (size_t)fn->num_regs) {
    return tvmrt_fail("ModuleLoadError",
                      "%s: function '%.100s' has %zu params but only %lld registers", what,
                      fn->name, fn->num_params, (long long)fn->num_regs);
  }
  for (i = 0; i < fn->num_params; ++i) {
    if (fn->param_devs[i] < 0 || (uint64_t)fn->param_devs[i] >= exe->num_devs) {
      return tvmrt_fail(
          "ModuleLoadError",
          "%s: function '%.100s' param %zu is on virtual device %lld, expected 0 to %zu", what,
          fn->name, i, (long long)fn->param_devs[i], exe->num_devs - 1);
    }
  }
  fn->code = (vm_ins*)calloc(fn->num_code, sizeof(vm_ins));
  if (fn->code == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate decoded code");
  for (i = 0; i < fn->num_code; ++i) {
    ck.pc = i;
    ck.f = fn->words + fn->starts[i] + 1;
    fn->code[i].op = (int32_t)fn->words[fn->starts[i]];
    if (decode(&ck, &fn->code[i]) != 0) return -1;
  }
  last = fn->code[fn->num_code - 1].op;
  if (last != VM_RET && last != VM_GOTO && last != VM_IF && last != VM_FATAL) {
    ck.pc = fn->num_code - 1;
    return ck_fail(&ck, "the function's last instruction must be Ret, Goto, If or Fatal");
  }
  return 0;
}

int tvmrt_vm_find_func(const vm_exe* exe, const char* name) {
  size_t i;
  for (i = 0; i < exe->num_funcs; ++i) {
    if (exe->funcs[i].name != NULL && strcmp(exe->funcs[i].name, name) == 0) {
      return (int)i;
    }
  }
  return -1;
}

int tvmrt_vm_decode(vm_exe* exe, const char* what) {
  size_t i;
  for (i = 0; i < exe->num_consts; ++i) {
    if (exe->const_devs[i] < 0 || (uint64_t)exe->const_devs[i] >= exe->num_devs) {
      return tvmrt_fail("ModuleLoadError",
                        "%s: constant %zu is on virtual device %lld, expected 0 to %zu", what, i,
                        (long long)exe->const_devs[i], exe->num_devs - 1);
    }
  }
  for (i = 0; i < exe->num_funcs; ++i) {
    if (decode_function(exe, &exe->funcs[i], what) != 0) return -1;
  }
  return 0;
}
