/*
 * One hostile input through libtvmrt_runtime's C API, the way an application drives TVM's:
 * tvm.graph_executor.create, load_params, set_input (or set_input_zero_copy, share_params),
 * run, get_output. tests/native/test_c_python_checks.py makes each hostile input and runs it
 * here and through the Python runtime, from one table. Prints the first failing step as
 * "<step>: <TVMGetLastError()>", or "ok" after writing output 0's bytes to OUT.
 *
 *   checks LIB GRAPH.json PARAMS INPUT.bin MODE OUT
 *   checks - - - - double_free -
 *
 * MODE: plain (set_input of a compact array), strided (set_input of a permuted view with
 * strides), zc_float64 / zc_int32 (set_input_zero_copy of an array of that dtype),
 * share_self (share_params with itself, then a plain run), out_float64 (get_output into a
 * float64 array), double_free (each handle kind
 * freed twice: the second free must fail with an error; under ASan a read of freed memory
 * aborts the program).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tvm/runtime/c_runtime_api.h>

#define N_IN (3 * 16 * 16)

static char* read_file(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  char* buf;
  long n;
  if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0) exit(2);
  rewind(f);
  buf = (char*)malloc((size_t)n + 1);
  if (buf == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n) exit(2);
  buf[n] = '\0';
  fclose(f);
  *size = (size_t)n;
  return buf;
}

/* mod[name](args...); on failure prints "<step>: <error>" and returns -1 */
static int call(TVMModuleHandle mod, const char* name, const char* step, TVMValue* args, int* codes,
                int n) {
  TVMFunctionHandle f = NULL;
  TVMValue ret;
  int code, rc;
  if (TVMModGetFunction(mod, name, 0, &f) != 0 || f == NULL) exit(2);
  rc = TVMFuncCall(f, args, codes, n, &ret, &code);
  if (rc != 0) printf("%s: %s\n", step, TVMGetLastError());
  TVMFuncFree(f);
  return rc;
}

static void report_free(const char* what, int rc) {
  printf("%s: %s\n", what, rc == 0 ? "NO ERROR" : TVMGetLastError());
}

static int nothing(TVMValue* args, int* codes, int n, TVMRetValueHandle ret, void* res) {
  (void)args;
  (void)codes;
  (void)n;
  (void)ret;
  (void)res;
  return 0;
}

/* each handle is the runtime's only reference to a fresh object, so the first free frees it */
static int double_free(void) {
  TVMArrayHandle a;
  TVMFunctionHandle f;
  TVMModuleHandle m;
  TVMValue arg, ret;
  int64_t shape[1] = {4};
  int code = kTVMStr, ret_code;
  if (TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCPU, 0, &a) != 0 || TVMArrayFree(a) != 0)
    return 2;
  report_free("TVMArrayFree", TVMArrayFree(a));
  if (TVMFuncCreateFromCFunc(nothing, NULL, NULL, &f) != 0 || TVMFuncFree(f) != 0) return 2;
  report_free("TVMFuncFree", TVMFuncFree(f));
  if (TVMFuncCreateFromCFunc(nothing, NULL, NULL, &f) != 0 || TVMFuncFree(f) != 0) return 2;
  report_free("TVMObjectFree", TVMObjectFree(f));
  if (TVMFuncCreateFromCFunc(nothing, NULL, NULL, &f) != 0 || TVMFuncFree(f) != 0) return 2;
  report_free("TVMFuncCall", TVMFuncCall(f, NULL, NULL, 0, &ret, &ret_code));
  /* a system library with a prefix is built afresh (the plain one is cached) */
  if (TVMFuncGetGlobal("runtime.SystemLib", &f) != 0 || f == NULL) return 2;
  arg.v_str = "checks_";
  if (TVMFuncCall(f, &arg, &code, 1, &ret, &ret_code) != 0 || ret_code != kTVMModuleHandle)
    return 2;
  TVMFuncFree(f);
  m = ret.v_handle;
  if (TVMModFree(m) != 0) return 2;
  report_free("TVMModFree", TVMModFree(m));
  return 0;
}

