/*
 * tvmrt native sort family: the runtime functions TOPI's CPU sort, argsort, top-k and
 * non-maximum suppression call by name (tvm.contrib.sort.{argsort,argsort_nms,sort,topk}).
 *
 * Semantics follow TVM v0.19's runtime definitions (docs/tvm-compat.md, "Runtime functions
 * kernels call"): a stable sort along one axis, ascending or descending; equal keys keep
 * their original order in both directions (so top-k ties go to the smaller index); float16
 * keys compare as floats (-0.0 equals 0.0); int64 keys compare exactly. The dtype tables
 * are TVM's. Unlike TVM, every argument is checked first (type codes, device, compact
 * layout, output shapes and dtypes), so a wrong call reports an error naming the function
 * instead of writing out of bounds. NaN keys have no defined order in TVM (its comparator
 * is not a strict weak ordering then); rows with NaN come out in an unspecified order here
 * too.
 *
 * Kernels reach these functions without Python: TVMBackendGetFuncFromEnv hands out the
 * address of an entry of g_native (below) as the function handle, and TVMFuncCall
 * (func_env.c) calls entries of the tables registered with it directly.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sort_args.h"

typedef struct {
  union {
    double f;
    int64_t i;
  } key;
  int64_t idx;
} pair_t;

/* ---------------------------------------------------------------------------------- */
/* Keys                                                                               */

static double half_to_double(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15), exp = (uint32_t)((h >> 10) & 0x1F), man = h & 0x3FFu;
  double v;
  if (exp == 0) v = (double)man * (1.0 / 16777216.0); /* subnormal: man * 2^-24 */
  else if (exp == 31) v = man ? (double)NAN : (double)INFINITY;
  else v = (1.0 + (double)man / 1024.0) * (double)((int64_t)1 << exp) / 32768.0;
  return sign ? -v : v;
}

/* Gather n keys (stride `step` elements) starting at element `base` of `data`. */
static void gather(const char* data, int kind, int64_t base, int64_t step, int64_t n, pair_t* p) {
  int64_t k;
  switch (kind) {
#define GATHER(KIND, T, FIELD, CONV)                                                               \
  case KIND: {                                                                                     \
    const T* src = (const T*)data + base;                                                          \
    for (k = 0; k < n; ++k) {                                                                      \
      p[k].key.FIELD = CONV(src[k * step]);                                                        \
      p[k].idx = k;                                                                                \
    }                                                                                              \
    break;                                                                                         \
  }
#define SAME(x) (x)
    GATHER(D_F16, uint16_t, f, half_to_double)
    GATHER(D_F32, float, f, (double))
    GATHER(D_F64, double, f, SAME)
    GATHER(D_I8, int8_t, i, (int64_t))
    GATHER(D_U8, uint8_t, i, (int64_t))
    GATHER(D_I32, int32_t, i, (int64_t))
    GATHER(D_I64, int64_t, i, SAME)
#undef GATHER
#undef SAME
    default: break;
  }
}

/* ---------------------------------------------------------------------------------- */
/* Stable merge sort of pairs (insertion-sorted runs, then bottom-up merges)           */

#define RUN 16
#define DEFINE_SORT(NAME, BEFORE)                                                                  \
  static void NAME(pair_t* a, pair_t* tmp, int64_t n) {                                            \
    int64_t lo, width, i, j, k;                                                                    \
    for (lo = 0; lo < n; lo += RUN) {                                                              \
      int64_t hi = lo + RUN < n ? lo + RUN : n;                                                    \
      for (i = lo + 1; i < hi; ++i) {                                                              \
        pair_t x = a[i];                                                                           \
        for (j = i; j > lo && BEFORE(x, a[j - 1]); --j) a[j] = a[j - 1];                           \
        a[j] = x;                                                                                  \
      }                                                                                            \
    }                                                                                              \
    for (width = RUN; width < n; width *= 2) {                                                     \
      pair_t* src = a;                                                                             \
      for (lo = 0; lo < n; lo += 2 * width) {                                                      \
        int64_t mid = lo + width < n ? lo + width : n;                                             \
        int64_t hi = lo + 2 * width < n ? lo + 2 * width : n;                                      \
        i = lo, j = mid, k = lo;                                                                   \
        if (mid >= hi || !BEFORE(src[mid], src[mid - 1])) {                                        \
          memcpy(tmp + lo, src + lo, (size_t)(hi - lo) * sizeof(pair_t));                          \
          continue;                                                                                \
        }                                                                                          \
        while (i < mid && j < hi) tmp[k++] = BEFORE(src[j], src[i]) ? src[j++] : src[i++];         \
        while (i < mid) tmp[k++] = src[i++];                                                       \
        while (j < hi) tmp[k++] = src[j++];                                                        \
      }                                                                                            \
      memcpy(a, tmp, (size_t)n * sizeof(pair_t));                                                  \
    }                                                                                              \
  }                                                                                                \
  /* the first k of the stable order, for small k: a sorted candidate list */                      \
  static int64_t NAME##_select(const pair_t* a, int64_t n, int64_t k, pair_t* best) {              \
    int64_t m = 0, i, j;                                                                           \
    for (i = 0; i < n; ++i) {                                                                      \
      if (m == k && !BEFORE(a[i], best[m - 1])) continue;                                          \
      j = m < k ? m++ : m - 1;                                                                     \
      for (; j > 0 && BEFORE(a[i], best[j - 1]); --j) best[j] = best[j - 1];                       \
      best[j] = a[i];                                                                              \
    }                                                                                              \
    return m;                                                                                      \
  }

