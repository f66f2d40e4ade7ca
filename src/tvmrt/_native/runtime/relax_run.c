/*
 * The relax.run.* functions TVM registers only in its Python (python/tvm/relax/op/base.py and
 * set.py), so that an executable calling them runs here, from Python and from C, as it
 * runs under TVM's Python:
 *
 *   relax.run.shape_to_tensor(shape)        tvm.nd.array([int(v) for v in shape])
 *   relax.run.print(format, *values)        print(format.format(*rendered)) (or the values)
 *   relax.run.assert_op(cond, format, ...)  AssertionError with the rendered message
 *   relax.run.unique(x, sorted, ...)        np.unique(x, return_index=True, axis=axis)
 *   relax.run.nonzero(x)                    np.stack(np.atleast_1d(x).nonzero())
 *
 * Values render as TVM renders them: a tensor as numpy's str() (array2string: the common
 * width and precision of the elements, 75 columns, "..." past 1000 elements), a tuple as
 * "(a, b)", a shape as "[1, 2]", a number as Python's str().
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relax.h"

/* ---------------------------------------------------------------------------------- */
/* a growing string                                                                    */

typedef struct {
  char* s;
  size_t n, cap;
  int oom;
} sbuf;

static void put(sbuf* b, const char* s, size_t n) {
  if (b->oom) return;
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    char* grown;
    while (cap < b->n + n + 1) cap *= 2;
    if (cap > ((size_t)1 << 30) || (grown = (char*)realloc(b->s, cap)) == NULL) {
      b->oom = 1;
      return;
    }
    b->s = grown;
    b->cap = cap;
  }
  memcpy(b->s + b->n, s, n);
  b->n += n;
  b->s[b->n] = '\0';
}
static void puts_(sbuf* b, const char* s) { put(b, s, strlen(s)); }
static void pad(sbuf* b, int n) {
  while (n-- > 0) put(b, " ", 1);
}

/* ---------------------------------------------------------------------------------- */
/* numbers as numpy writes them                                                        */

static int is_float_dtype(DLDataType t) {
  return t.code == kDLFloat && (t.bits == 32 || t.bits == 64 || t.bits == 16);
}
static int is_bool_dtype(DLDataType t) {
  return (t.code == kDLUInt && t.bits == 1) || (t.code == 6 && t.bits == 8);
}

static float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  float f;
  if (exp == 0) {
    f = ldexpf((float)man, -24);
    return sign ? -f : f;
  }
  if (exp == 31) bits = sign | 0x7f800000u | (man << 13);
  else bits = sign | ((exp + 112) << 23) | (man << 13);
  memcpy(&f, &bits, 4);
  return f;
}

static double elem_f(const DLTensor* t, int64_t i) {
  const char* p = (const char*)t->data + t->byte_offset;
  if (t->dtype.bits == 64) return ((const double*)p)[i];
  if (t->dtype.bits == 16) return half_to_float(((const uint16_t*)p)[i]);
  return ((const float*)p)[i];
}

static int64_t elem_i(const DLTensor* t, int64_t i, uint64_t* u) {
  const char* p = (const char*)t->data + t->byte_offset;
  int unsigned_ = t->dtype.code == kDLUInt;
  int64_t v;
  switch (t->dtype.bits) {
    case 1:
    case 8: v = unsigned_ ? ((const uint8_t*)p)[i] : ((const int8_t*)p)[i]; break;
    case 16: v = unsigned_ ? ((const uint16_t*)p)[i] : ((const int16_t*)p)[i]; break;
    case 32: v = unsigned_ ? (int64_t)((const uint32_t*)p)[i] : ((const int32_t*)p)[i]; break;
    default: v = ((const int64_t*)p)[i]; break;
  }
  if (u != NULL) *u = t->dtype.bits == 64 && unsigned_ ? ((const uint64_t*)p)[i] : (uint64_t)v;
  return v;
}

/* the fewest significant digits that read back as x (in its own precision) */
static int shortest_digits(double x, int single) {
  char buf[64];
  int p;
  for (p = 1; p < 17; ++p) {
    snprintf(buf, sizeof(buf), "%.*e", p - 1, x);
    if (single ? (strtof(buf, NULL) == (float)x) : (strtod(buf, NULL) == x)) return p;
  }
  return 17;
}

/* x positional: the shortest unique digits, at most `prec` after the point (numpy's
   dragon4_positional, unique, trim '.'): "1.", "0.5", "-2.25" */
