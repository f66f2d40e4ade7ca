/*
 * The Relax VM's run loop (TVM's VirtualMachineImpl::RunLoop and RunInstrCall), and the calls
 * every part of the VM makes: of a VM function, a closure, a builtin or a packed function.
 *
 * A call of a VM function (directly, or through a closure of this VM and invoke_closure)
 * pushes a frame and stays in the loop, so a deep or recursive executable grows the frame
 * list, never the C stack; the frames are bounded (max_frames), and so are the steps of one
 * invoke, each weighing what it costs: 1, plus its arguments, plus the registers of a frame
 * it opens. Register files are charged to the VM's live-bytes budget while they live.
 * Everything here reads instructions that relax_format.c checked when it loaded them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "relax.h"

#define SMALL_ARGS 16

typedef struct {
  int64_t func;    /* the function index */
  int64_t pc;      /* the next instruction */
  int64_t ret_reg; /* where the caller wants the result (RX_VOID_REG: nowhere) */
  int64_t via;     /* the pool index the caller called (-1: the invoke's own frame) */
  int64_t nregs;
  rx_value* regs;
} frame;

rx_vm* tvmrt_rx_context(rx_vm* vm, rx_value ctx, const char* what) {
  if (ctx.kind != RX_HANDLE || ctx.v.p != (void*)vm) {
    tvmrt_fail("ArgumentTypeError",
               "%s: the first argument must be the VM context (the %%vm register), got %s", what,
               tvmrt_rx_type_key(ctx));
    return NULL;
  }
  return vm;
}

/* ---------------------------------------------------------------------------------- */
/* tensors and copies                                                                  */

static int pool_index(rx_vm* vm, DLDevice dev) {
  size_t i;
  for (i = 0; i < vm->num_devices; ++i) {
    if (vm->devices[i].device_type == dev.device_type && vm->devices[i].device_id == dev.device_id)
      return (int)i;
  }
  return -1;
}

int tvmrt_rx_empty(rx_vm* vm, const int64_t* shape, int ndim, DLDataType dtype, DLDevice dev,
                   rx_value* out) {
  DLTensor probe;
  size_t nbytes;
  int at = pool_index(vm, dev);
  rx_storage* st;
  tvmrt_ndarray* a;
  memset(&probe, 0, sizeof(probe));
  probe.ndim = ndim;
  probe.shape = (int64_t*)shape;
  probe.dtype = dtype;
  if (ndim < 0 || ndim > RT_MAX_NDIM || tvmrt_tensor_nbytes(&probe, &nbytes) != 0) {
    return tvmrt_fail("ArrayError", "a tensor of %d dimensions with a negative or too large one",
                      ndim);
  }
  if (at < 0) {
    return tvmrt_fail("DeviceUnavailableError",
                      "the Relax VM has no device of type %d, id %d (it was initialised with "
                      "%zu devices)",
                      dev.device_type, dev.device_id, vm->num_devices);
  }
  st = tvmrt_rx_storage_alloc(vm->pools[at], nbytes, NULL);
  if (st == NULL) return -1;
  probe.data = st->data;
  probe.device = dev;
  a = tvmrt_ndarray_view(&probe, &st->hdr);
  tvmrt_release(&st->hdr); /* the view keeps it */
  if (a == NULL) return -1;
  *out = tvmrt_rx_object(RX_TENSOR, &a->hdr);
  return 0;
}

static int to_device(rx_vm* vm, rx_value in, DLDevice dev, rx_value* out, int depth);

int tvmrt_rx_to_device(rx_vm* vm, rx_value in, DLDevice dev, rx_value* out) {
  return to_device(vm, in, dev, out, 0);
}

