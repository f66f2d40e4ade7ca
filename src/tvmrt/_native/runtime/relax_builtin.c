/*
 * The vm.builtin.* functions Relax executables call (TVM's src/runtime/relax_vm/builtin.cc
 * in 0.19, src/runtime/vm/builtin.cc later), with TVM's semantics and TVM's words for a
 * mismatched input: memory (alloc_storage, alloc_tensor, memory_manager.clear), shapes and
 * checks (alloc_shape_heap, match_shape, make_shape, match_prim_value, make_prim_value,
 * check_*_info), values (make_tuple, tuple_getitem, tuple_reset_item, null_value, copy,
 * reshape, shape_of, tensor_to_shape, ensure_zero_offset, to_device) and control
 * (read_if_cond, make_closure, invoke_closure, call_tir_dyn, invoke_debug_func).
 *
 * Every argument is checked before use: its kind, an index against what it indexes (the
 * shape heap, a tuple), a size against overflow. One table (k_builtins) names them all.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relax.h"

enum { MATCH_IMM = 0, MATCH_STORE = 1, MATCH_NOOP = 2, MATCH_LOAD = 3 }; /* MatchShapeCode */
enum { MAKE_IMM = 0, MAKE_LOAD = 1 };                                    /* MakeShapeCode */

/* ---------------------------------------------------------------------------------- */
/* argument checks                                                                     */

static int want(const char* fn, int i, rx_value v, int kind) {
  if (v.kind == kind || (kind == RX_INT && v.kind == RX_BOOL)) return 0;
  return tvmrt_fail("ArgumentTypeError", "%s: argument %d must be %s, got %s", fn, i,
                    tvmrt_rx_kind_names[kind], tvmrt_rx_type_key(v));
}

static int get_int(const char* fn, int i, rx_value v, int64_t* out) {
  if (want(fn, i, v, RX_INT) != 0) return -1;
  *out = v.v.i;
  return 0;
}

/* the error context a check names: a string argument, or "" (None) */
static const char* context(rx_value v) {
  rx_str* s = tvmrt_rx_str(v);
  return s != NULL ? s->data : "";
}

/* the shape heap argument: an int64 tensor on the CPU, or None */
static int heap_of(const char* fn, int i, rx_value v, int64_t** data, int64_t* size) {
  tvmrt_ndarray* a = tvmrt_rx_tensor(v);
  *data = NULL;
  *size = 0;
  if (v.kind == RX_NULL) return 0;
  if (a == NULL || a->dl.ndim != 1 || a->dl.dtype.code != kDLInt || a->dl.dtype.bits != 64 ||
      a->dl.device.device_type != kDLCPU) {
    return tvmrt_fail("ArgumentTypeError",
                      "%s: argument %d must be the shape heap (a 1-d int64 CPU tensor) or None, "
                      "got %s",
                      fn, i, tvmrt_rx_type_key(v));
  }
  *data = (int64_t*)((char*)a->dl.data + a->dl.byte_offset);
  *size = a->dl.shape[0];
  return 0;
}

static int heap_slot(const char* fn, int64_t* heap, int64_t size, int64_t reg, int64_t** out) {
  if (heap == NULL || reg < 0 || reg >= size) {
    return tvmrt_fail("InvalidArgumentError",
                      "%s: shape heap slot %lld is outside the heap of %lld slots", fn,
                      (long long)reg, (long long)size);
  }
  *out = &heap[reg];
  return 0;
}

static int shape_size(const int64_t* dims, size_t n, DLDataType t, uint64_t* out) {
  uint64_t count = 1, bytes;
  size_t i;
  for (i = 0; i < n; ++i) {
    if (dims[i] < 0) return -1;
    if (dims[i] != 0 && count > UINT64_MAX / (uint64_t)dims[i]) return -1;
    count *= (uint64_t)dims[i];
  }
  bytes = ((uint64_t)t.bits * t.lanes + 7) / 8;
  if (bytes != 0 && count > UINT64_MAX / bytes) return -1;
  *out = count * bytes;
  return 0;
}

