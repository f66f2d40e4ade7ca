/*
 * The Relay VM's run loop (TVM's VirtualMachine::RunLoop) over decoded code. Registers hold
 * references to arrays, ADTs, closures or storages (or NULL). Calls push a frame on an
 * explicit stack, so endless recursion ends at max_frames with an error, and an endless loop
 * at max_steps (calls weighed by their register files, backward jumps, and the arguments
 * AllocADT, AllocClosure and InvokePacked copy). The other instructions are vm_step.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vm.h"

typedef struct {
  const vm_func* fn;
  tvmrt_object** regs;
  size_t pc;
  int32_t dst;
} frame;

/* a register file's charge to the live-bytes budget (while the budget is on) */
static size_t regs_bytes(const vm_func* fn) {
  return VM_CELL_BYTES(0, (size_t)(fn->num_regs ? fn->num_regs : 1));
}

static void regs_free(vm_state* vm, tvmrt_object** regs, const vm_func* fn) {
  int64_t i;
  if (regs == NULL) return;
  for (i = 0; i < fn->num_regs; ++i) tvmrt_release(regs[i]);
  free(regs);
  tvmrt_vm_uncharge(vm->pool, vm->regs_charged ? regs_bytes(fn) : 0);
}

/* steps weigh what they cost: a call its callee's register file (allocated, zeroed and
   released: at least 1), a backward jump 1, an AllocADT, AllocClosure or InvokePacked its
   argument count (copied each time), so a loop of a few small instructions in code.ro
   cannot run for hours under the default budget */
static int too_many_steps(const vm_state* vm, int64_t* steps, int64_t cost) {
  *steps += cost;
  if (vm->limits.max_steps > 0 && *steps > vm->limits.max_steps) {
    return tvmrt_fail("InvalidArgumentError",
                      "invoke ran past its budget of %lld steps (TVMRT_VM_MAX_STEPS)",
                      (long long)vm->limits.max_steps);
  }
  return 0;
}

static tvmrt_object** new_regs(vm_state* vm, const vm_func* fn) {
  tvmrt_object** regs;
  size_t charged = 0;
  char what[96];
  snprintf(what, sizeof(what), "a register file of %lld registers (function '%.40s')",
           (long long)fn->num_regs, fn->name);
  if (vm->regs_charged && tvmrt_vm_charge(vm->pool, regs_bytes(fn), what, &charged) != 0)
    return NULL;
  regs = (tvmrt_object**)calloc((size_t)(fn->num_regs ? fn->num_regs : 1), sizeof(void*));
  if (regs == NULL) {
    tvmrt_vm_uncharge(vm->pool, charged);
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate %lld registers", (long long)fn->num_regs);
  }
  return regs;
}

/* the callee's registers, its arguments (closure fields first) retained in them */
static tvmrt_object** call_regs(vm_state* vm, const vm_ins* ins, tvmrt_object** regs,
                                const vm_func** callee) {
  const vm_closure* c = NULL;
  tvmrt_object** out;
  size_t nfree = 0, i;
  if (ins->op == VM_INVOKE) {
    *callee = &vm->exe->funcs[ins->imm];
  } else {
    c = (const vm_closure*)regs[ins->r0];
    if (c == NULL || c->hdr.magic != RT_MAGIC_VM_CLOSURE) {
      tvmrt_fail("ArgumentTypeError", "closure register %d holds %s", ins->r0,
                 tvmrt_vm_kind(regs[ins->r0]));
      return NULL;
    }
    *callee = &vm->exe->funcs[c->func];
    nfree = c->size;
    if (nfree + (size_t)ins->nargs != (*callee)->num_params) {
      tvmrt_fail("InvalidArgumentError", "closure of '%.100s' called with %zu values, it takes %zu",
                 (*callee)->name, nfree + (size_t)ins->nargs, (*callee)->num_params);
      return NULL;
    }
  }
  out = new_regs(vm, *callee);
  if (out == NULL) return NULL;
  for (i = 0; i < nfree; ++i) out[i] = c->fields[i];
  for (i = 0; i < (size_t)ins->nargs; ++i) out[nfree + i] = regs[ins->args[i]];
  for (i = 0; i < nfree + (size_t)ins->nargs; ++i) tvmrt_retain(out[i]);
  return out;
}