static int to_device(rx_vm* vm, rx_value in, DLDevice dev, rx_value* out, int depth) {
  tvmrt_ndarray* a = tvmrt_rx_tensor(in);
  rx_tuple* t = tvmrt_rx_tuple(in);
  out->kind = RX_NULL;
  if (a != NULL) {
    if (a->dl.device.device_type == dev.device_type && a->dl.device.device_id == dev.device_id) {
      tvmrt_rx_copy(out, in);
      return 0;
    }
    if (tvmrt_rx_empty(vm, a->dl.shape, a->dl.ndim, a->dl.dtype, dev, out) != 0) return -1;
    if (TVMArrayCopyFromTo(&a->dl, &tvmrt_rx_tensor(*out)->dl, NULL) != 0) {
      tvmrt_rx_release(out);
      return -1;
    }
    return 0;
  }
  if (t != NULL) {
    rx_tuple* copy;
    size_t i;
    if (depth >= RX_MAX_NESTING) {
      return tvmrt_fail("InvalidArgumentError",
                        "a tuple nested more than %d levels deep cannot be copied to a device",
                        RX_MAX_NESTING);
    }
    if ((copy = tvmrt_rx_tuple_new(t->size)) == NULL) return -1;
    for (i = 0; i < t->size; ++i) {
      if (to_device(vm, t->items[i], dev, &copy->items[i], depth + 1) != 0) {
        tvmrt_release(&copy->hdr);
        return -1;
      }
    }
    *out = tvmrt_rx_object(RX_TUPLE, &copy->hdr);
    return 0;
  }
  tvmrt_rx_copy(out, in);
  return 0;
}

/* ---------------------------------------------------------------------------------- */
/* calls out of the loop                                                               */

/* a packed function with VM values: arguments converted, the return taken */
static int call_packed(rx_vm* vm, tvmrt_func* f, const rx_value* head, int nhead,
                       const rx_value* args, int n, const rx_value* tail, int ntail,
                       rx_value* ret) {
  TVMValue small_v[SMALL_ARGS], rv;
  int small_c[SMALL_ARGS], total = nhead + n + ntail, i, rc, rcode = kTVMNullptr;
  TVMValue* values = small_v;
  int* codes = small_c;
  tvmrt_object* temps[4];
  int ntemp = 0;
  if (total > SMALL_ARGS) {
    values = (TVMValue*)malloc((size_t)total * sizeof(TVMValue));
    codes = (int*)malloc((size_t)total * sizeof(int));
    if (values == NULL || codes == NULL) {
      free(values);
      free(codes);
      return tvmrt_fail("DeviceOutOfMemoryError", "cannot pass %d arguments", total);
    }
  }
  for (i = 0; i < total; ++i) {
    const rx_value* v = i < nhead       ? &head[i]
                        : i < nhead + n ? &args[i - nhead]
                                        : &tail[i - nhead - n];
    tvmrt_object* temp = NULL;
    tvmrt_rx_to_packed(*v, vm != NULL ? vm->exe->era : 0, &values[i], &codes[i], &temp);
    if (temp != NULL && ntemp < 4) temps[ntemp++] = temp;
  }
  rv.v_int64 = 0;
  rc = tvmrt_func_call(f, values, codes, total, &rv, &rcode);
  for (i = 0; i < ntemp; ++i) tvmrt_release(temps[i]);
  if (values != small_v) {
    free(values);
    free(codes);
  }
  if (rc != 0) return -1;
  ret->kind = RX_NULL;
  return tvmrt_rx_from_packed(rv, rcode, 1, ret);
}

static int run(rx_vm* vm, int64_t func, const rx_value* args, int n, const rx_value* bound,
               int nbound, rx_value* ret);

/* a closure, function value or pool index called with args (not in the loop) */
int tvmrt_rx_call_value(rx_vm* vm, rx_value callee, rx_value* args, int n, rx_value* ret) {
  ret->kind = RX_NULL;
  if (callee.kind == RX_CLOSURE) {
    rx_closure* c = (rx_closure*)callee.v.obj;
    int rc;
    rx_value out = {RX_NULL, 0, {0}};
    if (c->packed != NULL) {
      rc = call_packed(vm, c->packed, NULL, 0, args, n, c->bound, (int)c->nbound, &out);
    } else if (c->owner != vm->id) {
      return tvmrt_fail("InvalidArgumentError",
                        "closure '%.64s' was made by another Relax VM; a closure runs only on "
                        "the VM that made it",
                        c->name);
    } else {
      rc = run(vm, c->func, args, n, c->bound, (int)c->nbound, &out);
    }
    if (rc != 0) return -1;
    if (c->discard_return) tvmrt_rx_release(&out);
    *ret = out;
    return 0;
  }
  if (callee.kind == RX_FUNC) {
    return call_packed(vm, (tvmrt_func*)callee.v.obj, NULL, 0, args, n, NULL, 0, ret);
  }
  return tvmrt_fail("ArgumentTypeError", "cannot call %s: expected a closure or a function",
                    tvmrt_rx_type_key(callee));
}