#define F_ASC(x, y) ((x).key.f < (y).key.f)
#define F_DESC(x, y) ((x).key.f > (y).key.f)
#define I_ASC(x, y) ((x).key.i < (y).key.i)
#define I_DESC(x, y) ((x).key.i > (y).key.i)
DEFINE_SORT(sort_f_asc, F_ASC)
DEFINE_SORT(sort_f_desc, F_DESC)
DEFINE_SORT(sort_i_asc, I_ASC)
DEFINE_SORT(sort_i_desc, I_DESC)

static void stable_sort(pair_t* p, pair_t* tmp, int64_t n, int is_float, int ascend) {
  if (is_float) (ascend ? sort_f_asc : sort_f_desc)(p, tmp, n);
  else (ascend ? sort_i_asc : sort_i_desc)(p, tmp, n);
}

static int64_t select_first(const pair_t* p, int64_t n, int64_t k, pair_t* best, int is_float,
                            int ascend) {
  if (is_float) return (ascend ? sort_f_asc_select : sort_f_desc_select)(p, n, k, best);
  return (ascend ? sort_i_asc_select : sort_i_desc_select)(p, n, k, best);
}

/* ---------------------------------------------------------------------------------- */
/* Outputs                                                                            */

static void put_index(char* out, int kind, int64_t at, int64_t idx) {
  switch (kind) {
    case D_I32: ((int32_t*)out)[at] = (int32_t)idx; break;
    case D_I64: ((int64_t*)out)[at] = idx; break;
    case D_F32: ((float*)out)[at] = (float)idx; break;
    case D_F64: ((double*)out)[at] = (double)idx; break;
    case D_I8: ((int8_t*)out)[at] = (int8_t)(uint8_t)idx; break;
    case D_U8: ((uint8_t*)out)[at] = (uint8_t)idx; break;
    default: break;
  }
}

static void put_value(char* out, const char* in, size_t size, int64_t to, int64_t from) {
  memcpy(out + (size_t)to * size, in + (size_t)from * size, size);
}

static int alloc_pairs(const char* func, int64_t n, pair_t** a, pair_t** b) {
  size_t count = n > 0 ? (size_t)n : 1;
  *a = (pair_t*)malloc(count * sizeof(pair_t));
  *b = (pair_t*)malloc(count * sizeof(pair_t));
  if (*a == NULL || *b == NULL) {
    free(*a);
    free(*b);
    return tvmrt_sort_fail(func, "cannot allocate %lld bytes of sort buffers",
                           (long long)(2 * n * 16));
  }
  return 0;
}

/* ---------------------------------------------------------------------------------- */
/* argsort / sort                                                                     */

static int index_kind_ok(int k) { return k == D_I32 || k == D_I64 || k == D_F32 || k == D_F64; }
static int sort_kind_ok(int k) {
  return k == D_F32 || k == D_F64 || k == D_I32 || k == D_I64 || k == D_F16;
}

