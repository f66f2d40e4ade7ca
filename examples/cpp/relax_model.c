/*
 * A Relax model from C with tvmrt's C runtime (TVM's C API, no Python, no C++): a model.so of
 * `relax.build` (TVM 0.16-0.19) or `tvm.compile` (TVM 0.20-0.27) + export_library, run as
 * TVM's own C++ deployment runs it: load the library, make a VirtualMachine, initialise it
 * on the CPU, call `main`, read the result (tuples are walked depth first).
 *
 *   relax_model MODEL.so [-o OUT_PREFIX] INPUT...
 *
 * An INPUT is a .npy file, or a fill: SHAPE:DTYPE[=VALUE] with SHAPE as d0xd1x... (nothing
 * for a scalar), e.g. 1x16:float32=0.5 or :bool=1. Each output is printed (its first
 * values); with -o, output k is also written to OUT_PREFIX<k>.npy. `make relax_model` builds
 * it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tvm/runtime/c_runtime_api.h>

#define CHECK(call)                                                                                \
  do {                                                                                             \
    if ((call) != 0) {                                                                             \
      fprintf(stderr, "%s failed: %s\n", #call, TVMGetLastError());                                \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)
#define MAX_INPUTS 64

static size_t nbytes(const DLTensor* t) {
  size_t n = (size_t)(t->dtype.bits * t->dtype.lanes + 7) / 8;
  int i;
  for (i = 0; i < t->ndim; ++i) n *= (size_t)t->shape[i];
  return n;
}

/* numpy's dtype names <-> DLPack's (code, bits) */
static const struct {
  const char *name, *npy;
  int code, bits;
} k_dtypes[] = {
    {"float32", "<f4", kDLFloat, 32}, {"float64", "<f8", kDLFloat, 64},
    {"float16", "<f2", kDLFloat, 16}, {"int64", "<i8", kDLInt, 64},
    {"int32", "<i4", kDLInt, 32},     {"int16", "<i2", kDLInt, 16},
    {"int8", "|i1", kDLInt, 8},       {"uint8", "|u1", kDLUInt, 8},
    {"bool", "|b1", kDLUInt, 1}, /* TVM's bool: (uint, 1), one byte each */
};
#define NUM_DTYPES (sizeof(k_dtypes) / sizeof(k_dtypes[0]))

static int dtype_index(const char* name, int npy) {
  size_t i;
  for (i = 0; i < NUM_DTYPES; ++i) {
    if (strcmp(npy ? k_dtypes[i].npy : k_dtypes[i].name, name) == 0) return (int)i;
  }
  fprintf(stderr, "unsupported dtype %s\n", name);
  exit(2);
}

static int dtype_of(const DLTensor* t) {
  size_t i;
  for (i = 0; i < NUM_DTYPES; ++i) {
    if (k_dtypes[i].code == t->dtype.code && k_dtypes[i].bits == t->dtype.bits) return (int)i;
  }
  return -1;
}

/* an input array: a .npy file (format 1.0, C order) or a SHAPE:DTYPE[=VALUE] fill */
static TVMArrayHandle make_input(const char* arg) {
  int64_t shape[32];
  int ndim = 0, d, i;
  TVMArrayHandle arr;
  const char* colon = strchr(arg, ':');
  if (colon == NULL) { /* a .npy file */
    FILE* f = fopen(arg, "rb");
    char magic[8], header[4096], descr[8] = "", *p;
    unsigned len = 0;
    if (f == NULL || fread(magic, 1, 8, f) != 8 || memcmp(magic, "\x93NUMPY", 6) != 0 ||
        fread(header, 1, 2, f) != 2) {
      fprintf(stderr, "%s is not a .npy file\n", arg);
      exit(2);
    }
    len = (unsigned char)header[0] | (unsigned char)header[1] << 8;
    if (len >= sizeof(header) || fread(header, 1, len, f) != len) exit(2);
    header[len] = '\0';
    if (strstr(header, "'fortran_order': False") == NULL ||
        (p = strstr(header, "'descr': '")) == NULL || sscanf(p + 10, "%7[^']", descr) != 1 ||
        (p = strstr(header, "'shape': (")) == NULL) {
      fprintf(stderr, "%s: expected a C-ordered array\n", arg);
      exit(2);
    }
    for (p += 10; *p != ')' && ndim < 32; ++p) {
      if (*p >= '0' && *p <= '9') shape[ndim++] = strtoll(p, &p, 10), --p;
    }
    d = dtype_index(descr, 1);
    CHECK(TVMArrayAlloc(shape, ndim, k_dtypes[d].code, k_dtypes[d].bits, 1, kDLCPU, 0, &arr));
    if (fread(arr->data, 1, nbytes(arr), f) != nbytes(arr)) {
      fprintf(stderr, "%s: fewer bytes than its shape needs\n", arg);
      exit(2);
    }
    fclose(f);
    return arr;
  }
  { /* a fill */
    char name[16] = "";
    double value = 0;
    const char* p = arg;
    size_t n;
    while (p < colon && ndim < 32) {
      shape[ndim++] = strtoll(p, (char**)&p, 10);
      if (*p == 'x') ++p;
    }
    if (sscanf(colon + 1, "%15[^=]=%lf", name, &value) < 1) exit(2);
    d = dtype_index(name, 0);
    CHECK(TVMArrayAlloc(shape, ndim, k_dtypes[d].code, k_dtypes[d].bits, 1, kDLCPU, 0, &arr));
    n = nbytes(arr) / (size_t)((k_dtypes[d].bits + 7) / 8);
    for (i = 0; (size_t)i < n; ++i) {
      char* at = (char*)arr->data;
      switch (d) {
        case 0: ((float*)at)[i] = (float)value; break;
        case 1: ((double*)at)[i] = value; break;
        case 3: ((int64_t*)at)[i] = (int64_t)value; break;
        case 4: ((int32_t*)at)[i] = (int32_t)value; break;
        case 5: ((int16_t*)at)[i] = (int16_t)value; break;
        case 2: exit(2); /* no float16 fills */
        default: at[i] = (char)value;
      }
    }
    return arr;
  }
}