/* TVM 0.19's bool is (uint, 1); tvm-ffi's (bool, 8): the same type */
static int same_dtype(DLDataType a, DLDataType b) {
  int a_bool = (a.code == kDLUInt && a.bits == 1) || (a.code == 6 && a.bits == 8);
  int b_bool = (b.code == kDLUInt && b.bits == 1) || (b.code == 6 && b.bits == 8);
  if (a_bool || b_bool) return a_bool && b_bool && a.lanes == b.lanes;
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

static int ret_object(rx_value* ret, int kind, tvmrt_object* obj) {
  if (obj == NULL) return -1;
  *ret = tvmrt_rx_object(kind, obj);
  return 0;
}

/* ---------------------------------------------------------------------------------- */
/* shapes and checks                                                                   */

static int b_alloc_shape_heap(rx_vm* vm, rx_value* a, int n, rx_value* ret) {
  int64_t size;
  DLDataType i64 = {kDLInt, 64, 1};
  if (tvmrt_arity("vm.builtin.alloc_shape_heap", n, 2, 2) != 0 ||
      tvmrt_rx_context(vm, a[0], "vm.builtin.alloc_shape_heap") == NULL ||
      get_int("vm.builtin.alloc_shape_heap", 1, a[1], &size) != 0)
    return -1;
  if (size < 0 || size > RX_MAX_REGISTERS) {
    return tvmrt_fail("InvalidArgumentError",
                      "vm.builtin.alloc_shape_heap: a heap of %lld slots (at most %d)",
                      (long long)size, RX_MAX_REGISTERS);
  }
  return tvmrt_rx_empty(vm, &size, 1, i64, vm->devices[vm->num_devices - 1], ret);
}

/* one MatchShapeCode step: value against the code's immediate or heap slot */
static int match_one(const char* fn, const char* ctx, int64_t value, int64_t code, int64_t reg,
                     int64_t* heap, int64_t size, int64_t dim) {
  int64_t* slot = NULL;
  char what[48] = "PrimValue"; /* formatted on failure only: this runs per dimension per call */
  switch (code) {
    case MATCH_IMM:
      if (value != reg) {
        if (dim >= 0) snprintf(what, sizeof(what), "shape[%lld]", (long long)dim);
        return tvmrt_fail("InvalidArgumentError",
                          "%s match_cast error, %s mismatch to specified constant: %lld vs %lld",
                          ctx, what, (long long)value, (long long)reg);
      }
      return 0;
    case MATCH_STORE:
      if (heap_slot(fn, heap, size, reg, &slot) != 0) return -1;
      *slot = value;
      return 0;
    case MATCH_NOOP: return 0;
    case MATCH_LOAD:
      if (heap_slot(fn, heap, size, reg, &slot) != 0) return -1;
      if (value != *slot) {
        if (dim >= 0) snprintf(what, sizeof(what), "shape[%lld]", (long long)dim);
        return tvmrt_fail("InvalidArgumentError",
                          "%s match_cast error, %s mismatch to a previous populated value: %lld "
                          "vs %lld",
                          ctx, what, (long long)value, (long long)*slot);
      }
      return 0;
    default:
      return tvmrt_fail("InvalidArgumentError", "%s: unknown match shape code %lld", fn,
                        (long long)code);
  }
}

static int b_match_shape(rx_vm* vm, rx_value* a, int n, rx_value* ret) {
  const char* fn = "vm.builtin.match_shape";
  tvmrt_ndarray* t;
  rx_shape* s;
  const int64_t* dims;
  int64_t ndim, size, k, *heap, hsize;
  const char* ctx;
  (void)vm;
  (void)ret;
  if (tvmrt_arity(fn, n, 3, -1) != 0 || get_int(fn, 2, a[2], &size) != 0) return -1;
  if (size < 0 || 3 + 2 * size > n) {
    return tvmrt_fail("InvalidArgumentError", "%s: %lld dimensions in %d arguments", fn,
                      (long long)size, n);
  }
  ctx = 3 + 2 * size < n ? context(a[3 + 2 * size]) : "";
  if ((t = tvmrt_rx_tensor(a[0])) != NULL) {
    dims = t->dl.shape;
    ndim = t->dl.ndim;
  } else if ((s = tvmrt_rx_shape(a[0])) != NULL) {
    dims = s->dims;
    ndim = (int64_t)s->ndim;
  } else {
    return tvmrt_fail("ArgumentTypeError", "%s %s: expected a Tensor or a Shape, got %s", ctx, fn,
                      tvmrt_rx_type_key(a[0]));
  }
  if (heap_of(fn, 1, a[1], &heap, &hsize) != 0) return -1;
  if (ndim != size) {
    return tvmrt_fail("InvalidArgumentError",
                      "%s match_cast shape size mismatch: expected %lld dimensions, got %lld", ctx,
                      (long long)size, (long long)ndim);
  }
  for (k = 0; k < size; ++k) {
    int64_t code, reg;
    if (get_int(fn, (int)(3 + 2 * k), a[3 + 2 * k], &code) != 0 ||
        get_int(fn, (int)(4 + 2 * k), a[4 + 2 * k], &reg) != 0)
      return -1;
    if (match_one(fn, ctx, dims[k], code, reg, heap, hsize, k) != 0) return -1;
  }
  return 0;
}

static int b_match_prim_value(rx_vm* vm, rx_value* a, int n, rx_value* ret) {
  const char* fn = "vm.builtin.match_prim_value";
  int64_t value, code, reg, *heap, hsize;
  (void)vm;
  (void)ret;
  if (tvmrt_arity(fn, n, 4, 5) != 0 || get_int(fn, 0, a[0], &value) != 0 ||
      heap_of(fn, 1, a[1], &heap, &hsize) != 0 || get_int(fn, 2, a[2], &code) != 0 ||
      get_int(fn, 3, a[3], &reg) != 0)
    return -1;
  return match_one(fn, n > 4 ? context(a[4]) : "", value, code, reg, heap, hsize, -1);
}

static int b_make_shape(rx_vm* vm, rx_value* a, int n, rx_value* ret) {
  const char* fn = "vm.builtin.make_shape";
  int64_t size, k, *heap, hsize, small[RT_MAX_NDIM], *dims = small;
  rx_shape* s;
  (void)vm;
  if (tvmrt_arity(fn, n, 2, -1) != 0 || heap_of(fn, 0, a[0], &heap, &hsize) != 0 ||
      get_int(fn, 1, a[1], &size) != 0)
    return -1;
  if (size < 0 || 2 + 2 * size > n) {
    return tvmrt_fail("InvalidArgumentError", "%s: %lld dimensions in %d arguments", fn,
                      (long long)size, n);
  }
  if (size > RT_MAX_NDIM && (dims = (int64_t*)malloc((size_t)size * sizeof(int64_t))) == NULL)
    return tvmrt_fail("DeviceOutOfMemoryError", "%s: no memory", fn);
  for (k = 0; k < size; ++k) {
    int64_t code, reg, *slot = NULL;
    if (get_int(fn, (int)(2 + 2 * k), a[2 + 2 * k], &code) != 0 ||
        get_int(fn, (int)(3 + 2 * k), a[3 + 2 * k], &reg) != 0)
      goto fail;
    if (code == MAKE_IMM) {
      dims[k] = reg;
    } else if (code == MAKE_LOAD) {
      if (heap_slot(fn, heap, hsize, reg, &slot) != 0) goto fail;
      dims[k] = *slot;
    } else {
      tvmrt_fail("InvalidArgumentError", "%s: invalid shape code %lld", fn, (long long)code);
      goto fail;
    }
  }
  s = tvmrt_rx_shape_new(dims, (size_t)size);
  if (dims != small) free(dims);
  return ret_object(ret, RX_SHAPE, s != NULL ? &s->hdr : NULL);
fail:
  if (dims != small) free(dims);
  return -1;
}

static int b_make_prim_value(rx_vm* vm, rx_value* a, int n, rx_value* ret) {
  const char* fn = "vm.builtin.make_prim_value";
  int64_t code, reg, *heap, hsize, *slot = NULL;
  (void)vm;
  if (tvmrt_arity(fn, n, 3, 3) != 0 || heap_of(fn, 0, a[0], &heap, &hsize) != 0 ||
      get_int(fn, 1, a[1], &code) != 0 || get_int(fn, 2, a[2], &reg) != 0)
    return -1;
  if (code == MAKE_IMM) {
    *ret = tvmrt_rx_int(reg);
    return 0;
  }
  if (code != MAKE_LOAD)
    return tvmrt_fail("InvalidArgumentError", "%s: invalid shape code %lld", fn, (long long)code);
  if (heap_slot(fn, heap, hsize, reg, &slot) != 0) return -1;
  *ret = tvmrt_rx_int(*slot);
  return 0;
}

static int b_check_tensor_info(rx_vm* vm, rx_value* a, int n, rx_value* ret) {
  const char* fn = "vm.builtin.check_tensor_info";
  tvmrt_ndarray* t;
  int64_t ndim;
  const char* ctx;
  char x[48], y[48];
  (void)vm;
  (void)ret;
  if (tvmrt_arity(fn, n, 3, 4) != 0 || get_int(fn, 1, a[1], &ndim) != 0) return -1;
  ctx = context(a[n - 1]);
  if ((t = tvmrt_rx_tensor(a[0])) == NULL) {
    return tvmrt_fail("ArgumentTypeError", "%s expect a Tensor but get %s", ctx,
                      tvmrt_rx_type_key(a[0]));
  }
  if (ndim != -1 && t->dl.ndim != ndim) {
    return tvmrt_fail("InvalidArgumentError", "%s expect Tensor with ndim %lld but get %d", ctx,
                      (long long)ndim, t->dl.ndim);
  }
  if (n == 4) {
    if (want(fn, 2, a[2], RX_DTYPE) != 0) return -1;
    if (!(a[2].v.t.code == kDLOpaqueHandle && a[2].v.t.bits == 0 && a[2].v.t.lanes == 0) &&
        !same_dtype(a[2].v.t, t->dl.dtype)) {
      return tvmrt_fail("InvalidArgumentError", "%s expect Tensor with dtype %s but get %s", ctx,
                        tvmrt_dtype_text(a[2].v.t, x, sizeof(x)),
                        tvmrt_dtype_text(t->dl.dtype, y, sizeof(y)));
    }
  }
  return 0;
}

static int b_check_shape_info(rx_vm* vm, rx_value* a, int n, rx_value* ret) {
  const char* fn = "vm.builtin.check_shape_info";
  rx_shape* s;
  int64_t ndim;
  (void)vm;
  (void)ret;
  if (tvmrt_arity(fn, n, 3, 3) != 0 || get_int(fn, 1, a[1], &ndim) != 0) return -1;
  if ((s = tvmrt_rx_shape(a[0])) == NULL) {
    return tvmrt_fail("ArgumentTypeError", "%s expect a Shape but get %s", context(a[2]),
                      tvmrt_rx_type_key(a[0]));
  }
  if (ndim != -1 && (int64_t)s->ndim != ndim) {
    return tvmrt_fail("InvalidArgumentError", "%s expect Shape with ndim %lld but get %zu",
                      context(a[2]), (long long)ndim, s->ndim);
  }
  return 0;
}

static int b_check_prim_value_info(rx_vm* vm, rx_value* a, int n, rx_value* ret) {
  const char* fn = "vm.builtin.check_prim_value_info";
  DLDataType t;
  char x[48];
  (void)vm;
  (void)ret;
  if (tvmrt_arity(fn, n, 3, 3) != 0 || want(fn, 1, a[1], RX_DTYPE) != 0) return -1;
  t = a[1].v.t;
  if (tvmrt_rx_is_object(a[0].kind)) {
    return tvmrt_fail("ArgumentTypeError",
                      "%s, expected dtype %s, but received ObjectRef of type %s", context(a[2]),
                      tvmrt_dtype_text(t, x, sizeof(x)), tvmrt_rx_type_key(a[0]));
  }
  if (t.code == kDLFloat || t.code == 4 /* bfloat */) {
    if (a[0].kind != RX_FLOAT && a[0].kind != RX_INT && a[0].kind != RX_BOOL) goto bad;
  } else if (t.code == kDLOpaqueHandle) {
    if (a[0].kind != RX_HANDLE && a[0].kind != RX_NULL) goto bad;
  } else if (a[0].kind != RX_INT && a[0].kind != RX_BOOL) {
    goto bad;
  }
  return 0;
bad:
  return tvmrt_fail("ArgumentTypeError", "%s, expected dtype %s, but received %s", context(a[2]),
                    tvmrt_dtype_text(t, x, sizeof(x)), tvmrt_rx_type_key(a[0]));
}

static int b_check_tuple_info(rx_vm* vm, rx_value* a, int n, rx_value* ret) {
  const char* fn = "vm.builtin.check_tuple_info";
  rx_tuple* t;
  int64_t size;
  (void)vm;
  (void)ret;
  if (tvmrt_arity(fn, n, 3, 3) != 0 || get_int(fn, 1, a[1], &size) != 0) return -1;
  if ((t = tvmrt_rx_tuple(a[0])) == NULL) {
    return tvmrt_fail("ArgumentTypeError", "%s expect a Tuple but get %s", context(a[2]),
                      tvmrt_rx_type_key(a[0]));
  }
  if ((int64_t)t->size != size) {
    return tvmrt_fail("InvalidArgumentError",
                      "%s expect a Tuple with %lld elements,  but get a Tuple with %zu elements.",
                      context(a[2]), (long long)size, t->size);
  }
  return 0;
}

static int b_check_func_info(rx_vm* vm, rx_value* a, int n, rx_value* ret) {
  (void)vm;
  (void)ret;
  if (tvmrt_arity("vm.builtin.check_func_info", n, 2, 2) != 0) return -1;
  if (a[0].kind != RX_CLOSURE && a[0].kind != RX_FUNC) {
    return tvmrt_fail("ArgumentTypeError", "%s expect a Function but get %s", context(a[1]),
                      tvmrt_rx_type_key(a[0]));
  }
  return 0;
}

/* ---------------------------------------------------------------------------------- */
/* memory                                                                              */

static int b_alloc_storage(rx_vm* vm, rx_value* a, int n, rx_value* ret) {
  const char* fn = "vm.builtin.alloc_storage";
  rx_shape* s;
  int64_t index;
  uint64_t nbytes;
  rx_storage* st;
  const char* scope = NULL;
  if (tvmrt_arity(fn, n, 4, 5) != 0 || tvmrt_rx_context(vm, a[0], fn) == NULL ||
      get_int(fn, 2, a[2], &index) != 0 || want(fn, 3, a[3], RX_DTYPE) != 0)
    return -1;
  if ((s = tvmrt_rx_shape(a[1])) == NULL) return want(fn, 1, a[1], RX_SHAPE);
  if (n == 5 && a[4].kind != RX_NULL) {
    if (want(fn, 4, a[4], RX_STR) != 0) return -1;
    scope = tvmrt_rx_str(a[4])->data;
  }
  if (index == -1) index = (int64_t)vm->num_devices - 1; /* the host */
  if (index < 0 || (size_t)index >= vm->num_devices) {
    return tvmrt_fail("InvalidArgumentError",
                      "%s: device index %lld is out of the VM's %zu physical devices", fn,
                      (long long)index, vm->num_devices);
  }
  if (shape_size(s->dims, s->ndim, a[3].v.t, &nbytes) != 0) {
    return tvmrt_fail("InvalidArgumentError",
                      "%s: a storage shape with a negative or too large "
                      "dimension",
                      fn);
  }
  st = tvmrt_rx_storage_alloc(vm->pools[index], nbytes, scope);
  return ret_object(ret, RX_STORAGE, st != NULL ? &st->hdr : NULL);
}

static int b_alloc_tensor(rx_vm* vm, rx_value* a, int n, rx_value* ret) {
  const char* fn = "vm.builtin.alloc_tensor";
  rx_storage* st;
  rx_shape* s;
  int64_t offset;
  uint64_t need;
  DLTensor probe;
  tvmrt_ndarray* t;
  (void)vm;
  if (tvmrt_arity(fn, n, 4, 5) != 0 || want(fn, 0, a[0], RX_STORAGE) != 0 ||
      get_int(fn, 1, a[1], &offset) != 0 || want(fn, 3, a[3], RX_DTYPE) != 0)
    return -1;
  if ((s = tvmrt_rx_shape(a[2])) == NULL) return want(fn, 2, a[2], RX_SHAPE);
  if (s->ndim > RT_MAX_NDIM) {
    return tvmrt_fail("InvalidArgumentError", "%s: a tensor of %zu dimensions (at most %d)", fn,
                      s->ndim, RT_MAX_NDIM);
  }
  if (n == 5 && a[4].kind == RX_STR && strcmp(tvmrt_rx_str(a[4])->data, "global") != 0 &&
      tvmrt_rx_str(a[4])->len > 0) {
    return tvmrt_fail("UnsupportedError",
                      "%s in memory scope '%.64s': tvmrt allocates the "
                      "global scope only",
                      fn, tvmrt_rx_str(a[4])->data);
  }
  st = (rx_storage*)a[0].v.obj;
  if (shape_size(s->dims, s->ndim, a[3].v.t, &need) != 0 || offset < 0 ||
      (uint64_t)offset > st->nbytes || need > st->nbytes - (uint64_t)offset) {
    return tvmrt_fail("DeviceOutOfMemoryError",
                      "storage allocation failure, attempted to allocate %llu at offset %lld in "
                      "region that is %zubytes",
                      (unsigned long long)need, (long long)offset, st->nbytes);
  }
  memset(&probe, 0, sizeof(probe));
  probe.data = st->data;
  probe.device = st->dev;
  probe.ndim = (int)s->ndim;
  probe.dtype = a[3].v.t;
  probe.shape = s->dims;
  probe.byte_offset = (uint64_t)offset; /* as TVM: the storage's base, and the offset */
  t = tvmrt_ndarray_view(&probe, &st->hdr);
  return ret_object(ret, RX_TENSOR, t != NULL ? &t->hdr : NULL);
}

static int b_memory_clear(rx_vm* vm, rx_value* a, int n, rx_value* ret) {
  (void)vm;
  (void)a;
  (void)n;
  (void)ret;
  return 0; /* the pools give back what is free when they are destroyed or over budget */
}

/* ---------------------------------------------------------------------------------- */
/* values                                                                              */

static int b_null_value(rx_vm* vm, rx_value* a, int n, rx_value* ret) {
  (void)vm;
  (void)a;
  ret->kind = RX_NULL;
  return tvmrt_arity("vm.builtin.null_value", n, 0, 0);
}

static int b_copy(rx_vm* vm, rx_value* a, int n, rx_value* ret) {
  (void)vm;
  if (tvmrt_arity("vm.builtin.copy", n, 1, 1) != 0) return -1;
  tvmrt_rx_copy(ret, a[0]);
  return 0;
}

static int b_make_tuple(rx_vm* vm, rx_value* a, int n, rx_value* ret) {
  rx_tuple* t = tvmrt_rx_tuple_new((size_t)n);
  int i;
  (void)vm;
  if (t == NULL) return -1;
  for (i = 0; i < n; ++i) tvmrt_rx_copy(&t->items[i], a[i]);
  return ret_object(ret, RX_TUPLE, &t->hdr);
}

static int tuple_index(const char* fn, rx_value* a, int n, rx_tuple** t, int64_t* i) {
  if (tvmrt_arity(fn, n, 2, 2) != 0 || get_int(fn, 1, a[1], i) != 0) return -1;
  if ((*t = tvmrt_rx_tuple(a[0])) == NULL) return want(fn, 0, a[0], RX_TUPLE);
  if (*i < 0 || (uint64_t)*i >= (*t)->size) {
    return tvmrt_fail("IndexOutOfRangeError", "%s: index %lld of a tuple of %zu items", fn,
                      (long long)*i, (*t)->size);
  }
  return 0;
}

static int b_tuple_getitem(rx_vm* vm, rx_value* a, int n, rx_value* ret) {
  rx_tuple* t;
  int64_t i;
  (void)vm;
  if (tuple_index("vm.builtin.tuple_getitem", a, n, &t, &i) != 0) return -1;
  tvmrt_rx_copy(ret, t->items[i]);
  return 0;
}

static int b_tuple_reset_item(rx_vm* vm, rx_value* a, int n, rx_value* ret) {
  rx_tuple* t;
  int64_t i;
  (void)vm;
  (void)ret;
  if (tuple_index("vm.builtin.tuple_reset_item", a, n, &t, &i) != 0) return -1;
  tvmrt_rx_release(&t->items[i]);
  return 0;
}

static int b_shape_of(rx_vm* vm, rx_value* a, int n, rx_value* ret) {
  tvmrt_ndarray* t;
  rx_shape* s;
  (void)vm;
  if (tvmrt_arity("vm.builtin.shape_of", n, 1, 1) != 0) return -1;
  if ((t = tvmrt_rx_tensor(a[0])) == NULL) {
    return tvmrt_fail("ArgumentTypeError",
                      "vm.builtin.shape_of expects a Tensor or DLTensor*, but get %s",
                      tvmrt_rx_type_key(a[0]));
  }
  s = tvmrt_rx_shape_new(t->dl.shape, (size_t)t->dl.ndim);
  return ret_object(ret, RX_SHAPE, s != NULL ? &s->hdr : NULL);
}

static int b_reshape(rx_vm* vm, rx_value* a, int n, rx_value* ret) {
  const char* fn = "vm.builtin.reshape";
  tvmrt_ndarray *t, *view;
  rx_shape* s;
  uint64_t have = 0, need = 0;
  DLTensor probe;
  (void)vm;
  if (tvmrt_arity(fn, n, 2, 2) != 0) return -1;
  if ((t = tvmrt_rx_tensor(a[0])) == NULL) {
    return tvmrt_fail("ArgumentTypeError",
                      "vm.builtin.reshape expects a Tensor or DLTensor*, but get %s",
                      tvmrt_rx_type_key(a[0]));
  }
  if ((s = tvmrt_rx_shape(a[1])) == NULL) return want(fn, 1, a[1], RX_SHAPE);
  if (s->ndim > RT_MAX_NDIM || !tvmrt_is_compact(&t->dl) ||
      shape_size(t->dl.shape, (size_t)t->dl.ndim, t->dl.dtype, &have) != 0 ||
      shape_size(s->dims, s->ndim, t->dl.dtype, &need) != 0 || need > have) {
    return tvmrt_fail("InvalidArgumentError",
                      "%s: cannot view a compact tensor of %llu bytes as %zu dimensions of more "
                      "(or the tensor has strides)",
                      fn, (unsigned long long)have, s->ndim);
  }
  probe = t->dl;
  probe.ndim = (int)s->ndim;
  probe.shape = s->dims;
  probe.strides = NULL;
  view = tvmrt_ndarray_view(&probe, &t->hdr);
  return ret_object(ret, RX_TENSOR, view != NULL ? &view->hdr : NULL);
}

/* a CPU copy of t if it lives elsewhere (a new reference in *out, else t's own) */
static int on_cpu(rx_vm* vm, rx_value v, rx_value* out) {
  DLDevice cpu = {kDLCPU, 0};
  tvmrt_ndarray* t = tvmrt_rx_tensor(v);
  if (t->dl.device.device_type == kDLCPU) {
    tvmrt_rx_copy(out, v);
    return 0;
  }
  return tvmrt_rx_to_device(vm, v, cpu, out);
}

static int read_int_at(const DLTensor* t, int64_t i, int64_t* out) {
  const char* p = (const char*)t->data + t->byte_offset;
  switch (t->dtype.bits) {
    case 1:
    case 8: *out = ((const int8_t*)p)[i]; return 0;
    case 16: *out = ((const int16_t*)p)[i]; return 0;
    case 32: *out = ((const int32_t*)p)[i]; return 0;
    case 64: *out = ((const int64_t*)p)[i]; return 0;
    default: return -1;
  }
}

static int b_read_if_cond(rx_vm* vm, rx_value* a, int n, rx_value* ret) {
  tvmrt_ndarray* t;
  rx_value host = {RX_NULL, 0, {0}};
  int64_t v;
  char x[48];
  if (tvmrt_arity("vm.builtin.read_if_cond", n, 1, 1) != 0) return -1;
  if (a[0].kind == RX_INT || a[0].kind == RX_BOOL) {
    ret->kind = RX_BOOL;
    ret->v.i = a[0].v.i != 0;
    return 0;
  }
  if ((t = tvmrt_rx_tensor(a[0])) == NULL)
    return want("vm.builtin.read_if_cond", 0, a[0], RX_TENSOR);
  if ((t->dl.dtype.code != kDLInt && t->dl.dtype.code != kDLUInt && t->dl.dtype.code != 6) ||
      t->dl.dtype.lanes != 1) {
    return tvmrt_fail("ArgumentTypeError", "vm.builtin.read_if_cond: a condition of dtype %s",
                      tvmrt_dtype_text(t->dl.dtype, x, sizeof(x)));
  }
  {
    size_t count;
    if (tvmrt_tensor_nbytes(&t->dl, &count) != 0 || count == 0)
      return tvmrt_fail("InvalidArgumentError", "vm.builtin.read_if_cond: an empty condition");
  }
  if (on_cpu(vm, a[0], &host) != 0) return -1;
  if (read_int_at(&tvmrt_rx_tensor(host)->dl, 0, &v) != 0) {
    tvmrt_rx_release(&host);
    return tvmrt_fail("ArgumentTypeError", "Unknown scalar int type: %s",
                      tvmrt_dtype_text(t->dl.dtype, x, sizeof(x)));
  }
  tvmrt_rx_release(&host);
  ret->kind = RX_BOOL;
  ret->v.i = v != 0;
  return 0;
}

static int b_tensor_to_shape(rx_vm* vm, rx_value* a, int n, rx_value* ret) {
  const char* fn = "vm.builtin.tensor_to_shape";
  tvmrt_ndarray* t;
  rx_value host = {RX_NULL, 0, {0}};
  int64_t i, count, *dims;
  rx_shape* s;
  if (tvmrt_arity(fn, n, 1, 1) != 0) return -1;
  if ((t = tvmrt_rx_tensor(a[0])) == NULL) return want(fn, 0, a[0], RX_TENSOR);
  if (t->dl.ndim != 1 || t->dl.dtype.code != kDLInt || t->dl.dtype.lanes != 1 ||
      (t->dl.dtype.bits != 16 && t->dl.dtype.bits != 32 && t->dl.dtype.bits != 64)) {
    return tvmrt_fail("ArgumentTypeError", "%s: expected a 1-d int16/32/64 tensor", fn);
  }
  count = t->dl.shape[0];
  if (count > RT_MAX_NODES)
    return tvmrt_fail("InvalidArgumentError", "%s: %lld dims", fn, (long long)count);
  if (on_cpu(vm, a[0], &host) != 0) return -1;
  dims = (int64_t*)malloc((size_t)(count ? count : 1) * sizeof(int64_t));
  if (dims == NULL) {
    tvmrt_rx_release(&host);
    return tvmrt_fail("DeviceOutOfMemoryError", "%s: no memory", fn);
  }
  for (i = 0; i < count; ++i) read_int_at(&tvmrt_rx_tensor(host)->dl, i, &dims[i]);
  tvmrt_rx_release(&host);
  s = tvmrt_rx_shape_new(dims, (size_t)count);
  free(dims);
  return ret_object(ret, RX_SHAPE, s != NULL ? &s->hdr : NULL);
}

static int b_ensure_zero_offset(rx_vm* vm, rx_value* a, int n, rx_value* ret) {
  const char* fn = "vm.builtin.ensure_zero_offset";
  tvmrt_ndarray *t, *view;
  if (tvmrt_arity(fn, n, 1, 1) != 0) return -1;
  if ((t = tvmrt_rx_tensor(a[0])) == NULL) return want(fn, 0, a[0], RX_TENSOR);
  if (t->dl.byte_offset == 0) {
    tvmrt_rx_copy(ret, a[0]);
    return 0;
  }
  if (t->dl.device.device_type == kDLCPU && t->dl.byte_offset % RT_ALIGN == 0) {
    DLTensor probe = t->dl;
    probe.data = (char*)t->dl.data + t->dl.byte_offset;
    probe.byte_offset = 0;
    view = tvmrt_ndarray_view(&probe, &t->hdr);
    return ret_object(ret, RX_TENSOR, view != NULL ? &view->hdr : NULL);
  }
  if (tvmrt_rx_empty(vm, t->dl.shape, t->dl.ndim, t->dl.dtype, t->dl.device, ret) != 0) return -1;
  if (TVMArrayCopyFromTo(&t->dl, &tvmrt_rx_tensor(*ret)->dl, NULL) != 0) {
    tvmrt_rx_release(ret);
    return -1;
  }
  return 0;
}

static int b_to_device(rx_vm* vm, rx_value* a, int n, rx_value* ret) {
  const char* fn = "vm.builtin.to_device";
  int64_t type, id;
  DLDevice dev;
  if (tvmrt_arity(fn, n, 3, 4) != 0 || want(fn, 0, a[0], RX_TENSOR) != 0 ||
      get_int(fn, 1, a[1], &type) != 0 || get_int(fn, 2, a[2], &id) != 0)
    return -1;
  dev.device_type = (DLDeviceType)type;
  dev.device_id = (int)id;
  if (!tvmrt_device_supported(type)) {
    return tvmrt_fail("DeviceUnavailableError", "%s: device type %lld (tvmrt copies between %s)",
                      fn, (long long)type, tvmrt_device_backends());
  }
  return tvmrt_rx_to_device(vm, a[0], dev, ret);
}

/* ---------------------------------------------------------------------------------- */
/* control                                                                             */

static int b_make_closure(rx_vm* vm, rx_value* a, int n, rx_value* ret) {
  const char* fn = "vm.builtin.make_closure";
  rx_closure *c, *made;
  rx_value* bound;
  size_t nb;
  (void)vm;
  if (tvmrt_arity(fn, n, 1, -1) != 0 || want(fn, 0, a[0], RX_CLOSURE) != 0) return -1;
  c = (rx_closure*)a[0].v.obj;
  nb = c->nbound + (size_t)(n - 1);
  bound = (rx_value*)malloc((nb ? nb : 1) * sizeof(rx_value));
  if (bound == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "%s: no memory", fn);
  /* BindLastArgs: the new arguments first, then what the closure had bound */
  memcpy(bound, a + 1, (size_t)(n - 1) * sizeof(rx_value));
  memcpy(bound + (n - 1), c->bound, c->nbound * sizeof(rx_value));
  made = tvmrt_rx_closure_new(c->owner, c->func, c->packed, c->name, bound, nb);
  free(bound);
  return ret_object(ret, RX_CLOSURE, made != NULL ? &made->hdr : NULL);
}

static int b_invoke_closure(rx_vm* vm, rx_value* a, int n, rx_value* ret) {
  if (tvmrt_arity("vm.builtin.invoke_closure", n, 2, -1) != 0 ||
      tvmrt_rx_context(vm, a[0], "vm.builtin.invoke_closure") == NULL)
    return -1;
  return tvmrt_rx_call_value(vm, a[1], a + 2, n - 2, ret);
}

static int b_call_tir_dyn(rx_vm* vm, rx_value* a, int n, rx_value* ret) {
  const char* fn = "vm.builtin.call_tir_dyn";
  rx_shape* s;
  rx_value* args;
  size_t i, total;
  int rc;
  if (tvmrt_arity(fn, n, 2, -1) != 0) return -1;
  if ((s = tvmrt_rx_shape(a[n - 1])) == NULL) return want(fn, n - 1, a[n - 1], RX_SHAPE);
  total = (size_t)(n - 2) + s->ndim;
  if (total > RX_MAX_ARGS)
    return tvmrt_fail("InvalidArgumentError", "%s: %zu arguments", fn, total);
  args = (rx_value*)malloc((total ? total : 1) * sizeof(rx_value));
  if (args == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "%s: no memory", fn);
  memcpy(args, a + 1, (size_t)(n - 2) * sizeof(rx_value));
  for (i = 0; i < s->ndim; ++i) args[(size_t)(n - 2) + i] = tvmrt_rx_int(s->dims[i]);
  rc = tvmrt_rx_call_value(vm, a[0], args, (int)total, ret);
  free(args);
  return rc;
}

static int b_invoke_debug_func(rx_vm* vm, rx_value* a, int n, rx_value* ret) {
  const char* fn = "vm.builtin.invoke_debug_func";
  rx_str* name;
  tvmrt_func* f;
  rx_value callee, out = {RX_NULL, 0, {0}};
  int rc;
  if (tvmrt_arity(fn, n, 3, -1) != 0) return -1;
  if (a[0].kind != RX_NULL) {
    return tvmrt_fail("InvalidArgumentError", "IOEffect is expected to be lowered to None.");
  }
  if ((name = tvmrt_rx_str(a[1])) == NULL) return want(fn, 1, a[1], RX_STR);
  f = tvmrt_registry_find(name->data);
  if (f == NULL) f = tvmrt_registry_find_host(name->data);
  if (f == NULL) {
    return tvmrt_fail("InvalidArgumentError",
                      "%.200s is not found. Use the decorator `@tvm.register_func(\"%.200s\")` "
                      "to register it.",
                      name->data, name->data);
  }
  callee = tvmrt_rx_object(RX_FUNC, &f->hdr);
  rc = tvmrt_rx_call_value(vm, callee, a + 2, n - 2, &out); /* (line_info, args...) */
  tvmrt_release(&f->hdr);
  tvmrt_rx_release(&out);
  ret->kind = RX_NULL;
  return rc;
}

/* ---------------------------------------------------------------------------------- */
/* the table                                                                           */

static const rx_builtin k_builtins[] = {
    {"vm.builtin.alloc_shape_heap", b_alloc_shape_heap},
    {"vm.builtin.match_shape", b_match_shape},
    {"vm.builtin.match_prim_value", b_match_prim_value},
    {"vm.builtin.make_shape", b_make_shape},
    {"vm.builtin.make_prim_value", b_make_prim_value},
    {"vm.builtin.check_tensor_info", b_check_tensor_info},
    {"vm.builtin.check_shape_info", b_check_shape_info},
    {"vm.builtin.check_prim_value_info", b_check_prim_value_info},
    {"vm.builtin.check_tuple_info", b_check_tuple_info},
    {"vm.builtin.check_func_info", b_check_func_info},
    {"vm.builtin.alloc_storage", b_alloc_storage},
    {"vm.builtin.alloc_tensor", b_alloc_tensor},
    {"vm.builtin.memory_manager.clear", b_memory_clear},
    {"vm.builtin.null_value", b_null_value},
    {"vm.builtin.copy", b_copy},
    {"vm.builtin.make_tuple", b_make_tuple},
    {"vm.builtin.tuple_getitem", b_tuple_getitem},
    {"vm.builtin.tuple_reset_item", b_tuple_reset_item},
    {"vm.builtin.shape_of", b_shape_of},
    {"vm.builtin.reshape", b_reshape},
    {"vm.builtin.read_if_cond", b_read_if_cond},
    {"vm.builtin.tensor_to_shape", b_tensor_to_shape},
    {"vm.builtin.ensure_zero_offset", b_ensure_zero_offset},
    {"vm.builtin.to_device", b_to_device},
    {"vm.builtin.make_closure", b_make_closure},
    {"vm.builtin.invoke_closure", b_invoke_closure},
    {"vm.builtin.call_tir_dyn", b_call_tir_dyn},
    {"vm.builtin.invoke_debug_func", b_invoke_debug_func},
};
#define NUM_BUILTINS (sizeof(k_builtins) / sizeof(k_builtins[0]))

const rx_builtin* tvmrt_rx_builtin_table(size_t* count) {
  *count = NUM_BUILTINS;
  return k_builtins;
}

const rx_builtin* tvmrt_rx_builtin(const char* name) {
  size_t i;
  for (i = 0; i < NUM_BUILTINS; ++i) {
    if (strcmp(k_builtins[i].name, name) == 0) return &k_builtins[i];
  }
  return NULL;
}

/* The families a later step brings (docs/relax.md): an executable naming one is refused at
   load, by name, never half-run. */
static const struct {
  const char* prefix;
  const char* family;
} k_refused[] = {
    {"vm.builtin.attention_kv_cache", "the LLM KV cache (attention_kv_cache_*)"},
    {"vm.builtin.paged_attention_kv_cache", "the LLM paged KV cache"},
    {"vm.builtin.kv_state", "the LLM KV state (kv_state_*)"},
    {"vm.builtin.rnn_state", "the LLM RNN state"},
    {"vm.builtin.sample", "LLM sampling"},
    {"vm.builtin.multinomial", "LLM sampling"},
    {"vm.builtin.renormalize", "LLM sampling"},
    {"vm.builtin.apply_", "LLM sampling (logit processors)"},
    {"vm.builtin.tensor_cache", "tensor_cache weight loading"},
    {"vm.builtin.ndarray_cache", "ndarray_cache weight loading"},
    {"vm.builtin.param_module", "tensor_cache weight loading"},
    {"vm.builtin.cuda_graph", "CUDA graphs"},
    {"vm.cuda_graph", "CUDA graphs"},
    {"runtime.disco", "disco (multi-GPU)"},
    {"vm.builtin.call_py_func", "Python functions called from the VM (call_py_func)"},
};

const char* tvmrt_rx_refused_family(const char* name) {
  size_t i;
  for (i = 0; i < sizeof(k_refused) / sizeof(k_refused[0]); ++i) {
    if (strncmp(name, k_refused[i].prefix, strlen(k_refused[i].prefix)) == 0)
      return k_refused[i].family;
  }
  return NULL;
}