/* mode 0: argsort (indices), 1: sort (values) */
static int sort_common(const char* func, int mode, TVMValue* args, int* codes, int nargs) {
  DLTensor *in, *out;
  int64_t axis64 = 0, asc = 0, before, after, n, i, j, k;
  int axis = 0, kin, kout;
  char b1[32], b2[32];
  pair_t *p, *tmp;
  if (nargs != 4)
    return tvmrt_sort_fail(func, "expected 4 arguments (data, output, axis, is_ascend), got %d",
                           nargs);
  if (tvmrt_sort_get_tensor(func, args, codes, 0, "data", &in) ||
      tvmrt_sort_get_tensor(func, args, codes, 1, "output", &out) ||
      tvmrt_sort_get_int(func, args, codes, 2, "axis", &axis64) ||
      tvmrt_sort_get_int(func, args, codes, 3, "is_ascend", &asc))
    return -1;
  if (in->ndim == 0) return tvmrt_sort_fail(func, "the input has no dimensions to sort along");
  if (tvmrt_sort_norm_axis(func, axis64, in->ndim, &axis)) return -1;
  kin = tvmrt_sort_dkind(in->dtype);
  kout = tvmrt_sort_dkind(out->dtype);
  if (!sort_kind_ok(kin))
    return tvmrt_sort_fail(func,
                           "unsupported input dtype %s; expected float32, float64, int32, int64 or "
                           "float16",
                           tvmrt_sort_dtype_name(in->dtype, b1, sizeof b1));
  if (mode == 0 && !index_kind_ok(kout))
    return tvmrt_sort_fail(func,
                           "unsupported output dtype %s; expected int32, int64, float32 or float64",
                           tvmrt_sort_dtype_name(out->dtype, b2, sizeof b2));
  if (mode == 1 && kout != kin)
    return tvmrt_sort_fail(func, "output dtype %s differs from the input's %s",
                           tvmrt_sort_dtype_name(out->dtype, b2, sizeof b2),
                           tvmrt_sort_dtype_name(in->dtype, b1, sizeof b1));
  if (tvmrt_sort_check_shape(func, in, out, axis, -1, "the output")) return -1;
  if (tvmrt_sort_numel(in) == 0) return 0;
  tvmrt_sort_split_axis(in, axis, &before, &after);
  n = in->shape[axis];
  if (alloc_pairs(func, n, &p, &tmp)) return -1;
  for (i = 0; i < before; ++i) {
    for (j = 0; j < after; ++j) {
      int64_t base = i * n * after + j;
      gather(tvmrt_sort_data_of(in), kin, base, after, n, p);
      stable_sort(p, tmp, n, tvmrt_sort_is_float_kind(kin), asc != 0);
      for (k = 0; k < n; ++k) {
        if (mode == 0) put_index(tvmrt_sort_data_of(out), kout, base + k * after, p[k].idx);
        else
          put_value(tvmrt_sort_data_of(out), tvmrt_sort_data_of(in), tvmrt_sort_dsize(kin),
                    base + k * after, base + p[k].idx * after);
      }
    }
  }
  free(p);
  free(tmp);
  return 0;
}

static int argsort_fn(TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  return sort_common("tvm.contrib.sort.argsort", 0, args, codes, n);
}

static int sort_fn(TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  return sort_common("tvm.contrib.sort.sort", 1, args, codes, n);
}

/* ---------------------------------------------------------------------------------- */
/* argsort_nms(data float32, valid_count int32, output int32, axis, is_ascend)          */