static int with_place(const vm_func* fn, size_t pc) {
  const char* kind = "";
  const char* msg = tvmrt_take_last_error(&kind);
  char k[64], m[1536];
  snprintf(k, sizeof(k), "%s", kind);
  snprintf(m, sizeof(m), "%s", msg != NULL ? msg : "unknown error");
  return tvmrt_fail(k, "%s (in VM function '%.100s' at instruction %zu)", m, fn->name, pc);
}

int tvmrt_vm_run(vm_state* vm, int64_t index, tvmrt_object* const* args, size_t nargs,
                 tvmrt_object** out) {
  const vm_func* fn = &vm->exe->funcs[index];
  frame* frames = NULL;
  size_t depth = 0, cap = 0, pc = 0, i;
  int64_t steps = 0;
  tvmrt_object** regs;
  *out = NULL;
  if (nargs != fn->num_params) {
    return tvmrt_fail("InvalidArgumentError", "function '%.100s' takes %zu arguments, got %zu",
                      fn->name, fn->num_params, nargs);
  }
  vm->regs_charged = vm->limits.max_live_bytes >= 0; /* the same for the whole invoke */
  regs = new_regs(vm, fn);
  if (regs == NULL) return -1;
  for (i = 0; i < nargs; ++i) {
    regs[i] = args[i];
    tvmrt_retain(regs[i]);
  }
  for (;;) {
    const vm_ins* ins = &fn->code[pc];
    switch (ins->op) {
      case VM_RET: {
        tvmrt_object* value = regs[ins->r0];
        regs[ins->r0] = NULL;
        regs_free(vm, regs, fn);
        if (depth == 0) {
          free(frames);
          *out = value;
          return 0;
        }
        --depth;
        fn = frames[depth].fn;
        regs = frames[depth].regs;
        pc = frames[depth].pc;
        tvmrt_vm_set_reg(regs, frames[depth].dst, value);
        continue;
      }
      case VM_INVOKE:
      case VM_INVOKE_CLOSURE: {
        const vm_func* callee = NULL;
        tvmrt_object** callee_regs;
        if ((int64_t)depth >= vm->limits.max_frames) {
          tvmrt_fail("InvalidArgumentError",
                     "the call stack is deeper than %lld frames (endless "
                     "recursion? raise TVMRT_VM_MAX_FRAMES for a deeper one)",
                     (long long)vm->limits.max_frames);
          goto fail;
        }
        callee_regs = call_regs(vm, ins, regs, &callee);
        if (callee_regs == NULL) goto fail;
        if (too_many_steps(vm, &steps, callee->num_regs > 1 ? callee->num_regs : 1) != 0) {
          regs_free(vm, callee_regs, callee);
          goto fail;
        }
        if (depth == cap) {
          size_t c = cap ? cap * 2 : 8;
          frame* grown = (frame*)realloc(frames, c * sizeof(frame));
          if (grown == NULL) {
            regs_free(vm, callee_regs, callee);
            tvmrt_fail("DeviceOutOfMemoryError", "cannot grow the call stack");
            goto fail;
          }
          frames = grown;
          cap = c;
        }
        frames[depth].fn = fn;
        frames[depth].regs = regs;
        frames[depth].pc = pc + 1;
        frames[depth].dst = ins->dst;
        ++depth;
        fn = callee;
        regs = callee_regs;
        pc = 0;
        continue;
      }
      case VM_IF:
      case VM_GOTO: {
        int64_t jump = ins->imm;
        if (ins->op == VM_IF) {
          int64_t a, b;
          if (tvmrt_vm_scalar_int(regs[ins->r0], "test", ins->r0, &a) != 0 ||
              tvmrt_vm_scalar_int(regs[ins->r1], "target", ins->r1, &b) != 0) {
            goto fail;
          }
          if ((int32_t)a != (int32_t)b) jump = ins->imm2;
        }
        if (jump < 0 && too_many_steps(vm, &steps, 1) != 0) goto fail;
        pc = (size_t)((int64_t)pc + jump);
        continue;
      }
      default:
        if ((ins->op == VM_ALLOC_ADT || ins->op == VM_ALLOC_CLOSURE ||
             ins->op == VM_INVOKE_PACKED) &&
            ins->nargs > 0 && too_many_steps(vm, &steps, ins->nargs) != 0)
          goto fail;
        if (tvmrt_vm_step(vm, ins, regs) != 0) goto fail;
        ++pc;
    }
  }
fail:
  with_place(fn, pc);
  regs_free(vm, regs, fn);
  while (depth > 0) {
    --depth;
    regs_free(vm, frames[depth].regs, frames[depth].fn);
  }
  free(frames);
  return -1;
}
