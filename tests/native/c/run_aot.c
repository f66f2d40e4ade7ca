/*
 * A Relay AOT build through libtvmrt_runtime's C API, TVM's AOT executor face:
 *
 *   run_aot factory LIB INPUT.bin OUT_PREFIX   lib["default"](cpu)
 *   run_aot global  LIB INPUT.bin OUT_PREFIX   tvm.aot_executor.create(lib, cpu, "default")
 *   run_aot create  LIB                        tvm.aot_executor.create(lib, cpu): prints
 *                                              "created" or the error
 *
 * factory/global print the executor's answers (inputs, names, indices, its errors), set
 * input 0 from INPUT.bin, run twice and write output i to OUT_PREFIX<i>.bin (read with
 * get_output(i), which must agree with get_output(i, out)).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tvm/runtime/c_runtime_api.h>
#include "check.h"

static TVMModuleHandle g_exec;

/* exec[name](args...): 0 or -1; the result in *ret */
static int call(const char* name, TVMValue* args, int* codes, int n, TVMValue* ret, int* code) {
  TVMFunctionHandle f;
  int rc;
  CHECK(TVMModGetFunction(g_exec, name, 0, &f));
  if (f == NULL) {
    fprintf(stderr, "no function %s\n", name);
    exit(1);
  }
  rc = TVMFuncCall(f, args, codes, n, ret, code);
  CHECK(TVMFuncFree(f));
  return rc;
}

static int64_t call_int(const char* name) {
  TVMValue ret;
  int code;
  CHECK(call(name, NULL, NULL, 0, &ret, &code));
  return ret.v_int64;
}

static void expect_error(const char* what, const char* name, TVMValue* args, int* codes, int n) {
  TVMValue ret;
  int code;
  if (call(name, args, codes, n, &ret, &code) == 0) {
    fprintf(stderr, "%s: no error\n", what);
    exit(1);
  }
  printf("%s: %s\n", what, TVMGetLastError());
}

static TVMModuleHandle create(const char* mode, TVMModuleHandle lib, int with_name) {
  TVMValue args[3], ret;
  int codes[3] = {kTVMModuleHandle, kDLDevice, kTVMStr}, code;
  TVMFunctionHandle f;
  args[1].v_device.device_type = kDLCPU;
  args[1].v_device.device_id = 0;
  if (strcmp(mode, "factory") == 0) {
    CHECK(TVMModGetFunction(lib, "default", 0, &f));
    CHECK(TVMFuncCall(f, args + 1, codes + 1, 1, &ret, &code));
  } else {
    args[0].v_handle = lib;
    args[2].v_str = "default";
    CHECK(TVMFuncGetGlobal("tvm.aot_executor.create", &f));
    if (TVMFuncCall(f, args, codes, with_name ? 3 : 2, &ret, &code) != 0) {
      CHECK(TVMFuncFree(f));
      return NULL;
    }
  }
  CHECK(TVMFuncFree(f));
  return ret.v_handle;
}

int main(int argc, char** argv) {
  TVMModuleHandle lib;
  TVMValue args[2], ret;
  int codes[2], code, i, n_out, round;
  FILE* fin;
  DLTensor *in, *out, *copy;
  size_t nbytes;
  char *buf, path[4096];
  if (argc == 3 && strcmp(argv[1], "create") == 0) {
    CHECK(TVMModLoadFromFile(argv[2], "so", &lib));
    g_exec = create("global", lib, 0);
    printf("%s\n", g_exec != NULL ? "created" : TVMGetLastError());
    if (g_exec != NULL) CHECK(TVMModFree(g_exec));
    CHECK(TVMModFree(lib));
    return 0;
  }
  if (argc != 5) {
    fprintf(stderr, "usage: run_aot factory|global LIB INPUT.bin OUT_PREFIX | create LIB\n");
    return 2;
  }
  CHECK(TVMModLoadFromFile(argv[2], "so", &lib));
  g_exec = create(argv[1], lib, 1);
  if (g_exec == NULL) CHECK(-1);
  CHECK(TVMModFree(lib)); /* the executor keeps what it needs */

  printf("num_inputs: %lld\n", (long long)call_int("get_num_inputs"));
  printf("num_outputs: %lld\n", (long long)(n_out = (int)call_int("get_num_outputs")));
  args[0].v_int64 = 0;
  codes[0] = kDLInt;
  CHECK(call("get_input_name", args, codes, 1, &ret, &code));
  printf("input_name_0: %s\n", ret.v_str);
  args[0].v_str = ret.v_str;
  codes[0] = kTVMStr;
  CHECK(call("get_input_index", args, codes, 1, &ret, &code));
  printf("input_index: %lld\n", (long long)ret.v_int64);
  args[0].v_str = "nope";
  expect_error("input_index_unknown", "get_input_index", args, codes, 1);
  args[0].v_int64 = 7;
  codes[0] = kDLInt;
  expect_error("output_out_of_range", "get_output", args, codes, 1);
  expect_error("zero_copy", "set_input_zero_copy", args, codes, 1);

  /* the input from the file, through the executor's own array */
  args[0].v_int64 = 0;
  CHECK(call("get_input", args, codes, 1, &ret, &code));
  in = (DLTensor*)ret.v_handle;
  CHECK(TVMArrayAlloc(in->shape, in->ndim, in->dtype.code, in->dtype.bits, in->dtype.lanes, kDLCPU,
                      0, &copy));
  nbytes = (size_t)(in->dtype.bits / 8);
  for (i = 0; i < in->ndim; ++i) nbytes *= (size_t)in->shape[i];
  buf = (char*)malloc(nbytes);
  fin = fopen(argv[3], "rb");
  if (buf == NULL || fin == NULL || fread(buf, 1, nbytes, fin) != nbytes) return 1;
  fclose(fin);
  CHECK(TVMArrayCopyFromBytes(copy, buf, nbytes));
  free(buf);
  args[1].v_handle = copy;
  codes[1] = kTVMNDArrayHandle;
  CHECK(call("set_input", args, codes, 2, &ret, &code));
  CHECK(TVMArrayFree(copy));
  CHECK(TVMArrayFree(in));
  for (round = 0; round < 2; ++round) CHECK(call("run", NULL, NULL, 0, &ret, &code));

  for (i = 0; i < n_out; ++i) {
    FILE* fout;
    DLTensor* again;
    size_t size = (size_t)1, k;
    args[0].v_int64 = i;
    codes[0] = kDLInt;
    CHECK(call("get_output", args, codes, 1, &ret, &code));
    out = (DLTensor*)ret.v_handle;
    for (k = 0; k < (size_t)out->ndim; ++k) size *= (size_t)out->shape[k];
    size *= (size_t)(out->dtype.bits / 8);
    CHECK(TVMArrayAlloc(out->shape, out->ndim, out->dtype.code, out->dtype.bits, out->dtype.lanes,
                        kDLCPU, 0, &again));
    args[1].v_handle = again;
    codes[1] = kTVMNDArrayHandle;
    CHECK(call("get_output", args, codes, 2, &ret, &code));
    if (memcmp(again->data, out->data, size) != 0) {
      fprintf(stderr, "get_output(%d) and get_output(%d, out) differ\n", i, i);
      return 1;
    }
    snprintf(path, sizeof(path), "%s%d.bin", argv[4], i);
    fout = fopen(path, "wb");
    if (fout == NULL || fwrite(out->data, 1, size, fout) != size) return 1;
    fclose(fout);
    CHECK(TVMArrayFree(again));
    CHECK(TVMArrayFree(out));
  }
  CHECK(TVMModFree(g_exec));
  return 0;
}
