/*
 * The words the C runtime's packed functions use for a caller's bad argument, once for every
 * face: how many arguments a function takes, a value as Python would name it
 * (`type(value).__name__` and `repr(value)`, since the Python faces say "got float 3.5" or
 * "got NoneType" for the same mistake), and a dtype as TVM writes it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

int tvmrt_arity(const char* fn, int n, int lo, int hi) {
  if (n >= lo && (hi < 0 || n <= hi)) return 0;
  if (hi == lo)
    return tvmrt_fail("InvalidArgumentError", "%s takes %d arguments, got %d", fn, lo, n);
  if (hi < 0)
    return tvmrt_fail("InvalidArgumentError", "%s takes at least %d arguments, got %d", fn, lo, n);
  return tvmrt_fail("InvalidArgumentError", "%s takes %d to %d arguments, got %d", fn, lo, hi, n);
}

const char* tvmrt_py_type_name(int code) {
  switch (code) {
    case kDLInt:
    case kDLUInt: return "int";
    case kDLFloat: return "float";
    case kTVMStr: return "str";
    case kTVMBytes: return "bytes";
    case kTVMNullptr: return "NoneType";
    case kTVMNDArrayHandle:
    case kTVMDLTensorHandle: return "NDArray";
    case kTVMModuleHandle: return "Module";
    case kTVMPackedFuncHandle: return "PackedFunc";
    default: return "an object";
  }
}

void tvmrt_float_repr(double v, char* buf, size_t n) {
  int digits;
  for (digits = 15; digits <= 17; ++digits) {
    snprintf(buf, n, "%.*g", digits, v);
    if (strtod(buf, NULL) == v) break;
  }
  if (isfinite(v) && strpbrk(buf, ".e") == NULL) snprintf(buf + strlen(buf), n - strlen(buf), ".0");
}

void tvmrt_py_value_words(TVMValue v, int code, char* buf, size_t n) {
  char number[40];
  switch (code) {
    case kDLInt: snprintf(buf, n, "int %lld", (long long)v.v_int64); return;
    case kDLFloat:
      tvmrt_float_repr(v.v_float64, number, sizeof(number));
      snprintf(buf, n, "float %s", number);
      return;
    case kTVMStr: snprintf(buf, n, "str '%.200s'", v.v_str ? v.v_str : ""); return;
    case kTVMNullptr: snprintf(buf, n, "NoneType None"); return;
    default: snprintf(buf, n, "type code %d", code);
  }
}

const char* tvmrt_dtype_text(DLDataType t, char* buf, size_t n) {
  static const char* const names[] = {"int", "uint", "float", "handle", "bfloat", "", "bool"};
  if (t.code == kDLUInt && t.bits == 1 && t.lanes == 1) {
    snprintf(buf, n, "bool");
  } else if (t.code == 6 && t.bits == 8) {
    snprintf(buf, n, t.lanes == 1 ? "bool" : "boolx%u", (unsigned)t.lanes);
  } else if (t.code == kDLOpaqueHandle && t.bits == 0 && t.lanes == 0) {
    snprintf(buf, n, "void");
  } else if (t.code < 7 && *names[t.code]) {
    if (t.lanes == 1) snprintf(buf, n, "%s%u", names[t.code], (unsigned)t.bits);
    else snprintf(buf, n, "%s%ux%u", names[t.code], (unsigned)t.bits, (unsigned)t.lanes);
  } else {
    snprintf(buf, n, "type(code %u, bits %u, lanes %u)", t.code, t.bits, t.lanes);
  }
  return buf;
}
