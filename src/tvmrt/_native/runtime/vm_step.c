/*
 * One Relay VM instruction that neither calls, returns nor jumps (vm_interp.c runs the
 * others): allocations (storage from the VM's allocator, tensors over storages), kernel calls
 * through the library's functions (an ADT argument gives its fields in order; a kernel whose
 * one output is empty is skipped, as TVM), ADTs, closures, shapes, reshapes, device copies
 * and the scalar reads of If and the allocation sizes (TVM's LoadScalarInt).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_executor.h" /* the shape and dtype as text */
#include "vm.h"

#define MAX_KERNEL_ARGS 1024

void tvmrt_vm_set_reg(tvmrt_object** regs, int32_t r, tvmrt_object* value) { /* takes value */
  tvmrt_object* old = regs[r];
  regs[r] = value;
  tvmrt_release(old);
}

static tvmrt_ndarray* tensor(tvmrt_object* v, const char* role, int32_t r) {
  tvmrt_ndarray* a = tvmrt_vm_as_array(v);
  if (a == NULL) {
    tvmrt_fail("ArgumentTypeError", "%s register %d must hold a tensor, it holds %s", role, r,
               tvmrt_vm_kind(v));
  }
  return a;
}

/* TVM's LoadScalarInt: element 0 of a tensor, read as a signed integer */
int tvmrt_vm_scalar_int(tvmrt_object* v, const char* role, int32_t r, int64_t* out) {
  tvmrt_ndarray* a = tensor(v, role, r);
  size_t nbytes;
  if (a == NULL) return -1;
  if (tvmrt_tensor_nbytes(&a->dl, &nbytes) != 0 || nbytes == 0) {
    return tvmrt_fail("ArrayError", "%s register %d is an empty tensor, expected a scalar", role,
                      r);
  }
  if (a->dl.dtype.code != kDLInt && a->dl.dtype.code != kDLUInt) {
    return tvmrt_fail("ArgumentTypeError", "%s register %d has dtype code %d, expected an integer",
                      role, r, a->dl.dtype.code);
  }
  *out = tvmrt_vm_int_at(a, 0);
  return 0;
}

static tvmrt_object* host_ints(const int64_t* v, int64_t n, int bits, int ndim) {
  DLDataType t = {kDLInt, (uint8_t)bits, 1};
  tvmrt_ndarray* a = tvmrt_ndarray_empty(&n, ndim, t);
  int64_t i;
  if (a == NULL) return NULL;
  for (i = 0; i < n; ++i) {
    if (bits == 32) ((int32_t*)a->dl.data)[i] = (int32_t)v[i];
    else ((int64_t*)a->dl.data)[i] = v[i];
  }
  return &a->hdr;
}

/* a 1-D int32/int64 tensor's values as a shape */
static int shape_from(tvmrt_object* v, int32_t r, int64_t* dims, int* ndim) {
  tvmrt_ndarray* a = tensor(v, "shape", r);
  int64_t n, i;
  if (a == NULL) return -1;
  if (a->dl.dtype.code != kDLInt || (a->dl.dtype.bits != 32 && a->dl.dtype.bits != 64) ||
      a->dl.dtype.lanes != 1 || a->dl.ndim > 1) {
    return tvmrt_fail("ArgumentTypeError", "shape register %d must be a 1-D int32/int64 tensor", r);
  }
  n = a->dl.ndim == 1 ? a->dl.shape[0] : 0;
  if (n > RT_MAX_NDIM)
    return tvmrt_fail("ArrayError", "shape register %d has %lld dims", r, (long long)n);
  for (i = 0; i < n; ++i) {
    dims[i] = tvmrt_vm_int_at(a, (size_t)i);
    if (dims[i] < 0)
      return tvmrt_fail("ArrayError", "shape register %d holds a negative dimension", r);
  }
  *ndim = (int)n;
  return 0;
}

/* the exact byte count of `dims` items of `t` in decimal (it may pass 2^64: a shape read from
   a register can hold 32 dims of 2^62); base 10^9 limbs, each product within 64 bits */