static int argsort_nms_fn(TVMValue* args, int* codes, int nargs, TVMValue* ret, int* rc) {
  static const char* func = "tvm.contrib.sort.argsort_nms";
  DLTensor *in, *cnt, *out;
  int64_t axis64 = 0, asc = 0, before, after, n, i, j, k;
  int axis = 0;
  char b1[32];
  pair_t *p, *tmp;
  if (nargs != 5)
    return tvmrt_sort_fail(
        func, "expected 5 arguments (data, valid_count, output, axis, is_ascend), got %d", nargs);
  if (tvmrt_sort_get_tensor(func, args, codes, 0, "data", &in) ||
      tvmrt_sort_get_tensor(func, args, codes, 1, "valid_count", &cnt) ||
      tvmrt_sort_get_tensor(func, args, codes, 2, "output", &out) ||
      tvmrt_sort_get_int(func, args, codes, 3, "axis", &axis64) ||
      tvmrt_sort_get_int(func, args, codes, 4, "is_ascend", &asc))
    return -1;
  if (in->ndim == 0) return tvmrt_sort_fail(func, "the input has no dimensions to sort along");
  if (tvmrt_sort_norm_axis(func, axis64, in->ndim, &axis)) return -1;
  if (tvmrt_sort_dkind(in->dtype) != D_F32)
    return tvmrt_sort_fail(func, "unsupported input dtype %s; expected float32 (as TVM on x86)",
                           tvmrt_sort_dtype_name(in->dtype, b1, sizeof b1));
  if (tvmrt_sort_dkind(cnt->dtype) != D_I32)
    return tvmrt_sort_fail(func, "valid_count has dtype %s; expected int32",
                           tvmrt_sort_dtype_name(cnt->dtype, b1, sizeof b1));
  if (tvmrt_sort_dkind(out->dtype) != D_I32)
    return tvmrt_sort_fail(func, "the output has dtype %s; expected int32",
                           tvmrt_sort_dtype_name(out->dtype, b1, sizeof b1));
  if (tvmrt_sort_check_shape(func, in, out, axis, -1, "the output")) return -1;
  tvmrt_sort_split_axis(in, axis, &before, &after);
  if (tvmrt_sort_numel(cnt) < before * after)
    return tvmrt_sort_fail(func,
                           "valid_count has %lld elements; expected %lld (one per sorted row)",
                           (long long)tvmrt_sort_numel(cnt), (long long)(before * after));
  if (tvmrt_sort_numel(in) == 0) return 0;
  n = in->shape[axis];
  if (alloc_pairs(func, n, &p, &tmp)) return -1;
  for (i = 0; i < before; ++i) {
    for (j = 0; j < after; ++j) {
      int64_t base = i * n * after + j,
              m = ((const int32_t*)tvmrt_sort_data_of(cnt))[i * after + j];
      if (m > n) {
        free(p);
        free(tmp);
        return tvmrt_sort_fail(func, "valid_count %lld of row %lld exceeds the axis length %lld",
                               (long long)m, (long long)(i * after + j), (long long)n);
      }
      if (m < 0) m = 0;
      gather(tvmrt_sort_data_of(in), D_F32, base, after, m, p);
      stable_sort(p, tmp, m, 1, asc != 0);
      for (k = 0; k < n; ++k)
        ((int32_t*)tvmrt_sort_data_of(out))[base + k * after] = (int32_t)(k < m ? p[k].idx : k);
    }
  }
  free(p);
  free(tmp);
  return 0;
}

/* ---------------------------------------------------------------------------------- */
/* topk(data, [values], [indices], k, axis, ret_type, is_ascend)                        */

static int topk_index_ok(int kin, int kidx) {
  if (index_kind_ok(kidx)) return 1;
  return (kin == D_U8 && kidx == D_U8) || (kin == D_I8 && kidx == D_I8);
}