int main(int argc, char** argv) {
  TVMModuleHandle lib, gmod;
  TVMFunctionHandle create;
  TVMValue args[4], ret;
  int codes[4], code;
  size_t json_size, params_size, in_size;
  char *json, *params, *input;
  TVMByteArray bytes;
  DLTensor *x = NULL, *base = NULL, *out = NULL, view;
  int64_t shape[4] = {1, 3, 16, 16}, nhwc[4] = {1, 16, 16, 3}, strides[4] = {768, 1, 48, 3};
  int64_t out_shape[2] = {1, 10};
  const char* mode;
  int status = 0;
  if (argc != 7) return 2;
  mode = argv[5];
  if (strcmp(mode, "double_free") == 0) return double_free();
  json = read_file(argv[2], &json_size);
  params = read_file(argv[3], &params_size);
  input = read_file(argv[4], &in_size);
  if (in_size != N_IN * sizeof(float)) return 2;
  if (TVMModLoadFromFile(argv[1], "", &lib) != 0) return 2;
  if (TVMFuncGetGlobal("tvm.graph_executor.create", &create) != 0 || create == NULL) return 2;
  args[0].v_str = json;
  codes[0] = kTVMStr;
  args[1].v_handle = lib;
  codes[1] = kTVMModuleHandle;
  args[2].v_int64 = kDLCPU;
  codes[2] = kTVMArgInt;
  args[3].v_int64 = 0;
  codes[3] = kTVMArgInt;
  if (TVMFuncCall(create, args, codes, 4, &ret, &code) != 0) {
    printf("create: %s\n", TVMGetLastError());
    goto done_lib;
  }
  gmod = ret.v_handle;
  bytes.data = params;
  bytes.size = params_size;
  args[0].v_handle = &bytes;
  codes[0] = kTVMBytes;
  if (call(gmod, "load_params", "load_params", args, codes, 1) != 0) goto done;

  args[0].v_str = "data";
  codes[0] = kTVMStr;
  codes[1] = kTVMDLTensorHandle;
  if (strcmp(mode, "zc_float64") == 0 || strcmp(mode, "zc_int32") == 0) {
    int f64 = strcmp(mode, "zc_float64") == 0;
    if (TVMArrayAlloc(shape, 4, f64 ? kDLFloat : kDLInt, f64 ? 64 : 32, 1, kDLCPU, 0, &x) != 0)
      return 2;
    args[1].v_handle = x;
    if (call(gmod, "set_input_zero_copy", "set_input_zero_copy", args, codes, 2) != 0) goto done;
  } else if (strcmp(mode, "zc_read_only") == 0 || strcmp(mode, "zc_out_read_only") == 0) {
    /* memory the caller says is read-only (tvmrt's third argument): an input bound to it is
       never written, and an output binding of it is refused */
    int output = strcmp(mode, "zc_out_read_only") == 0;
    if (TVMArrayAlloc(output ? out_shape : shape, output ? 2 : 4, kDLFloat, 32, 1, kDLCPU, 0, &x) !=
        0)
      return 2;
    if (output) {
      args[0].v_int64 = 0;
      codes[0] = kTVMArgInt;
    }
    args[1].v_handle = x;
    args[2].v_int64 = 1;
    codes[2] = kTVMArgInt;
    if (call(gmod, output ? "set_output_zero_copy" : "set_input_zero_copy",
             output ? "set_output_zero_copy" : "set_input_zero_copy", args, codes, 3) != 0)
      goto done;
    if (TVMArrayAlloc(shape, 4, kDLFloat, 32, 1, kDLCPU, 0, &base) != 0) return 2;
    if (TVMArrayCopyFromBytes(base, input, in_size) != 0) return 2;
    args[0].v_str = "data";
    codes[0] = kTVMStr;
    args[1].v_handle = base;
    if (call(gmod, "set_input", "set_input", args, codes, 2) != 0) goto done;
  } else if (strcmp(mode, "strided") == 0) {
    /* the input as a (1, 3, 16, 16) view of NHWC memory: strides (768, 1, 48, 3) */
    const float* src = (const float*)input;
    float* dst;
    int c, p;
    if (TVMArrayAlloc(nhwc, 4, kDLFloat, 32, 1, kDLCPU, 0, &base) != 0) return 2;
    dst = (float*)base->data;
    for (c = 0; c < 3; ++c) {
      for (p = 0; p < 256; ++p) dst[p * 3 + c] = src[c * 256 + p];
    }
    view = *base;
    view.shape = shape;
    view.strides = strides;
    args[1].v_handle = &view;
    if (call(gmod, "set_input", "set_input", args, codes, 2) != 0) goto done;
  } else {
    if (TVMArrayAlloc(shape, 4, kDLFloat, 32, 1, kDLCPU, 0, &x) != 0) return 2;
    if (TVMArrayCopyFromBytes(x, input, in_size) != 0) return 2;
    args[1].v_handle = x;
    if (call(gmod, "set_input", "set_input", args, codes, 2) != 0) goto done;
    if (strcmp(mode, "share_self") == 0) {
      args[0].v_handle = gmod;
      codes[0] = kTVMModuleHandle;
      args[1].v_handle = &bytes;
      codes[1] = kTVMBytes;
      if (call(gmod, "share_params", "share_params", args, codes, 2) != 0) goto done;
    }
  }
  if (call(gmod, "run", "run", args, codes, 0) != 0) goto done;
  if (TVMArrayAlloc(out_shape, 2, kDLFloat, strcmp(mode, "out_float64") == 0 ? 64 : 32, 1, kDLCPU,
                    0, &out) != 0)
    return 2;
  args[0].v_int64 = 0;
  codes[0] = kTVMArgInt;
  args[1].v_handle = out;
  codes[1] = kTVMDLTensorHandle;
  if (call(gmod, "get_output", "get_output", args, codes, 2) != 0) goto done;
  {
    FILE* f = fopen(argv[6], "wb");
    if (f == NULL || fwrite(out->data, sizeof(float), 10, f) != 10) return 2;
    fclose(f);
  }
  printf("ok\n");
done:
  status |= TVMModFree(gmod);
done_lib:
  status |= TVMArrayFree(x) | TVMArrayFree(base) | TVMArrayFree(out);
  status |= TVMFuncFree(create) | TVMModFree(lib);
  free(json);
  free(params);
  free(input);
  return status != 0 ? 3 : 0;
}
