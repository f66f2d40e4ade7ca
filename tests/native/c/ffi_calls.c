/*
 * tvm-ffi kernel libraries (TVM >= 0.21) through libtvmrt_runtime's C API:
 *
 *   ffi_calls toy LIB         the test's own library (ffi_toy.c): arguments as tvm-ffi
 *                             passes them (tensors with the byte offset folded, bool as
 *                             DLPack's), results, a kernel's error; prints "ok"
 *   ffi_calls bad-call LIB F  F called with four float32 (2, 64) arrays: prints the error
 *   ffi_calls load LIB        prints "loaded", or the load's error
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tvm/runtime/c_runtime_api.h>
#include "check.h"

static int g_failed;

static void toy(const char* path) {
  TVMModuleHandle mod;
  TVMFunctionHandle scale, dtype_of, missing;
  TVMArrayHandle x, out, flag;
  TVMValue args[3], ret;
  int codes[3], code, i;
  int64_t shape[1] = {6}, nine[1] = {9};
  float in[9], got[6];
  DLTensor offset_view;
  CHECK(TVMModLoadFromFile(path, "so", &mod));
  CHECK(TVMModGetFunction(mod, "scale", 0, &scale));
  CHECK(TVMModGetFunction(mod, "dtype_of", 0, &dtype_of));
  CHECK(TVMModGetFunction(mod, "nope", 0, &missing));
  EXPECT(scale != NULL && dtype_of != NULL && missing == NULL);
  CHECK(TVMArrayAlloc(nine, 1, kDLFloat, 32, 1, kDLCPU, 0, &x));
  CHECK(TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCPU, 0, &out));
  for (i = 0; i < 9; ++i) in[i] = (float)i;
  CHECK(TVMArrayCopyFromBytes(x, in, sizeof(in)));
  /* elements 3..8 of x, as a tensor with a byte offset */
  offset_view = *x;
  offset_view.shape = shape;
  offset_view.byte_offset = 3 * sizeof(float);
  args[0].v_handle = &offset_view;
  args[1].v_handle = out;
  args[2].v_int64 = 3;
  codes[0] = kTVMDLTensorHandle;
  codes[1] = kTVMNDArrayHandle;
  codes[2] = kDLInt;
  CHECK(TVMFuncCall(scale, args, codes, 3, &ret, &code));
  EXPECT(code == kDLInt && ret.v_int64 == 6);
  CHECK(TVMArrayCopyToBytes(out, got, sizeof(got)));
  for (i = 0; i < 6; ++i) EXPECT(got[i] == 3.0f * (float)(i + 3));
  EXPECT(offset_view.byte_offset == 3 * sizeof(float)); /* the caller's tensor is untouched */
  /* a kernel's error: its kind and words */
  codes[2] = kDLFloat;
  args[2].v_float64 = 2.0;
  EXPECT(TVMFuncCall(scale, args, codes, 3, &ret, &code) == -1);
  EXPECT(strcmp(TVMGetLastError(), "ValueError: scale: expected (tensor, tensor, int)") == 0);
  codes[2] = kTVMModuleHandle; /* no objects go to tvm-ffi kernels */
  args[2].v_handle = mod;
  EXPECT(TVMFuncCall(scale, args, codes, 3, &ret, &code) == -1);
  EXPECT(strstr(TVMGetLastError(), "argument 2 has type code 9") != NULL);
  /* TVM 0.19's bool reaches the kernel as DLPack's */
  CHECK(TVMArrayAlloc(shape, 1, kDLUInt, 1, 1, kDLCPU, 0, &flag));
  args[0].v_handle = flag;
  codes[0] = kTVMNDArrayHandle;
  CHECK(TVMFuncCall(dtype_of, args, codes, 1, &ret, &code));
  EXPECT(ret.v_int64 == 6 * 65536 + 8 * 256 + 1);
  args[0].v_handle = x;
  CHECK(TVMFuncCall(dtype_of, args, codes, 1, &ret, &code));
  EXPECT(ret.v_int64 == kDLFloat * 65536 + 32 * 256 + 1);
  CHECK(TVMArrayFree(flag));
  CHECK(TVMArrayFree(x));
  CHECK(TVMArrayFree(out));
  CHECK(TVMFuncFree(scale));
  CHECK(TVMFuncFree(dtype_of));
  CHECK(TVMModFree(mod));
}

static void bad_call(const char* path, const char* name) {
  TVMModuleHandle mod;
  TVMFunctionHandle f;
  TVMArrayHandle a;
  TVMValue args[4], ret;
  int codes[4], code, i;
  int64_t shape[2] = {2, 64};
  CHECK(TVMModLoadFromFile(path, "so", &mod));
  CHECK(TVMModGetFunction(mod, name, 0, &f));
  EXPECT(f != NULL);
  CHECK(TVMArrayAlloc(shape, 2, kDLFloat, 32, 1, kDLCPU, 0, &a));
  for (i = 0; i < 4; ++i) {
    args[i].v_handle = a;
    codes[i] = kTVMNDArrayHandle;
  }
  EXPECT(TVMFuncCall(f, args, codes, 4, &ret, &code) == -1);
  printf("%s\n", TVMGetLastError());
  CHECK(TVMArrayFree(a));
  CHECK(TVMFuncFree(f));
  CHECK(TVMModFree(mod));
}

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "toy") == 0) {
    toy(argv[2]);
    if (g_failed) return 1;
    printf("ok\n");
    return 0;
  }
  if (argc == 4 && strcmp(argv[1], "bad-call") == 0) {
    bad_call(argv[2], argv[3]);
    return g_failed;
  }
  if (argc == 3 && strcmp(argv[1], "load") == 0) {
    TVMModuleHandle mod;
    if (TVMModLoadFromFile(argv[2], "so", &mod) != 0) {
      printf("%s\n", TVMGetLastError());
      return 0;
    }
    printf("loaded\n");
    return TVMModFree(mod);
  }
  fprintf(stderr, "usage: ffi_calls toy LIB | bad-call LIB FUNC | load LIB\n");
  return 2;
}