int tvmrt_rx_invoke(rx_vm* vm, int64_t func, rx_value* args, int n, rx_value* ret) {
  return run(vm, func, args, n, NULL, 0, ret);
}

/* ---------------------------------------------------------------------------------- */
/* the loop                                                                            */

typedef struct {
  frame* frames;
  size_t depth, cap;
} stack;

static int charge_regs(rx_vm* vm, int64_t nregs, int sign) {
  return tvmrt_rx_charge(vm->pools[vm->num_devices - 1], sign * nregs * (int64_t)sizeof(rx_value),
                         "a register file");
}

static void pop(rx_vm* vm, stack* s) {
  frame* f = &s->frames[--s->depth];
  int64_t i;
  for (i = 0; i < f->nregs; ++i) tvmrt_rx_release(&f->regs[i]);
  free(f->regs);
  charge_regs(vm, f->nregs, -1);
  vm->depth--;
}

static int steps(rx_vm* vm, int64_t cost) {
  vm->steps += cost;
  if (vm->limits.max_steps > 0 && vm->steps > vm->limits.max_steps) {
    return tvmrt_fail("KernelError",
                      "the Relax VM ran over its budget of %lld steps in one invoke "
                      "(TVMRT_RELAX_MAX_STEPS; a step weighs 1, plus its arguments, plus the "
                      "registers of a call's frame)",
                      (long long)vm->limits.max_steps);
  }
  return 0;
}

static int arity_error(const rx_func_info* info, int given) {
  char params[512] = "";
  size_t k, used = 0;
  for (k = 0; k < info->num_params && used + 8 < sizeof(params); ++k) {
    int w = snprintf(params + used, sizeof(params) - used - 2, "%s%s", k ? ", " : " (",
                     info->params[k]);
    if (w < 0) break;
    used = strlen(params);
  }
  if (info->num_params) strcat(params, ")");
  return tvmrt_fail("InvalidArgumentError",
                    "Invoking function %.100s expects %lld arguments%s, but %d arguments were "
                    "provided.",
                    info->name, (long long)info->num_args, params, given);
}

/* a new frame for VM function `func` with args then bound (retained into its registers);
   `via`: the pool index the caller called (for the instrument's after-call), -1 if none */
static int push(rx_vm* vm, stack* s, int64_t func, const rx_value* args, int n,
                const rx_value* bound, int nbound, int64_t ret_reg, int64_t via) {
  const rx_func_info* info = &vm->exe->funcs[func];
  frame* f;
  int i;
  if (info->kind != RX_FUNC_VM) {
    return tvmrt_fail("InternalError", "function '%.100s' is no bytecode function", info->name);
  }
  if ((int64_t)(n + nbound) != info->num_args) return arity_error(info, n + nbound);
  if (vm->depth >= vm->limits.max_frames) {
    return tvmrt_fail("KernelError",
                      "the Relax VM is %lld calls deep, its limit (TVMRT_RELAX_MAX_FRAMES)",
                      (long long)vm->depth);
  }
  if (steps(vm, 1 + info->num_regs) != 0) return -1;
  if (s->depth == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 8;
    frame* grown = (frame*)realloc(s->frames, cap * sizeof(frame));
    if (grown == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot push a frame");
    s->frames = grown;
    s->cap = cap;
  }
  if (charge_regs(vm, info->num_regs, 1) != 0) return -1;
  f = &s->frames[s->depth];
  f->regs = (rx_value*)calloc((size_t)(info->num_regs ? info->num_regs : 1), sizeof(rx_value));
  if (f->regs == NULL) {
    charge_regs(vm, info->num_regs, -1);
    return tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate %lld registers",
                      (long long)info->num_regs);
  }
  f->func = func;
  f->pc = info->start;
  f->ret_reg = ret_reg;
  f->nregs = info->num_regs;
  f->via = via;
  for (i = 0; i < n; ++i) tvmrt_rx_copy(&f->regs[i], args[i]);
  for (i = 0; i < nbound; ++i) tvmrt_rx_copy(&f->regs[n + i], bound[i]);
  s->depth++;
  vm->depth++;
  return 0;
}

static rx_value read_reg(rx_vm* vm, const frame* f, int64_t reg) {
  rx_value v;
  if (reg < RX_VOID_REG) return f->regs[reg];
  v.kind = reg == RX_VM_REG ? RX_HANDLE : RX_NULL;
  v.pad = 0;
  v.v.p = reg == RX_VM_REG ? (void*)vm : NULL;
  return v;
}