static int topk_fn(TVMValue* args, int* codes, int nargs, TVMValue* ret, int* rc) {
  static const char* func = "tvm.contrib.sort.topk";
  DLTensor *in, *values = NULL, *indices = NULL;
  int64_t k = 0, axis64 = 0, asc = 0, before, after, n, kk, i, j, q, m;
  int axis = 0, kin, kidx = D_I64, nout;
  const char* ret_type;
  char b1[32], b2[32];
  pair_t *p, *tmp;
  if (nargs < 6 || nargs > 7)
    return tvmrt_sort_fail(func,
                           "expected 6 or 7 arguments (data, outputs..., k, axis, ret_type, "
                           "is_ascend), got %d",
                           nargs);
  if (codes[nargs - 2] != CODE_STR || args[nargs - 2].v_str == NULL)
    return tvmrt_sort_fail(func, "argument %d (ret_type) must be a string, got type code %d",
                           nargs - 2, codes[nargs - 2]);
  ret_type = args[nargs - 2].v_str;
  if (strcmp(ret_type, "both") == 0) nout = 2;
  else if (strcmp(ret_type, "values") == 0 || strcmp(ret_type, "indices") == 0) nout = 1;
  else
    return tvmrt_sort_fail(func, "unsupported ret_type '%.40s'; expected both, values or indices",
                           ret_type);
  if (nargs != 5 + nout)
    return tvmrt_sort_fail(func, "ret_type '%s' takes %d output tensors; the call has %d", ret_type,
                           nout, nargs - 5);
  if (tvmrt_sort_get_tensor(func, args, codes, 0, "data", &in) ||
      tvmrt_sort_get_int(func, args, codes, nargs - 4, "k", &k) ||
      tvmrt_sort_get_int(func, args, codes, nargs - 3, "axis", &axis64) ||
      tvmrt_sort_get_int(func, args, codes, nargs - 1, "is_ascend", &asc))
    return -1;
  if (ret_type[0] == 'b') {
    if (tvmrt_sort_get_tensor(func, args, codes, 1, "values", &values) ||
        tvmrt_sort_get_tensor(func, args, codes, 2, "indices", &indices))
      return -1;
  } else if (ret_type[0] == 'v') {
    if (tvmrt_sort_get_tensor(func, args, codes, 1, "values", &values)) return -1;
  } else if (tvmrt_sort_get_tensor(func, args, codes, 1, "indices", &indices)) {
    return -1;
  }
  if (in->ndim == 0) return tvmrt_sort_fail(func, "the input has no dimensions to select along");
  if (tvmrt_sort_norm_axis(func, axis64, in->ndim, &axis)) return -1;
  kin = tvmrt_sort_dkind(in->dtype);
  if (!(sort_kind_ok(kin) || kin == D_U8 || kin == D_I8))
    return tvmrt_sort_fail(func,
                           "unsupported input dtype %s; expected float32, float64, uint8, int8, "
                           "int32, int64 or float16",
                           tvmrt_sort_dtype_name(in->dtype, b1, sizeof b1));
  if (indices != NULL) {
    kidx = tvmrt_sort_dkind(indices->dtype);
    if (!topk_index_ok(kin, kidx))
      return tvmrt_sort_fail(func,
                             "unsupported indices dtype %s for %s input; expected int32, int64, "
                             "float32 or float64",
                             tvmrt_sort_dtype_name(indices->dtype, b2, sizeof b2),
                             tvmrt_sort_dtype_name(in->dtype, b1, sizeof b1));
  }
  if (values != NULL && tvmrt_sort_dkind(values->dtype) != kin)
    return tvmrt_sort_fail(func, "values dtype %s differs from the input's %s",
                           tvmrt_sort_dtype_name(values->dtype, b2, sizeof b2),
                           tvmrt_sort_dtype_name(in->dtype, b1, sizeof b1));
  n = in->shape[axis];
  kk = k < 1 ? n : k;
  if ((values && tvmrt_sort_check_shape(func, in, values, axis, kk, "the values output")) ||
      (indices && tvmrt_sort_check_shape(func, in, indices, axis, kk, "the indices output")))
    return -1;
  if (tvmrt_sort_numel(in) == 0) return 0;
  m = kk < n ? kk : n;
  tvmrt_sort_split_axis(in, axis, &before, &after);
  if (alloc_pairs(func, n, &p, &tmp)) return -1;
  for (i = 0; i < before; ++i) {
    for (j = 0; j < after; ++j) {
      int64_t src = i * n * after + j, dst = i * kk * after + j;
      const pair_t* best = p;
      gather(tvmrt_sort_data_of(in), kin, src, after, n, p);
      if (m <= TOPK_SELECT_MAX && m < n) {
        select_first(p, n, m, tmp, tvmrt_sort_is_float_kind(kin), asc != 0);
        best = tmp;
      } else {
        stable_sort(p, tmp, n, tvmrt_sort_is_float_kind(kin), asc != 0);
      }
      for (q = 0; q < m; ++q) {
        if (indices) put_index(tvmrt_sort_data_of(indices), kidx, dst + q * after, best[q].idx);
        if (values)
          put_value(tvmrt_sort_data_of(values), tvmrt_sort_data_of(in), tvmrt_sort_dsize(kin),
                    dst + q * after, src + best[q].idx * after);
      }
    }
  }
  free(p);
  free(tmp);
  return 0;
}

/* ---------------------------------------------------------------------------------- */
/* The table of native functions                                                      */

static const tvmrt_native_entry g_native[] = {
    {"tvm.contrib.sort.argsort", argsort_fn},
    {"tvm.contrib.sort.argsort_nms", argsort_nms_fn},
    {"tvm.contrib.sort.sort", sort_fn},
    {"tvm.contrib.sort.topk", topk_fn},
};
#define NATIVE_COUNT ((int)(sizeof(g_native) / sizeof(g_native[0])))

/* The function handle of native function `name` (an entry's address), or NULL. The table
   is registered with func_env.c first, so TVMFuncCall knows the handle. */
TVM_DLL const void* tvmrt_native_function(const char* name) {
  int i;
  if (name == NULL || tvmrt_register_native_table(g_native, NATIVE_COUNT) != 0) return NULL;
  for (i = 0; i < NATIVE_COUNT; ++i)
    if (strcmp(g_native[i].name, name) == 0) return &g_native[i];
  return NULL;
}