static void write_npy(const char* prefix, int k, const DLTensor* t) {
  char path[4096], header[256];
  int d, used, di = dtype_of(t);
  FILE* f;
  if (di < 0) return;
  used = snprintf(header, sizeof(header), "{'descr': '%s', 'fortran_order': False, 'shape': (",
                  k_dtypes[di].npy);
  for (d = 0; d < t->ndim; ++d)
    used += snprintf(header + used, sizeof(header) - (size_t)used, "%lld%s", (long long)t->shape[d],
                     t->ndim == 1      ? ","
                     : d + 1 < t->ndim ? ", "
                                       : "");
  used += snprintf(header + used, sizeof(header) - (size_t)used, "), }");
  while ((10 + used + 1) % 64 != 0) header[used++] = ' '; /* the data 64-byte aligned */
  header[used++] = '\n';
  snprintf(path, sizeof(path), "%s%d.npy", prefix, k);
  f = fopen(path, "wb");
  if (f == NULL) exit(1);
  fwrite("\x93NUMPY\x01\x00", 1, 8, f);
  fputc(used & 0xff, f);
  fputc(used >> 8, f);
  fwrite(header, 1, (size_t)used, f);
  fwrite((const char*)t->data + t->byte_offset, 1, nbytes(t), f);
  fclose(f);
}

/* the runtime's readers of the VM's objects (TVM's global functions) */
static TVMFunctionHandle g_array_size, g_array_item, g_shape_size, g_shape_elem;

static int64_t call_int(TVMFunctionHandle f, TVMValue obj, int64_t i, int nargs) {
  TVMValue a[2], ret;
  int c[2] = {kTVMObjectHandle, kDLInt}, rc;
  a[0] = obj;
  a[1].v_int64 = i;
  CHECK(TVMFuncCall(f, a, c, nargs, &ret, &rc));
  return ret.v_int64;
}

/* print (and with -o write) one result, then free it: the handle is ours */
static void show(TVMValue v, int code, const char* prefix, int* k) {
  TVMValue a[2], ret;
  int c[2] = {kTVMObjectHandle, kDLInt}, rc, d;
  int64_t n, i;
  if (code == kTVMNDArrayHandle) { /* a tensor */
    DLTensor* t = (DLTensor*)v.v_handle;
    int di = dtype_of(t);
    printf("output %d: %s (", *k, di >= 0 ? k_dtypes[di].name : "?");
    for (d = 0; d < t->ndim; ++d) printf("%s%lld", d ? ", " : "", (long long)t->shape[d]);
    printf(")");
    n = di >= 0 ? (int64_t)(nbytes(t) / (size_t)((t->dtype.bits + 7) / 8)) : 0;
    for (i = 0; i < n && i < 6; ++i) {
      const char* at = (const char*)t->data + t->byte_offset;
      if (t->dtype.code == kDLFloat && t->dtype.bits == 32) printf(" %g", ((const float*)at)[i]);
      else if (t->dtype.code == kDLFloat && t->dtype.bits == 64)
        printf(" %g", ((const double*)at)[i]);
      else if (t->dtype.bits == 64) printf(" %lld", (long long)((const int64_t*)at)[i]);
      else if (t->dtype.bits == 32) printf(" %d", ((const int32_t*)at)[i]);
      else if (t->dtype.bits <= 8) printf(" %d", at[i]);
    }
    printf("%s\n", n > 6 ? " ..." : "");
    if (prefix != NULL) write_npy(prefix, *k, t);
    ++*k;
    CHECK(TVMArrayFree(t));
  } else if (code == kTVMObjectHandle) { /* a tuple, or a shape */
    a[0] = v;
    if (TVMFuncCall(g_array_size, a, c, 1, &ret, &rc) == 0) {
      for (i = 0, n = ret.v_int64; i < n; ++i) {
        a[1].v_int64 = i;
        CHECK(TVMFuncCall(g_array_item, a, c, 2, &ret, &rc));
        show(ret, rc, prefix, k);
      }
    } else { /* a shape: with -o, written as an int64 vector */
      int64_t dims[64];
      DLTensor t;
      n = call_int(g_shape_size, v, 0, 1);
      printf("output %d: shape (", *k);
      for (i = 0; i < n && i < 64; ++i) {
        dims[i] = call_int(g_shape_elem, v, i, 2);
        printf("%s%lld", i ? ", " : "", (long long)dims[i]);
      }
      printf(")\n");
      memset(&t, 0, sizeof(t));
      t.data = dims;
      t.ndim = 1;
      t.shape = &n;
      t.dtype.code = kDLInt;
      t.dtype.bits = 64;
      t.dtype.lanes = 1;
      if (prefix != NULL) write_npy(prefix, *k, &t);
      ++*k;
    }
    CHECK(TVMObjectFree(v.v_handle));
  } else if (code == kDLInt) {
    printf("output %d: int %lld\n", (*k)++, (long long)v.v_int64);
  } else {
    printf("output %d: a value of type code %d\n", (*k)++, code);
  }
}

