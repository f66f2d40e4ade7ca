/*
 * Argument checks and dtype helpers of the native sort family (declared in sort_args.h).
 * Unlike TVM, which trusts its callers, every argument is checked first, so a wrong call
 * reports an error naming the function instead of reading or writing out of bounds.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sort_args.h"

/* ---------------------------------------------------------------------------------- */
/* Errors                                                                             */

int tvmrt_sort_fail(const char* func, const char* fmt, ...) {
  char msg[512];
  int n = snprintf(msg, sizeof(msg), "%s: ", func);
  va_list ap;
  va_start(ap, fmt);
  if (n > 0 && (size_t)n < sizeof(msg)) vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
  va_end(ap);
  return tvmrt_fail("", "%s", msg);
}

const char* tvmrt_sort_dtype_name(DLDataType t, char* buf, size_t cap) {
  const char* base = t.code == TYPE_INT     ? "int"
                     : t.code == TYPE_UINT  ? "uint"
                     : t.code == TYPE_FLOAT ? "float"
                     : t.code == 4          ? "bfloat"
                                            : "type";
  if (t.lanes == 1) snprintf(buf, cap, "%s%u", base, (unsigned)t.bits);
  else snprintf(buf, cap, "%s%ux%u", base, (unsigned)t.bits, (unsigned)t.lanes);
  return buf;
}

int tvmrt_sort_dkind(DLDataType t) {
  if (t.lanes != 1) return D_BAD;
  if (t.code == TYPE_FLOAT && t.bits == 16) return D_F16;
  if (t.code == TYPE_FLOAT && t.bits == 32) return D_F32;
  if (t.code == TYPE_FLOAT && t.bits == 64) return D_F64;
  if (t.code == TYPE_INT && t.bits == 8) return D_I8;
  if (t.code == TYPE_UINT && t.bits == 8) return D_U8;
  if (t.code == TYPE_INT && t.bits == 32) return D_I32;
  if (t.code == TYPE_INT && t.bits == 64) return D_I64;
  return D_BAD;
}

size_t tvmrt_sort_dsize(int k) {
  switch (k) {
    case D_F16: return 2;
    case D_F32:
    case D_I32: return 4;
    case D_F64:
    case D_I64: return 8;
    default: return 1;
  }
}

int tvmrt_sort_is_float_kind(int k) { return k == D_F16 || k == D_F32 || k == D_F64; }

/* ---------------------------------------------------------------------------------- */
/* Arguments                                                                          */

int tvmrt_sort_get_tensor(const char* func, TVMValue* args, int* codes, int i, const char* what,
                          DLTensor** out) {
  DLTensor* t;
  int d;
  int64_t expect = 1;
  if (codes[i] != CODE_DLTENSOR && codes[i] != CODE_NDARRAY)
    return tvmrt_sort_fail(func, "argument %d (%s) must be a tensor, got type code %d", i, what,
                           codes[i]);
  t = (DLTensor*)args[i].v_handle;
  if (t == NULL) return tvmrt_sort_fail(func, "argument %d (%s) is a NULL tensor", i, what);
  if (t->device.device_type != 1)
    return tvmrt_sort_fail(func,
                           "argument %d (%s) is on device type %d; these functions run on the CPU "
                           "(device type 1)",
                           i, what, (int)t->device.device_type);
  if (t->ndim < 0 || t->ndim > MAX_NDIM)
    return tvmrt_sort_fail(func, "argument %d (%s) has %d dimensions (at most %d)", i, what,
                           t->ndim, MAX_NDIM);
  for (d = 0; d < t->ndim; ++d)
    if (t->shape[d] < 0)
      return tvmrt_sort_fail(func, "argument %d (%s) has a negative dimension", i, what);
  if (t->strides != NULL) {
    for (d = t->ndim - 1; d >= 0; --d) {
      if (t->shape[d] != 1 && t->strides[d] != expect)
        return tvmrt_sort_fail(func,
                               "argument %d (%s) is not compact row-major (strides given); pass a "
                               "contiguous tensor",
                               i, what);
      expect *= t->shape[d];
    }
  }
  *out = t;
  return 0;
}

int tvmrt_sort_get_int(const char* func, TVMValue* args, int* codes, int i, const char* what,
                       int64_t* out) {
  if (codes[i] != CODE_INT && codes[i] != CODE_UINT)
    return tvmrt_sort_fail(func, "argument %d (%s) must be an integer, got type code %d", i, what,
                           codes[i]);
  *out = args[i].v_int64;
  return 0;
}

char* tvmrt_sort_data_of(const DLTensor* t) { return (char*)t->data + t->byte_offset; }

int64_t tvmrt_sort_numel(const DLTensor* t) {
  int64_t n = 1;
  int d;
  for (d = 0; d < t->ndim; ++d) n *= t->shape[d];
  return n;
}

/* axis normalised like TVM (negative counts from the end), or -1 after reporting */
int tvmrt_sort_norm_axis(const char* func, int64_t axis, int ndim, int* out) {
  if (axis < 0) axis += ndim;
  if (axis < 0 || axis >= ndim)
    return tvmrt_sort_fail(func, "axis %lld is out of range for a %d-dimensional input",
                           (long long)axis, ndim);
  *out = (int)axis;
  return 0;
}

void tvmrt_sort_split_axis(const DLTensor* t, int axis, int64_t* before, int64_t* after) {
  int d;
  *before = 1;
  *after = 1;
  for (d = 0; d < t->ndim; ++d) {
    if (d < axis) *before *= t->shape[d];
    else if (d > axis) *after *= t->shape[d];
  }
}

/* out must have in's shape, except `axis_len` along `axis` (if axis_len >= 0) */
int tvmrt_sort_check_shape(const char* func, const DLTensor* in, const DLTensor* out, int axis,
                           int64_t axis_len, const char* what) {
  int d;
  if (out->ndim != in->ndim)
    return tvmrt_sort_fail(func, "%s has %d dimensions; expected %d like the input", what,
                           out->ndim, in->ndim);
  for (d = 0; d < in->ndim; ++d) {
    int64_t want = (d == axis && axis_len >= 0) ? axis_len : in->shape[d];
    if (out->shape[d] != want)
      return tvmrt_sort_fail(func, "%s has %lld along dimension %d; expected %lld", what,
                             (long long)out->shape[d], d, (long long)want);
  }
  return 0;
}