static void positional(double x, int single, int prec, char* out, size_t n) {
  char buf[96];
  int p = shortest_digits(x, single), e, frac;
  char* dot;
  size_t len;
  if (x == 0) {
    snprintf(out, n, signbit(x) ? "-0." : "0.");
    return;
  }
  e = (int)floor(log10(fabs(x)));
  snprintf(buf, sizeof(buf), "%.*e", p - 1, x); /* correct the exponent from the digits */
  e = atoi(strchr(buf, 'e') + 1);
  frac = p - 1 - e;
  if (frac < 0) frac = 0;
  if (frac > prec) frac = prec;
  snprintf(buf, sizeof(buf), "%.*f", frac, x);
  dot = strchr(buf, '.');
  if (dot == NULL) {
    len = strlen(buf);
    buf[len] = '.';
    buf[len + 1] = '\0';
  } else {
    len = strlen(buf);
    while (len > 0 && buf[len - 1] == '0') buf[--len] = '\0';
  }
  snprintf(out, n, "%s", buf);
}

/* x scientific: mantissa digits (shortest unique, at most prec after the point, padded with
   zeros to `digits` when digits >= 0), "e", sign and at least `exp_digits` exponent digits */
static void scientific(double x, int single, int prec, int digits, int exp_digits, char* out,
                       size_t n) {
  char buf[96], mant[96];
  int p = x == 0 ? 1 : shortest_digits(x, single), e, frac;
  size_t len;
  frac = p - 1;
  if (frac > prec) frac = prec;
  snprintf(buf, sizeof(buf), "%.*e", frac, x);
  e = atoi(strchr(buf, 'e') + 1);
  *strchr(buf, 'e') = '\0';
  snprintf(mant, sizeof(mant), "%s", buf);
  if (strchr(mant, '.') == NULL) strcat(mant, ".");
  len = strlen(mant);
  while (len > 0 && mant[len - 1] == '0') mant[--len] = '\0';
  if (digits >= 0) {
    int have = (int)(len - (size_t)(strchr(mant, '.') - mant) - 1);
    while (have++ < digits && len + 1 < sizeof(mant)) mant[len++] = '0', mant[len] = '\0';
  }
  snprintf(out, n, "%se%c%0*d", mant, e < 0 ? '-' : '+', exp_digits, e < 0 ? -e : e);
}

/* the element formatter of one array (numpy's FloatingFormat / IntegerFormat / BoolFormat) */
typedef struct {
  int kind; /* 0 int, 1 uint64 beyond int64, 2 float, 3 bool */
  int single, exp, precision, pad_left, pad_right, exp_digits, width;
} fmt;

static void fmt_float_value(const fmt* f, double x, sbuf* b) {
  char text[96];
  if (!isfinite(x)) {
    const char* s = isnan(x) ? "nan" : x < 0 ? "-inf" : "inf";
    pad(b, f->pad_left + f->pad_right + 1 - (int)strlen(s));
    puts_(b, s);
    return;
  }
  if (f->exp) {
    char* dot;
    scientific(x, f->single, f->precision, f->precision, f->exp_digits, text, sizeof(text));
    dot = strchr(text, '.');
    pad(b, f->pad_left - (int)(dot - text));
    puts_(b, text);
  } else {
    char* dot;
    int frac;
    positional(x, f->single, f->precision, text, sizeof(text));
    dot = strchr(text, '.');
    frac = (int)strlen(dot + 1);
    pad(b, f->pad_left - (int)(dot - text));
    puts_(b, text);
    pad(b, f->pad_right - frac);
  }
}

static void fmt_init(fmt* f, const DLTensor* t, const int64_t* idx, int64_t count) {
  int64_t k;
  memset(f, 0, sizeof(*f));
  if (is_bool_dtype(t->dtype)) {
    f->kind = 3;
    return;
  }
  if (!is_float_dtype(t->dtype)) {
    char text[32];
    f->kind = t->dtype.code == kDLUInt && t->dtype.bits == 64 ? 1 : 0;
    for (k = 0; k < count; ++k) {
      uint64_t u;
      int64_t v = elem_i(t, idx[k], &u);
      int w = f->kind == 1 ? snprintf(text, sizeof(text), "%llu", (unsigned long long)u)
                           : snprintf(text, sizeof(text), "%lld", (long long)v);
      if (w > f->width) f->width = w;
    }
    return;
  }
  f->kind = 2;
  f->single = t->dtype.bits != 64;
  f->precision = 8;
  {
    double mx = 0, mn = 0;
    int any = 0, finite = 0, neg_inf = 0, nonfinite = 0;
    for (k = 0; k < count; ++k) {
      double x = elem_f(t, idx[k]), a = fabs(x);
      if (!isfinite(x)) {
        nonfinite = 1;
        if (isinf(x) && x < 0) neg_inf = 1;
        continue;
      }
      finite = 1;
      if (a == 0) continue;
      if (!any || a > mx) mx = a;
      if (!any || a < mn) mn = a;
      any = 1;
    }
    if (any && (mx >= 1e8 || mn < 0.0001 || mx / mn > 1000.0)) f->exp = 1;
    if (finite) {
      int max_int = 0, max_frac = 0, max_exp = 0;
      for (k = 0; k < count; ++k) {
        double x = elem_f(t, idx[k]);
        char text[96], *dot, *e;
        if (!isfinite(x)) continue;
        if (f->exp) scientific(x, f->single, 8, -1, 2, text, sizeof(text));
        else positional(x, f->single, 8, text, sizeof(text));
        dot = strchr(text, '.');
        e = strchr(text, 'e');
        if ((int)(dot - text) > max_int) max_int = (int)(dot - text);
        {
          int frac = (int)((e != NULL ? (size_t)(e - dot) : strlen(dot)) - 1);
          if (frac > max_frac) max_frac = frac;
        }
        if (e != NULL && (int)strlen(e + 2) > max_exp) max_exp = (int)strlen(e + 2);
      }
      f->pad_left = max_int;
      if (f->exp) {
        f->precision = max_frac;
        f->exp_digits = max_exp;
        f->pad_right = max_exp + 2 + max_frac;
      } else {
        f->pad_right = max_frac;
      }
    }
    if (nonfinite) {
      int offset = f->pad_right + 1, nanlen = 3, inflen = 3 + neg_inf;
      if (nanlen - offset > f->pad_left) f->pad_left = nanlen - offset;
      if (inflen - offset > f->pad_left) f->pad_left = inflen - offset;
    }
  }
}