/* vm[name](args...) */
static void call(TVMModuleHandle vm, const char* name, TVMValue* args, int* codes, int n,
                 TVMValue* ret, int* code) {
  TVMFunctionHandle f;
  CHECK(TVMModGetFunction(vm, name, 0, &f));
  if (f == NULL) {
    fprintf(stderr, "the VM has no function %s\n", name);
    exit(1);
  }
  CHECK(TVMFuncCall(f, args, codes, n, ret, code));
  CHECK(TVMFuncFree(f));
}

int main(int argc, char** argv) {
  TVMModuleHandle exe, vm;
  TVMValue args[MAX_INPUTS], ret;
  int codes[MAX_INPUTS], code, first = 2, nin, i, k = 0;
  const char* prefix = NULL;
  int64_t arity;
  if (argc >= 4 && strcmp(argv[2], "-o") == 0) prefix = argv[3], first = 4;
  nin = argc - first;
  if (argc < 2 || nin > MAX_INPUTS) {
    fprintf(stderr, "usage: %s MODEL.so [-o OUT_PREFIX] INPUT...\n", argv[0]);
    return 2;
  }

  /* the executable, then a VirtualMachine over it: device (CPU 0) and allocator (2: pooled;
     a CUDA model adds kDLCUDA, 0, 2 first, the host CPU last) */
  CHECK(TVMModLoadFromFile(argv[1], "", &exe));
  call(exe, "vm_load_executable", NULL, NULL, 0, &ret, &code);
  vm = ret.v_handle;
  CHECK(TVMModFree(exe)); /* the VM holds it */
  args[0].v_int64 = kDLCPU;
  args[1].v_int64 = 0;
  args[2].v_int64 = 2;
  codes[0] = codes[1] = codes[2] = kDLInt;
  call(vm, "vm_initialization", args, codes, 3, &ret, &code);

  /* main's parameters, by name */
  args[0].v_str = "main";
  codes[0] = kTVMStr;
  call(vm, "get_function_arity", args, codes, 1, &ret, &code);
  arity = ret.v_int64;
  if (arity != nin) {
    fprintf(stderr, "main takes %lld inputs:", (long long)arity);
    for (i = 0; i < arity; ++i) {
      args[1].v_int64 = i;
      codes[1] = kDLInt;
      call(vm, "get_function_param_name", args, codes, 2, &ret, &code);
      fprintf(stderr, " %s", ret.v_str);
    }
    fprintf(stderr, "\n");
    return 2;
  }

  for (i = 0; i < nin; ++i) {
    args[i].v_handle = make_input(argv[first + i]);
    codes[i] = kTVMNDArrayHandle;
  }
  call(vm, "main", args, codes, nin, &ret, &code);

  CHECK(TVMFuncGetGlobal("runtime.ArraySize", &g_array_size));
  CHECK(TVMFuncGetGlobal("runtime.ArrayGetItem", &g_array_item));
  CHECK(TVMFuncGetGlobal("runtime.GetShapeTupleSize", &g_shape_size));
  CHECK(TVMFuncGetGlobal("runtime.GetShapeTupleElem", &g_shape_elem));
  show(ret, code, prefix, &k);

  for (i = 0; i < nin; ++i) CHECK(TVMArrayFree(args[i].v_handle));
  CHECK(TVMFuncFree(g_array_size));
  CHECK(TVMFuncFree(g_array_item));
  CHECK(TVMFuncFree(g_shape_size));
  CHECK(TVMFuncFree(g_shape_elem));
  CHECK(TVMModFree(vm));
  return 0;
}