static void write_reg(frame* f, int64_t reg, rx_value* v) { /* takes v's reference */
  if (reg < RX_VOID_REG) {
    tvmrt_rx_release(&f->regs[reg]);
    f->regs[reg] = *v;
  } else {
    tvmrt_rx_release(v);
  }
  v->kind = RX_NULL;
}

/* one call's arguments as values (borrowed from the registers and pools) */
static void gather(rx_vm* vm, const frame* f, const int64_t* words, int64_t n, rx_value* out) {
  int64_t k;
  for (k = 0; k < n; ++k) {
    int64_t v = rx_arg_value(words[k]);
    switch (rx_arg_kind(words[k])) {
      case RX_ARG_REG: out[k] = read_reg(vm, f, v); break;
      case RX_ARG_IMM: out[k] = tvmrt_rx_int(v); break;
      case RX_ARG_CONST: out[k] = vm->consts[v]; break;
      default: out[k] = vm->func_pool[v].value; break;
    }
  }
}

/* the instrument's call before (ret NULL) or after a call (TVM's RunInstrCall); *skip is
   set when it answers kSkipRun before the call */
static int instrument(rx_vm* vm, int64_t callee, int before, const rx_value* ret,
                      const rx_value* args, int n, int* skip) {
  rx_value head[4], out = {RX_NULL, 0, {0}};
  const char* fname = vm->exe->funcs[callee].name;
  rx_str* name = tvmrt_rx_str_new(fname, strlen(fname));
  int rc;
  if (name == NULL) return -1;
  head[0] = vm->func_pool[callee].value;
  head[1] = tvmrt_rx_object(RX_STR, &name->hdr);
  head[2].kind = RX_BOOL;
  head[2].v.i = before;
  head[3] = ret != NULL ? *ret : tvmrt_rx_object(RX_NULL, NULL);
  rc = call_packed(vm, vm->instrument, head, 4, args, n, NULL, 0, &out);
  tvmrt_release(&name->hdr);
  if (rc != 0) return -1;
  if (skip != NULL) *skip = before && out.kind == RX_INT && out.v.i == 1; /* kSkipRun */
  tvmrt_rx_release(&out);
  return 0;
}

/* a call that is not a frame push: a builtin, a packed function, a compiled function */
static int call_entry(rx_vm* vm, int64_t callee, rx_value* args, int n, rx_value* ret) {
  const rx_pool_entry* e = &vm->func_pool[callee];
  ret->kind = RX_NULL;
  if (e->kind == RX_POOL_BUILTIN) return e->builtin->fn(vm, args, n, ret);
  if (e->kind == RX_FUNC_PACKED) return call_packed(vm, e->packed, NULL, 0, args, n, NULL, 0, ret);
  return tvmrt_rx_call_value(vm, e->value, args, n, ret); /* vm_tir: its closure */
}

/* the closure an invoke_closure call runs in the loop (a bytecode closure of this VM), or
   NULL: the call goes out of the loop */
static rx_closure* inline_closure(rx_vm* vm, const rx_pool_entry* e, const rx_value* args,
                                  int64_t n) {
  rx_closure* c;
  if (!e->invoke_closure || n < 2 || args[1].kind != RX_CLOSURE) return NULL;
  c = (rx_closure*)args[1].v.obj;
  if (c->owner != vm->id || c->packed != NULL || c->discard_return ||
      vm->exe->funcs[c->func].kind != RX_FUNC_VM)
    return NULL;
  return c;
}