static void fmt_value(const fmt* f, const DLTensor* t, int64_t i, int scalar, sbuf* b) {
  char text[48];
  if (f->kind == 3) {
    puts_(b, elem_i(t, i, NULL) ? (scalar ? "True" : " True") : "False");
  } else if (f->kind == 2) {
    fmt_float_value(f, elem_f(t, i), b);
  } else {
    uint64_t u;
    int64_t v = elem_i(t, i, &u);
    int w = f->kind == 1 ? snprintf(text, sizeof(text), "%llu", (unsigned long long)u)
                         : snprintf(text, sizeof(text), "%lld", (long long)v);
    pad(b, f->width - w);
    puts_(b, text);
  }
}

/* a 0-d array as numpy's str(): the scalar's str() (Python's float repr) */
static void scalar_str(const DLTensor* t, sbuf* b) {
  char text[64];
  if (is_bool_dtype(t->dtype)) {
    puts_(b, elem_i(t, 0, NULL) ? "True" : "False");
  } else if (is_float_dtype(t->dtype)) {
    double x = elem_f(t, 0);
    int single = t->dtype.bits != 64, p;
    if (isnan(x)) {
      puts_(b, "nan");
      return;
    }
    if (isinf(x)) {
      puts_(b, x < 0 ? "-inf" : "inf");
      return;
    }
    p = shortest_digits(x, single);
    snprintf(text, sizeof(text), "%.*e", p - 1, x);
    {
      int e = atoi(strchr(text, 'e') + 1);
      if (e < -4 || e >= 16) { /* Python's repr: scientific, "1e-05" */
        char* m = text;
        char* ex = strchr(text, 'e');
        *ex = '\0';
        {
          size_t len = strlen(m);
          if (strchr(m, '.')) {
            while (m[len - 1] == '0') m[--len] = '\0';
            if (m[len - 1] == '.') m[--len] = '\0';
          }
        }
        snprintf(text + 32, 32, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
        puts_(b, m);
        puts_(b, text + 32);
      } else {
        int frac = p - 1 - e;
        snprintf(text, sizeof(text), "%.*f", frac < 1 ? 1 : frac, x);
        puts_(b, text);
      }
    }
  } else {
    uint64_t u;
    int64_t v = elem_i(t, 0, &u);
    if (t->dtype.code == kDLUInt && t->dtype.bits == 64)
      snprintf(text, sizeof(text), "%llu", (unsigned long long)u);
    else snprintf(text, sizeof(text), "%lld", (long long)v);
    puts_(b, text);
  }
}

/* array2string: rows wrapped at 75 columns, dims past the edges summarized */
typedef struct {
  const DLTensor* t;
  const fmt* f;
  int summarize;
  int64_t strides[RT_MAX_NDIM];
  sbuf* b;
} printer;

#define EDGE 3

static void print_dim(printer* p, int axis, int64_t base, const char* hanging) {
  const DLTensor* t = p->t;
  int64_t n = t->shape[axis], k;
  int last = axis == t->ndim - 1;
  size_t line_start;
  char next_hang[RT_MAX_NDIM + 8];
  snprintf(next_hang, sizeof(next_hang), "%s ", hanging);
  puts_(p->b, "[");
  line_start = p->b->n - strlen(hanging) - 1;
  {
    const char* nl = p->b->s != NULL ? strrchr(p->b->s, '\n') : NULL;
    line_start = nl != NULL ? (size_t)(nl - p->b->s) + 1 : 0;
  }
  for (k = 0; k < n; ++k) {
    if (p->summarize && n > 2 * EDGE && k == EDGE) {
      if (last) {
        puts_(p->b, " ...");
      } else {
        puts_(p->b, "\n");
        puts_(p->b, next_hang);
        puts_(p->b, "...");
        puts_(p->b, axis == t->ndim - 2 ? "\n" : "\n\n");
        puts_(p->b, next_hang);
      }
      k = n - EDGE;
      if (last) puts_(p->b, "");
    }
    if (last) {
      sbuf word = {NULL, 0, 0, 0};
      fmt_value(p->f, t, base + k * p->strides[axis], 0, &word);
      if (k > 0 && !(p->summarize && n > 2 * EDGE && k == n - EDGE)) puts_(p->b, " ");
      else if (k > 0) puts_(p->b, " ");
      if (word.s != NULL && p->b->n - line_start + word.n + 1 > 75 && k > 0) {
        p->b->n--; /* the separator goes to the end of the line */
        puts_(p->b, "\n");
        puts_(p->b, next_hang);
        line_start = p->b->n - strlen(next_hang);
      }
      if (word.s != NULL) put(p->b, word.s, word.n);
      free(word.s);
    } else {
      if (k > 0 && !(p->summarize && n > 2 * EDGE && k == n - EDGE)) {
        int blank;
        puts_(p->b, "\n");
        for (blank = 0; blank < t->ndim - axis - 2; ++blank) puts_(p->b, "\n");
        puts_(p->b, next_hang);
      }
      print_dim(p, axis + 1, base + k * p->strides[axis], next_hang);
    }
  }
  puts_(p->b, "]");
}

static int render_tensor(const DLTensor* t, sbuf* b) {
  int64_t count = 1, i, *idx;
  int d;
  printer p;
  fmt f;
  if (t->ndim == 0) {
    scalar_str(t, b);
    return 0;
  }
  for (d = 0; d < t->ndim; ++d) count *= t->shape[d];
  memset(&p, 0, sizeof(p));
  p.t = t;
  p.b = b;
  p.f = &f;
  p.summarize = count > 1000;
  p.strides[t->ndim - 1] = 1;
  for (d = t->ndim - 2; d >= 0; --d) p.strides[d] = p.strides[d + 1] * t->shape[d + 1];
  /* the elements the formatter sizes itself on: all, or the edges when summarized */
  idx = (int64_t*)malloc((size_t)(count ? count : 1) * sizeof(int64_t));
  if (idx == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot render a tensor");
  {
    int64_t m = 0;
    for (i = 0; i < count; ++i) {
      int keep = 1;
      if (p.summarize) {
        int64_t rest = i;
        for (d = t->ndim - 1; d >= 0; --d) {
          int64_t c = rest % t->shape[d];
          rest /= t->shape[d];
          if (t->shape[d] > 2 * EDGE && c >= EDGE && c < t->shape[d] - EDGE) keep = 0;
        }
      }
      if (keep) idx[m++] = i;
    }
    fmt_init(&f, t, idx, m);
  }
  free(idx);
  if (count == 0) {
    puts_(b, "[]");
    return 0;
  }
  print_dim(&p, 0, 0, "");
  return 0;
}

/* a value as TVM's render_object writes it */
static int render(rx_vm* vm, rx_value v, sbuf* b, int depth) {
  char text[64];
  switch (v.kind) {
    case RX_TENSOR: {
      tvmrt_ndarray* a = tvmrt_rx_tensor(v);
      if (a->dl.device.device_type != kDLCPU) {
        rx_value host = {RX_NULL, 0, {0}};
        DLDevice cpu = {kDLCPU, 0};
        int rc;
        if (tvmrt_rx_to_device(vm, v, cpu, &host) != 0) return -1;
        rc = render_tensor(&tvmrt_rx_tensor(host)->dl, b);
        tvmrt_rx_release(&host);
        return rc;
      }
      return render_tensor(&a->dl, b);
    }
    case RX_TUPLE: {
      rx_tuple* t = tvmrt_rx_tuple(v);
      size_t i;
      if (depth >= RX_MAX_NESTING) {
        return tvmrt_fail("InvalidArgumentError",
                          "relax.run.print: a tuple nested more than %d levels deep",
                          RX_MAX_NESTING);
      }
      puts_(b, "(");
      for (i = 0; i < t->size; ++i) {
        if (i) puts_(b, ", ");
        if (render(vm, t->items[i], b, depth + 1) != 0) return -1;
      }
      puts_(b, ")");
      return 0;
    }
    case RX_SHAPE: {
      rx_shape* s = tvmrt_rx_shape(v);
      size_t i;
      puts_(b, "[");
      for (i = 0; i < s->ndim; ++i) {
        snprintf(text, sizeof(text), "%s%lld", i ? ", " : "", (long long)s->dims[i]);
        puts_(b, text);
      }
      puts_(b, "]");
      return 0;
    }
    case RX_STR: puts_(b, tvmrt_rx_str(v)->data); return 0;
    case RX_INT: snprintf(text, sizeof(text), "%lld", (long long)v.v.i); break;
    case RX_BOOL: snprintf(text, sizeof(text), "%s", v.v.i ? "True" : "False"); break;
    case RX_FLOAT: {
      DLTensor t;
      int64_t one = 1;
      memset(&t, 0, sizeof(t));
      t.data = &v.v.f;
      t.shape = &one;
      t.dtype.code = kDLFloat;
      t.dtype.bits = 64;
      t.dtype.lanes = 1;
      scalar_str(&t, b);
      return 0;
    }
    case RX_NULL: snprintf(text, sizeof(text), "None"); break;
    default: snprintf(text, sizeof(text), "%s", tvmrt_rx_type_key(v)); break;
  }
  puts_(b, text);
  return 0;
}

/* format.format(*rendered): "{}" and "{N}" (automatic or explicit positions), "{{" and "}}" */
static int python_format(const char* format, char** parts, int nparts, sbuf* out) {
  const char* p = format;
  int next = 0, manual = -1;
  while (*p) {
    if (p[0] == '{' && p[1] == '{') {
      puts_(out, "{");
      p += 2;
    } else if (p[0] == '}' && p[1] == '}') {
      puts_(out, "}");
      p += 2;
    } else if (*p == '{') {
      const char* end = strchr(p, '}');
      int index;
      if (end == NULL)
        return tvmrt_fail("InvalidArgumentError", "Single '{' encountered in format string");
      if (end == p + 1) {
        if (manual == 1)
          return tvmrt_fail(
              "InvalidArgumentError",
              "cannot switch from manual field specification to automatic field numbering");
        manual = 0;
        index = next++;
      } else {
        char* stop;
        long v = strtol(p + 1, &stop, 10);
        if (stop != end || v < 0) {
          return tvmrt_fail("UnsupportedError",
                            "relax.run: format field '%.*s' (tvmrt formats {} and {N} fields)",
                            (int)(end - p + 1), p);
        }
        if (manual == 0)
          return tvmrt_fail(
              "InvalidArgumentError",
              "cannot switch from automatic field numbering to manual field specification");
        manual = 1;
        index = (int)v;
      }
      if (index >= nparts) {
        return tvmrt_fail("IndexOutOfRangeError",
                          "Replacement index %d out of range for positional args tuple", index);
      }
      puts_(out, parts[index]);
      p = end + 1;
    } else if (*p == '}') {
      return tvmrt_fail("InvalidArgumentError", "Single '}' encountered in format string");
    } else {
      put(out, p, 1);
      ++p;
    }
  }
  return 0;
}

/* the rendered values, then the message: format.format(*them), or them joined by `sep` */
static int message(rx_vm* vm, const char* format, rx_value* values, int n, const char* sep,
                   sbuf* out) {
  char** parts = (char**)calloc((size_t)(n ? n : 1), sizeof(char*));
  int i, rc = 0;
  if (parts == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot render values");
  for (i = 0; i < n && rc == 0; ++i) {
    sbuf b = {NULL, 0, 0, 0};
    rc = render(vm, values[i], &b, 0);
    if (b.oom) rc = tvmrt_fail("DeviceOutOfMemoryError", "cannot render a value");
    parts[i] = b.s != NULL ? b.s : strdup("");
  }
  if (rc == 0) {
    if (*format) {
      rc = python_format(format, parts, n, out);
    } else {
      for (i = 0; i < n; ++i) {
        if (i) puts_(out, sep);
        puts_(out, parts[i]);
      }
    }
  }
  for (i = 0; i < n; ++i) free(parts[i]);
  free(parts);
  if (rc == 0 && out->oom) rc = tvmrt_fail("DeviceOutOfMemoryError", "cannot render a message");
  return rc;
}

static const char* format_arg(rx_value v) {
  rx_str* s = tvmrt_rx_str(v);
  return s != NULL ? s->data : NULL;
}

/* ---------------------------------------------------------------------------------- */
/* the functions                                                                       */

static int r_print(rx_vm* vm, rx_value* a, int n, rx_value* ret) {
  sbuf out = {NULL, 0, 0, 0};
  const char* format;
  ret->kind = RX_NULL;
  if (n < 1 || (format = format_arg(a[0])) == NULL) {
    return tvmrt_fail("ArgumentTypeError", "relax.run.print takes (format: str, *values)");
  }
  if (message(vm, format, a + 1, n - 1, " ", &out) != 0) {
    free(out.s);
    return -1;
  }
  fputs(out.s != NULL ? out.s : "", stdout);
  fputc('\n', stdout);
  fflush(stdout);
  free(out.s);
  return 0;
}

static int r_assert_op(rx_vm* vm, rx_value* a, int n, rx_value* ret) {
  const char* format;
  int64_t cond;
  ret->kind = RX_NULL;
  if (n < 2 || (format = format_arg(a[1])) == NULL) {
    return tvmrt_fail("InvalidArgumentError",
                      "The format string argument to assert must be a string, given %s",
                      n >= 2 ? tvmrt_rx_type_key(a[1]) : "nothing");
  }
  if (a[0].kind == RX_INT || a[0].kind == RX_BOOL) {
    cond = a[0].v.i;
  } else if (a[0].kind == RX_TENSOR) {
    tvmrt_ndarray* t = tvmrt_rx_tensor(a[0]);
    if (!is_bool_dtype(t->dl.dtype)) {
      return tvmrt_fail("InvalidArgumentError",
                        "The condition must be a bool scalar, but given a tensor of type code %u",
                        t->dl.dtype.code);
    }
    if (t->dl.ndim != 0) {
      return tvmrt_fail("InvalidArgumentError",
                        "The condition must be a scalar, but it has a shape of %d dimensions",
                        t->dl.ndim);
    }
    if (t->dl.device.device_type != kDLCPU) {
      rx_value host = {RX_NULL, 0, {0}};
      DLDevice cpu = {kDLCPU, 0};
      if (tvmrt_rx_to_device(vm, a[0], cpu, &host) != 0) return -1;
      cond = elem_i(&tvmrt_rx_tensor(host)->dl, 0, NULL);
      tvmrt_rx_release(&host);
    } else {
      cond = elem_i(&t->dl, 0, NULL);
    }
  } else {
    return tvmrt_fail("InvalidArgumentError",
                      "The condition for relax assert must be a bool, int, or NDArray, but "
                      "received a %s.",
                      tvmrt_rx_type_key(a[0]));
  }
  if (!cond) {
    sbuf out = {NULL, 0, 0, 0};
    int rc = 0;
    if (n > 2 || *format) rc = message(vm, format, a + 2, n - 2, ", ", &out);
    if (rc == 0)
      rc = tvmrt_fail("AssertionFailedError", "%s", out.s != NULL ? out.s : "Assertion Failed");
    free(out.s);
    return rc;
  }
  return 0;
}

static int host_tensor(rx_vm* vm, const char* fn, rx_value v, rx_value* host) {
  DLDevice cpu = {kDLCPU, 0};
  tvmrt_ndarray* t = tvmrt_rx_tensor(v);
  if (t == NULL) {
    return tvmrt_fail("ArgumentTypeError", "%s: expected a tensor, got %s", fn,
                      tvmrt_rx_type_key(v));
  }
  if (!tvmrt_is_compact(&t->dl) || t->dl.dtype.lanes != 1)
    return tvmrt_fail("ArgumentTypeError", "%s: expected a compact tensor of scalars", fn);
  return tvmrt_rx_to_device(vm, v, cpu, host);
}

static int r_shape_to_tensor(rx_vm* vm, rx_value* a, int n, rx_value* ret) {
  rx_shape* s;
  DLDataType i64 = {kDLInt, 64, 1}, f64 = {kDLFloat, 64, 1};
  DLDevice cpu = {kDLCPU, 0};
  int64_t len;
  if (n != 1 || (s = tvmrt_rx_shape(a[0])) == NULL) {
    return tvmrt_fail("ArgumentTypeError", "relax.run.shape_to_tensor takes one Shape, got %s",
                      n ? tvmrt_rx_type_key(a[0]) : "nothing");
  }
  len = (int64_t)s->ndim;
  /* tvm.nd.array([]) is numpy's float64 empty array */
  if (tvmrt_rx_empty(vm, &len, 1, s->ndim ? i64 : f64, cpu, ret) != 0) return -1;
  if (s->ndim) memcpy(tvmrt_rx_tensor(*ret)->dl.data, s->dims, s->ndim * sizeof(int64_t));
  return 0;
}

static int r_nonzero(rx_vm* vm, rx_value* a, int n, rx_value* ret) {
  rx_value host = {RX_NULL, 0, {0}};
  const DLTensor* t;
  int64_t count = 1, i, found = 0, shape[2], *out;
  int ndim, d;
  DLDataType i64 = {kDLInt, 64, 1};
  DLDevice cpu = {kDLCPU, 0};
  size_t esize;
  if (n != 1) return tvmrt_fail("InvalidArgumentError", "relax.run.nonzero takes one tensor");
  if (host_tensor(vm, "relax.run.nonzero", a[0], &host) != 0) return -1;
  t = &tvmrt_rx_tensor(host)->dl;
  ndim = t->ndim ? t->ndim : 1; /* np.atleast_1d */
  for (d = 0; d < t->ndim; ++d) count *= t->shape[d];
  esize = ((size_t)t->dtype.bits + 7) / 8;
  for (i = 0; i < count; ++i) {
    const unsigned char* p = (const unsigned char*)t->data + t->byte_offset + (size_t)i * esize;
    size_t k;
    int nz = 0;
    if (is_float_dtype(t->dtype)) nz = elem_f(t, i) != 0;
    else
      for (k = 0; k < esize; ++k) nz |= p[k] != 0;
    found += nz;
  }
  shape[0] = ndim;
  shape[1] = found;
  if (tvmrt_rx_empty(vm, shape, 2, i64, cpu, ret) != 0) {
    tvmrt_rx_release(&host);
    return -1;
  }
  out = (int64_t*)tvmrt_rx_tensor(*ret)->dl.data;
  for (i = 0, found = 0; i < count; ++i) {
    const unsigned char* p = (const unsigned char*)t->data + t->byte_offset + (size_t)i * esize;
    size_t k;
    int nz = 0;
    if (is_float_dtype(t->dtype)) nz = elem_f(t, i) != 0;
    else
      for (k = 0; k < esize; ++k) nz |= p[k] != 0;
    if (nz) {
      int64_t rest = i;
      for (d = ndim - 1; d >= 0; --d) {
        int64_t extent = t->ndim ? t->shape[d] : 1;
        out[d * shape[1] + found] = rest % extent;
        rest /= extent;
      }
      ++found;
    }
  }
  tvmrt_rx_release(&host);
  return 0;
}

/* np.unique's order: numbers ascending, NaN last (all NaNs one value) */
static int cmp_elems(const DLTensor* t, int64_t x, int64_t y) {
  if (is_float_dtype(t->dtype)) {
    double a = elem_f(t, x), b = elem_f(t, y);
    if (isnan(a) || isnan(b)) return isnan(a) - isnan(b);
    return (a > b) - (a < b);
  }
  if (t->dtype.code == kDLUInt || is_bool_dtype(t->dtype)) {
    uint64_t a, b;
    elem_i(t, x, &a);
    elem_i(t, y, &b);
    return (a > b) - (a < b);
  }
  {
    int64_t a = elem_i(t, x, NULL), b = elem_i(t, y, NULL);
    return (a > b) - (a < b);
  }
}

static const DLTensor* g_sort_tensor; /* qsort's context (the sort is under g_sort_mu) */
static int64_t g_slice, g_outer_stride, g_axis_stride; /* a slice along an axis */
static pthread_mutex_t g_sort_mu = PTHREAD_MUTEX_INITIALIZER;

/* two slices along the axis (indexes into it), lexicographically, then by position */
static int cmp_slices(const void* pa, const void* pb) {
  int64_t a = *(const int64_t*)pa, b = *(const int64_t*)pb, k;
  for (k = 0; k < g_slice; ++k) {
    int64_t outer = k / g_outer_stride, inner = k % g_outer_stride;
    int64_t ia = outer * g_axis_stride + a * g_outer_stride + inner;
    int64_t ib = outer * g_axis_stride + b * g_outer_stride + inner;
    int c = cmp_elems(g_sort_tensor, ia, ib);
    if (c) return c;
  }
  return (a > b) - (a < b); /* stable: the first occurrence first */
}

static int same_slice(const DLTensor* t, int64_t a, int64_t b) {
  int64_t k;
  for (k = 0; k < g_slice; ++k) {
    int64_t outer = k / g_outer_stride, inner = k % g_outer_stride;
    if (cmp_elems(t, outer * g_axis_stride + a * g_outer_stride + inner,
                  outer * g_axis_stride + b * g_outer_stride + inner) != 0)
      return 0;
  }
  return 1;
}

static int r_unique(rx_vm* vm, rx_value* a, int n, rx_value* ret) {
  const char* fn = "relax.run.unique";
  rx_value host = {RX_NULL, 0, {0}};
  const DLTensor* t;
  int64_t extent, *order = NULL, *keep = NULL, nkeep = 0, i, k, axis = -1, count = 1;
  int64_t out_shape[RT_MAX_NDIM];
  int sorted, d, out_ndim;
  size_t esize;
  if (n < 5 || n > 6) return tvmrt_fail("InvalidArgumentError", "%s takes 5 or 6 arguments", fn);
  for (i = 1; i < 5; ++i) {
    if (a[i].kind != RX_INT && a[i].kind != RX_BOOL)
      return tvmrt_fail("ArgumentTypeError", "%s: argument %lld must be an int", fn, (long long)i);
  }
  if (a[2].v.i || a[3].v.i || a[4].v.i) {
    return tvmrt_fail("UnsupportedError",
                      "missing support return_inverse or return_counts set to true");
  }
  sorted = a[1].v.i != 0;
  if (host_tensor(vm, fn, a[0], &host) != 0) return -1;
  t = &tvmrt_rx_tensor(host)->dl;
  for (d = 0; d < t->ndim; ++d) count *= t->shape[d];
  if (n == 6 && a[5].kind != RX_NULL) {
    if (a[5].kind != RX_INT) {
      tvmrt_rx_release(&host);
      return tvmrt_fail("ArgumentTypeError", "%s: axis must be an int or None", fn);
    }
    axis = a[5].v.i < 0 ? a[5].v.i + t->ndim : a[5].v.i;
    if (axis < 0 || axis >= t->ndim) {
      tvmrt_rx_release(&host);
      return tvmrt_fail("InvalidArgumentError",
                        "%s: axis %lld is out of bounds for array of "
                        "dimension %d",
                        fn, (long long)a[5].v.i, t->ndim);
    }
  }
  if (axis < 0) { /* flattened: slices of one element */
    extent = count;
    g_slice = 1;
    g_outer_stride = 1;
    g_axis_stride = count;
  } else {
    int64_t inner = 1;
    for (d = (int)axis + 1; d < t->ndim; ++d) inner *= t->shape[d];
    extent = t->shape[axis];
    g_outer_stride = inner;
    g_axis_stride = extent * inner;
    g_slice = extent ? count / extent : 0;
  }
  order = (int64_t*)malloc((size_t)(extent ? extent : 1) * sizeof(int64_t));
  keep = (int64_t*)malloc((size_t)(extent ? extent : 1) * sizeof(int64_t));
  if (order == NULL || keep == NULL) {
    free(order);
    free(keep);
    tvmrt_rx_release(&host);
    return tvmrt_fail("DeviceOutOfMemoryError", "%s: no memory", fn);
  }
  for (i = 0; i < extent; ++i) order[i] = i;
  pthread_mutex_lock(&g_sort_mu);
  g_sort_tensor = t;
  qsort(order, (size_t)extent, sizeof(int64_t), cmp_slices);
  for (i = 0; i < extent; ++i) { /* the first of each run of equal slices */
    if (nkeep > 0 && same_slice(t, keep[nkeep - 1], order[i])) continue;
    keep[nkeep++] = order[i];
  }
  pthread_mutex_unlock(&g_sort_mu);
  if (!sorted) { /* np.take(x, sorted(indices)): first occurrences in input order */
    for (i = 1; i < nkeep; ++i) {
      int64_t v = keep[i], j = i;
      while (j > 0 && keep[j - 1] > v) keep[j] = keep[j - 1], --j;
      keep[j] = v;
    }
  }
  if (axis < 0) {
    out_ndim = 1;
    out_shape[0] = nkeep;
  } else {
    out_ndim = t->ndim;
    for (d = 0; d < t->ndim; ++d) out_shape[d] = t->shape[d];
    out_shape[axis] = nkeep;
  }
  esize = ((size_t)t->dtype.bits + 7) / 8;
  if (tvmrt_rx_empty(vm, out_shape, out_ndim, t->dtype, t->device, ret) == 0) {
    char* dst = (char*)tvmrt_rx_tensor(*ret)->dl.data;
    const char* src = (const char*)t->data + t->byte_offset;
    int64_t outer_n = g_slice && g_outer_stride ? g_slice / g_outer_stride : 0;
    for (k = 0; k < outer_n; ++k) {
      for (i = 0; i < nkeep; ++i) {
        memcpy(dst + (size_t)((k * nkeep + i) * g_outer_stride) * esize,
               src + (size_t)(k * g_axis_stride + keep[i] * g_outer_stride) * esize,
               (size_t)g_outer_stride * esize);
      }
    }
  }
  free(order);
  free(keep);
  tvmrt_rx_release(&host);
  return ret->kind == RX_TENSOR ? 0 : -1;
}

static const rx_builtin k_run[] = {
    {"relax.run.shape_to_tensor", r_shape_to_tensor},
    {"relax.run.print", r_print},
    {"relax.run.assert_op", r_assert_op},
    {"relax.run.unique", r_unique},
    {"relax.run.nonzero", r_nonzero},
};

const rx_builtin* tvmrt_rx_run_table(size_t* count) {
  *count = sizeof(k_run) / sizeof(k_run[0]);
  return k_run;
}

const rx_builtin* tvmrt_rx_run_builtin(const char* name) {
  size_t i;
  for (i = 0; i < sizeof(k_run) / sizeof(k_run[0]); ++i) {
    if (strcmp(k_run[i].name, name) == 0) return &k_run[i];
  }
  return NULL;
}