static void bytes_text(const int64_t* dims, int ndim, DLDataType t, char* buf, size_t n) {
  uint32_t limb[80] = {(uint32_t)(((unsigned)t.bits * (t.lanes ? t.lanes : 1) + 7) / 8)};
  size_t used = 1, i, off = 0;
  int d;
  for (d = 0; d < ndim; ++d) {
    uint64_t v = (uint64_t)dims[d], part[3] = {v % 1000000000u, v / 1000000000u % 1000000000u,
                                               v / 1000000000u / 1000000000u};
    uint32_t out[85] = {0};
    size_t j, k;
    for (j = 0; j < used; ++j) {
      uint64_t carry = 0;
      for (k = 0; k < 3 || carry != 0; ++k) {
        uint64_t cur = out[j + k] + carry + (k < 3 ? (uint64_t)limb[j] * part[k] : 0);
        out[j + k] = (uint32_t)(cur % 1000000000u);
        carry = cur / 1000000000u;
      }
    }
    used = used + 3 < 80 ? used + 3 : 80;
    memcpy(limb, out, sizeof(limb));
    while (used > 1 && limb[used - 1] == 0) --used;
  }
  off += (size_t)snprintf(buf, n, "%u", (unsigned)limb[used - 1]);
  for (i = used - 1; i-- > 0 && off < n;)
    off += (size_t)snprintf(buf + off, n - off, "%09u", limb[i]);
}

/* a dense array of `dims` over `storage` from byte `offset` */
static tvmrt_object* alloc_tensor(tvmrt_object* sv, int32_t sr, int64_t offset, const int64_t* dims,
                                  int ndim, DLDataType t) {
  vm_storage* s = (vm_storage*)sv;
  DLTensor dl;
  size_t nbytes;
  tvmrt_ndarray* a;
  if (sv == NULL || sv->magic != RT_MAGIC_VM_STORAGE) {
    tvmrt_fail("ArgumentTypeError", "storage register %d holds %s", sr, tvmrt_vm_kind(sv));
    return NULL;
  }
  memset(&dl, 0, sizeof(dl));
  dl.ndim = ndim;
  dl.shape = (int64_t*)dims;
  dl.dtype = t;
  dl.device.device_type = kDLCPU;
  if (tvmrt_tensor_nbytes(&dl, &nbytes) != 0 || offset < 0 || (uint64_t)offset > s->nbytes ||
      nbytes > s->nbytes - (size_t)offset) {
    char shape[640], dtype[64], bytes[760]; /* the Python VM's words (array_memory.py) */
    tvmrt_ge_shape_text(&dl, shape, sizeof(shape));
    tvmrt_dtype_text(t, dtype, sizeof(dtype));
    bytes_text(dims, ndim, t, bytes, sizeof(bytes));
    tvmrt_fail("ArrayError",
               "array of shape %s and dtype %s at byte offset %lld needs %s bytes, but the "
               "storage has %zu",
               shape, dtype, (long long)offset, bytes, s->nbytes);
    return NULL;
  }
  dl.data = (char*)s->data + offset;
  a = tvmrt_ndarray_view(&dl, sv);
  return a == NULL ? NULL : &a->hdr;
}

static int call_kernel(vm_state* vm, const vm_ins* ins, tvmrt_object** regs) {
  TVMValue vals[MAX_KERNEL_ARGS], ret;
  int codes[MAX_KERNEL_ARGS], n = 0, i, ret_code = kTVMNullptr, rc, event = -1;
  uint64_t t0;
  tvmrt_func* f = vm->kernels[ins->imm];
  tvmrt_ndarray* last = NULL;
  for (i = 0; i < ins->nargs; ++i) {
    tvmrt_object* v = regs[ins->args[i]];
    tvmrt_ndarray* a = tvmrt_vm_as_array(v);
    if (a != NULL) {
      if (n == MAX_KERNEL_ARGS)
        return tvmrt_fail("InvalidArgumentError", "a kernel call of more than %d tensors",
                          MAX_KERNEL_ARGS);
      vals[n].v_handle = &a->dl;
      codes[n++] = kTVMDLTensorHandle;
      last = a;
    } else if (v != NULL && v->magic == RT_MAGIC_ADT) {
      vm_adt* t = (vm_adt*)v;
      size_t k;
      for (k = 0; k < t->size; ++k) {
        a = tvmrt_vm_as_array(t->fields[k]);
        if (a == NULL)
          return tvmrt_fail("ArgumentTypeError",
                            "a field of register %d holds %s, expected a tensor", ins->args[i],
                            tvmrt_vm_kind(t->fields[k]));
        if (n == MAX_KERNEL_ARGS)
          return tvmrt_fail("InvalidArgumentError", "a kernel call of more than %d tensors",
                            MAX_KERNEL_ARGS);
        vals[n].v_handle = &a->dl;
        codes[n++] = kTVMDLTensorHandle;
      }
      last = NULL;
    } else {
      return tvmrt_fail(
          "ArgumentTypeError",
          "kernel argument register %d holds %s, expected a tensor or a tuple of tensors",
          ins->args[i], tvmrt_vm_kind(v));
    }
  }
  if (ins->imm2 == 1 && last != NULL) { /* an empty output: TVM skips the kernel */
    for (i = 0; i < last->dl.ndim; ++i) {
      if (last->dl.shape[i] == 0) return 0;
    }
  }
  if (vm->trace != NULL && (event = tvmrt_vm_trace_kernel(vm->trace, ins->imm, vals, n)) < 0)
    return -1;
  t0 = vm->trace != NULL ? tvmrt_now_ns() : 0;
  tvmrt_clear_last_error();
  if (f->kind == RT_FN_BACKEND) {
    rc = f->backend(vals, codes, n, &ret, &ret_code, NULL);
  } else {
    rc = tvmrt_func_call(f, vals, codes, n, &ret, &ret_code);
  }
  if (vm->trace != NULL) tvmrt_vm_trace_times(vm->trace, event, t0, tvmrt_now_ns());
  if (rc != 0) {
    char msg[1024];
    const char* err = tvmrt_peek_last_error();
    snprintf(msg, sizeof(msg), "%s", err != NULL ? err : "");
    return tvmrt_fail("KernelError", "kernel %.200s failed: %s", vm->exe->prims[ins->imm], msg);
  }
  return 0;
}