static int run(rx_vm* vm, int64_t func, const rx_value* args, int n, const rx_value* bound,
               int nbound, rx_value* ret) {
  stack s = {NULL, 0, 0};
  rx_value small[SMALL_ARGS];
  rx_value* cargs = small;
  int64_t cap = SMALL_ARGS;
  int status = -1;
  ret->kind = RX_NULL;
  if (vm->nested_runs >= RX_MAX_NESTED_RUNS) {
    return tvmrt_fail("KernelError",
                      "the Relax VM has %d calls nested on the C stack (a VM function called "
                      "from outside the loop: through a builtin, a kernel or compiled code), "
                      "its limit",
                      vm->nested_runs);
  }
  if (vm->exe->funcs[func].kind == RX_FUNC_VM_TIR) { /* compiled: no frame here */
    vm->nested_runs++;
    status = call_entry(vm, func, (rx_value*)args, n, ret);
    vm->nested_runs--;
    return status;
  }
  vm->nested_runs++;
  if (push(vm, &s, func, args, n, bound, nbound, RX_VOID_REG, -1) != 0) goto done;
  for (;;) {
    frame* f = &s.frames[s.depth - 1];
    const int64_t* w = vm->exe->words + vm->exe->offsets[f->pc];
    switch (w[0]) {
      case RX_OP_CALL: {
        int64_t dst = w[1], callee = w[2], nargs = w[3];
        const rx_pool_entry* e = &vm->func_pool[callee];
        rx_value out = {RX_NULL, 0, {0}};
        rx_closure* c;
        int skip = 0;
        if (steps(vm, 1 + nargs) != 0) goto done;
        if (nargs > cap) {
          rx_value* grown = (rx_value*)malloc((size_t)nargs * sizeof(rx_value));
          if (grown == NULL) {
            tvmrt_fail("DeviceOutOfMemoryError", "cannot pass %lld arguments", (long long)nargs);
            goto done;
          }
          if (cargs != small) free(cargs);
          cargs = grown;
          cap = nargs;
        }
        gather(vm, f, w + 4, nargs, cargs);
        if (vm->instrument != NULL && instrument(vm, callee, 1, NULL, cargs, (int)nargs, &skip))
          goto done;
        if (skip) {                         /* the result stays None */
        } else if (e->kind == RX_FUNC_VM) { /* a frame, no C recursion */
          f->pc++;
          if (push(vm, &s, callee, cargs, (int)nargs, NULL, 0, dst, callee) != 0) goto done;
          continue;
        } else if ((c = inline_closure(vm, e, cargs, nargs)) != NULL) {
          int rc;
          tvmrt_retain(&c->hdr); /* the frame's arguments may drop the caller's reference */
          f->pc++;
          rc = push(vm, &s, c->func, cargs + 2, (int)nargs - 2, c->bound, (int)c->nbound, dst,
                    callee);
          tvmrt_release(&c->hdr);
          if (rc != 0) goto done;
          continue;
        } else {
          if (call_entry(vm, callee, cargs, (int)nargs, &out) != 0) goto done;
          if (vm->instrument != NULL &&
              instrument(vm, callee, 0, &out, cargs, (int)nargs, NULL) != 0) {
            tvmrt_rx_release(&out);
            goto done;
          }
        }
        write_reg(f, dst, &out);
        f->pc++;
        break;
      }
      case RX_OP_RET: {
        rx_value out = read_reg(vm, f, w[1]);
        int64_t dst = f->ret_reg, via = f->via;
        if (tvmrt_rx_is_object(out.kind)) tvmrt_retain(out.v.obj);
        pop(vm, &s);
        if (s.depth == 0) {
          *ret = out;
          status = 0;
          goto done;
        }
        f = &s.frames[s.depth - 1];
        if (vm->instrument != NULL && via >= 0) { /* the after-call of the caller's Call */
          const int64_t* cw = vm->exe->words + vm->exe->offsets[f->pc - 1];
          int64_t nargs = cw[3];
          if (nargs > cap) {
            tvmrt_rx_release(&out);
            tvmrt_fail("InternalError", "the instrumented call's arguments moved");
            goto done;
          }
          gather(vm, f, cw + 4, nargs, cargs);
          if (instrument(vm, via, 0, &out, cargs, (int)nargs, NULL) != 0) {
            tvmrt_rx_release(&out);
            goto done;
          }
        }
        write_reg(f, dst, &out);
        break;
      }
      case RX_OP_GOTO:
        if (steps(vm, 1) != 0) goto done;
        f->pc += w[1];
        break;
      default: { /* RX_OP_IF */
        rx_value cond = read_reg(vm, f, w[1]);
        if (steps(vm, 1) != 0) goto done;
        if (cond.kind != RX_INT && cond.kind != RX_BOOL) {
          tvmrt_fail("ArgumentTypeError",
                     "If in function '%.100s' tests %s; expected an int or a bool (the result "
                     "of vm.builtin.read_if_cond)",
                     vm->exe->funcs[f->func].name, tvmrt_rx_type_key(cond));
          goto done;
        }
        f->pc += cond.v.i != 0 ? 1 : w[2];
        break;
      }
    }
  }
done:
  while (s.depth > 0) pop(vm, &s);
  free(s.frames);
  if (cargs != small) free(cargs);
  vm->nested_runs--;
  return status;
}