/* one instruction that neither calls nor returns nor jumps: 0, or -1 with an error set */
static int step(vm_state* vm, const vm_ins* ins, tvmrt_object** regs) {
  tvmrt_object* v = NULL;
  int64_t a;
  switch (ins->op) {
    case VM_INVOKE_PACKED: return call_kernel(vm, ins, regs);
    case VM_LOAD_CONST:
      v = &vm->consts[ins->imm]->hdr;
      tvmrt_retain(v);
      break;
    case VM_KILL_REGISTER: tvmrt_vm_set_reg(regs, ins->r0, NULL); return 0;
    case VM_MOVE:
      v = regs[ins->r0];
      tvmrt_retain(v);
      tvmrt_vm_set_reg(regs, ins->dst, v); /* an empty register moves as it is */
      return 0;
    case VM_ALLOC_STORAGE: {
      a = ins->imm;
      if (ins->r0 >= 0 && tvmrt_vm_scalar_int(regs[ins->r0], "size", ins->r0, &a) != 0) return -1;
      v = (tvmrt_object*)tvmrt_vm_storage_alloc(vm->pool, a, ins->imm2);
      break;
    }
    case VM_ALLOC_TENSOR:
      if (tvmrt_vm_scalar_int(regs[ins->r1], "offset", ins->r1, &a) != 0) return -1;
      v = alloc_tensor(regs[ins->r0], ins->r0, a, ins->shape, ins->ndim, ins->dtype);
      break;
    case VM_ALLOC_TENSOR_REG: {
      int64_t dims[RT_MAX_NDIM];
      int ndim = 0;
      if (tvmrt_vm_scalar_int(regs[ins->r1], "offset", ins->r1, &a) != 0 ||
          shape_from(regs[ins->r2], ins->r2, dims, &ndim) != 0) {
        return -1;
      }
      v = alloc_tensor(regs[ins->r0], ins->r0, a, dims, ndim, ins->dtype);
      break;
    }
    case VM_SHAPE_OF: {
      tvmrt_ndarray* t = tensor(regs[ins->r0], "tensor", ins->r0);
      if (t == NULL) return -1;
      v = host_ints(t->dl.shape, t->dl.ndim, 64, 1);
      break;
    }
    case VM_ALLOC_ADT: {
      tvmrt_object* fields[64] = {NULL};
      tvmrt_object** many =
          ins->nargs > 64 ? (tvmrt_object**)malloc((size_t)ins->nargs * sizeof(void*)) : fields;
      int32_t i;
      vm_adt* t;
      if (many == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate an ADT");
      for (i = 0; i < ins->nargs; ++i) many[i] = regs[ins->args[i]];
      t = tvmrt_vm_adt_new(vm->pool, (int32_t)ins->imm, many, (size_t)ins->nargs);
      if (many != fields) free(many);
      v = t == NULL ? NULL : &t->hdr;
      break;
    }
    case VM_ALLOC_CLOSURE: {
      tvmrt_object** fields = (tvmrt_object**)malloc((size_t)(ins->nargs + 1) * sizeof(void*));
      int32_t i;
      vm_closure* c;
      if (fields == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate a closure");
      for (i = 0; i < ins->nargs; ++i) fields[i] = regs[ins->args[i]];
      c = tvmrt_vm_closure_new(vm->pool, ins->imm, fields, (size_t)ins->nargs);
      free(fields);
      v = c == NULL ? NULL : &c->hdr;
      break;
    }
    case VM_GET_FIELD:
    case VM_GET_TAG: {
      vm_adt* t = (vm_adt*)regs[ins->r0];
      if (t == NULL || t->hdr.magic != RT_MAGIC_ADT) {
        return tvmrt_fail("ArgumentTypeError", "register %d holds %s, expected an ADT", ins->r0,
                          tvmrt_vm_kind(regs[ins->r0]));
      }
      if (ins->op == VM_GET_TAG) {
        a = t->tag;
        v = host_ints(&a, 1, 32, 1);
        break;
      }
      if ((uint64_t)ins->imm >= t->size) {
        return tvmrt_fail("ArrayError", "field %lld of an ADT with %zu fields", (long long)ins->imm,
                          t->size);
      }
      v = t->fields[ins->imm];
      tvmrt_retain(v);
      tvmrt_vm_set_reg(regs, ins->dst, v); /* a field made from an empty register is empty */
      return 0;
    }
    case VM_LOAD_CONSTI: v = host_ints(&ins->imm, 1, 64, 1); break;
    case VM_RESHAPE_TENSOR: {
      int64_t dims[RT_MAX_NDIM];
      int ndim = 0;
      size_t old_bytes, new_bytes;
      DLTensor dl;
      tvmrt_ndarray* t = tensor(regs[ins->r0], "tensor", ins->r0);
      tvmrt_ndarray* s = tensor(regs[ins->r1], "shape", ins->r1);
      if (t == NULL || s == NULL) return -1;
      if (s->dl.dtype.code != kDLInt || s->dl.dtype.bits != 64) {
        return tvmrt_fail("ArgumentTypeError", "shape register %d is not int64", ins->r1);
      }
      if (shape_from(regs[ins->r1], ins->r1, dims, &ndim) != 0) return -1;
      dl = t->dl;
      dl.shape = dims;
      dl.ndim = ndim;
      dl.strides = NULL;
      if (tvmrt_tensor_nbytes(&t->dl, &old_bytes) != 0 ||
          tvmrt_tensor_nbytes(&dl, &new_bytes) != 0 || new_bytes > old_bytes ||
          !tvmrt_is_compact(&t->dl)) {
        return tvmrt_fail("ArrayError", "cannot reshape a tensor of %zu bytes to %d dims",
                          old_bytes, ndim);
      }
      /* over what holds t's memory: a reshape of a reshape (a loop's) makes no chain of
         views, each keeping the one before alive, for the free to recurse through */
      t = tvmrt_ndarray_view(&dl, t->alloc == NULL && t->owner != NULL ? t->owner : &t->hdr);
      v = t == NULL ? NULL : &t->hdr;
      break;
    }
    case VM_DEVICE_COPY: {
      tvmrt_ndarray* t = tensor(regs[ins->r0], "source", ins->r0);
      tvmrt_ndarray* c;
      if (t == NULL) return -1;
      c = tvmrt_ndarray_empty(t->dl.shape, t->dl.ndim, t->dl.dtype);
      if (c == NULL) return -1;
      if (tvmrt_copy_tensor(&t->dl, &c->dl) != 0) {
        tvmrt_release(&c->hdr);
        return -1;
      }
      v = &c->hdr;
      break;
    }
    case VM_FATAL: return tvmrt_fail("TVMError", "VM encountered fatal error");
    default: return tvmrt_fail("InternalError", "opcode %d reached the run loop", ins->op);
  }
  if (v == NULL) return -1;
  /* every tensor an instruction makes counts against the live-bytes budget (a constant is
     the executable's, a storage and an ADT are charged when made) */
  if (ins->op != VM_LOAD_CONST && v->magic == RT_MAGIC_ARRAY &&
      tvmrt_vm_charge_array(vm->pool, v, tvmrt_vm_opcode_names[ins->op]) != 0) {
    tvmrt_release(v);
    return -1;
  }
  tvmrt_vm_set_reg(regs, ins->dst, v);
  return 0;
}

int tvmrt_vm_step(vm_state* vm, const vm_ins* ins, tvmrt_object** regs) {
  int event;
  uint64_t t0;
  if (vm->trace == NULL || ins->op == VM_INVOKE_PACKED) return step(vm, ins, regs);
  /* an instruction TVM's profiler times: its event (its shape read before it runs) */
  if ((event = tvmrt_vm_trace_instruction(vm->trace, ins, regs)) == -1) return -1;
  if (event < 0) return step(vm, ins, regs);
  t0 = tvmrt_now_ns();
  if (step(vm, ins, regs) != 0) return -1;
  tvmrt_vm_trace_times(vm->trace, event, t0, tvmrt_now_ns());
  return 0;
}
