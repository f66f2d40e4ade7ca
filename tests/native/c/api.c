/*
 * The C API beyond one plain run, checked against libtvmrt_runtime:
 *   - C functions as packed functions: TVMFuncCreateFromCFunc, TVMFuncRegisterGlobal
 *     (override and its error), TVMFuncListGlobalNames, TVMFuncRemoveGlobal,
 *     TVMCFuncSetReturn;
 *   - the graph executor's packed functions: get_input_index, get_num_inputs/outputs,
 *     get_input of an unknown name (null), share_params, set_input_zero_copy,
 *     set_output_zero_copy (and its alignment check), get_graph_json of the factory.
 *
 *   api FACTORY.so PARAMS INPUT.bin OUT_PREFIX
 *
 * Writes OUT_PREFIX{shared,zerocopy}.bin: the output of an executor sharing the first
 * one's params, and the output written by a zero-copy run, for the test to compare with
 * golden.npz.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tvm/runtime/c_runtime_api.h>
#include "check.h"

static int g_failed;

static int add_one(TVMValue* args, int* codes, int n, TVMRetValueHandle ret, void* res) {
  TVMValue v;
  int code = kTVMArgInt;
  if (n != 1 || codes[0] != kTVMArgInt) {
    TVMAPISetLastError("add_one takes one int");
    return -1;
  }
  v.v_int64 = args[0].v_int64 + *(int*)res;
  return TVMCFuncSetReturn(ret, &v, &code, 1);
}

static void finalize(void* res) { *(int*)res = -1; }

static int greet(TVMValue* args, int* codes, int n, TVMRetValueHandle ret, void* res) {
  char text[32]; /* gone when this returns: TVMCFuncSetReturn must copy it */
  TVMValue v;
  int code = kTVMStr;
  (void)res;
  snprintf(text, sizeof(text), "hello %s", n == 1 && codes[0] == kTVMStr ? args[0].v_str : "?");
  v.v_str = text;
  return TVMCFuncSetReturn(ret, &v, &code, 1);
}

static TVMValue call(TVMModuleHandle mod, const char* name, TVMValue* args, int* codes, int n,
                     int* code) {
  TVMFunctionHandle f = NULL;
  TVMValue ret;
  CHECK(TVMModGetFunction(mod, name, 0, &f));
  if (f == NULL) {
    fprintf(stderr, "no function %s\n", name);
    exit(1);
  }
  CHECK(TVMFuncCall(f, args, codes, n, &ret, code));
  CHECK(TVMFuncFree(f));
  return ret;
}

static char* read_file(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  char* buf;
  long n;
  if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0) exit(1);
  rewind(f);
  buf = (char*)malloc((size_t)n + 1);
  if (buf == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n) exit(1);
  fclose(f);
  *size = (size_t)n;
  return buf;
}

static void write_array(const char* prefix, const char* name, DLTensor* t) {
  char path[4096];
  FILE* f;
  snprintf(path, sizeof(path), "%s%s.bin", prefix, name);
  f = fopen(path, "wb");
  if (f == NULL || fwrite(t->data, 4, 10, f) != 10) exit(1);
  fclose(f);
}

static void registry(void) {
  static int resource = 1;
  TVMFunctionHandle f, g;
  TVMValue args[1], ret;
  int codes[1] = {kTVMArgInt}, code, n, i, seen = 0;
  const char** names;
  CHECK(TVMFuncCreateFromCFunc(add_one, &resource, finalize, &f));
  CHECK(TVMFuncRegisterGlobal("test.add_one", f, 0));
  EXPECT(TVMFuncRegisterGlobal("test.add_one", f, 0) != 0);
  EXPECT(strcmp(TVMGetLastError(),
                "FunctionAlreadyRegisteredError: Global PackedFunc "
                "test.add_one is already registered") == 0);
  CHECK(TVMFuncRegisterGlobal("test.add_one", f, 1));
  CHECK(TVMFuncFree(f)); /* the registry keeps its own reference */
  CHECK(TVMFuncGetGlobal("test.add_one", &g));
  args[0].v_int64 = 41;
  CHECK(TVMFuncCall(g, args, codes, 1, &ret, &code));
  EXPECT(code == kTVMArgInt && ret.v_int64 == 42);
  codes[0] = kTVMStr;
  args[0].v_str = "x";
  EXPECT(TVMFuncCall(g, args, codes, 1, &ret, &code) != 0);
  EXPECT(strcmp(TVMGetLastError(), "add_one takes one int") == 0);
  CHECK(TVMFuncListGlobalNames(&n, &names));
  for (i = 0; i < n; ++i) {
    seen += strcmp(names[i], "test.add_one") == 0;
    seen += strcmp(names[i], "tvm.graph_runtime.create") == 0;
    seen += strcmp(names[i], "runtime.SystemLib") == 0;
  }
  EXPECT(seen == 3);
  {
    TVMFunctionHandle h;
    char scribble[64];
    CHECK(TVMFuncCreateFromCFunc(greet, NULL, NULL, &h));
    codes[0] = kTVMStr;
    args[0].v_str = "C";
    CHECK(TVMFuncCall(h, args, codes, 1, &ret, &code));
    memset(scribble, 'x', sizeof(scribble)); /* reuse the stack the callee's text was on */
    EXPECT(code == kTVMStr && strcmp(ret.v_str, "hello C") == 0 && scribble[0] == 'x');
    CHECK(TVMFuncFree(h));
  }
  CHECK(TVMFuncRemoveGlobal("test.add_one"));
  CHECK(TVMFuncGetGlobal("test.add_one", &f));
  EXPECT(f == NULL);
  EXPECT(resource == 1); /* g still holds the function */
  CHECK(TVMFuncFree(g));
  EXPECT(resource == -1); /* the finalizer ran with the last reference */
}

int main(int argc, char** argv) {
  TVMModuleHandle lib, a, b;
  TVMFunctionHandle create;
  TVMValue args[4], ret;
  int codes[4], code;
  DLTensor *x, *out, *view;
  char *input, *params;
  const char* json;
  size_t input_size, params_size;
  TVMByteArray bytes;
  int64_t shape[4] = {1, 3, 16, 16}, out_shape[2] = {1, 10};
  if (argc != 5) return 2;
  registry();

  CHECK(TVMModLoadFromFile(argv[1], "", &lib));
  args[0].v_device.device_type = kDLCPU;
  args[0].v_device.device_id = 0;
  codes[0] = kDLDevice;
  a = call(lib, "default", args, codes, 1, &code).v_handle;
  EXPECT(code == kTVMModuleHandle);
  EXPECT(call(a, "get_num_inputs", args, codes, 0, &code).v_int64 == 7);
  EXPECT(call(a, "get_num_outputs", args, codes, 0, &code).v_int64 == 1);
  args[0].v_str = "data";
  codes[0] = kTVMStr;
  EXPECT(call(a, "get_input_index", args, codes, 1, &code).v_int64 == 0);
  args[0].v_str = "nope";
  EXPECT(call(a, "get_input_index", args, codes, 1, &code).v_int64 == -1);
  call(a, "get_input", args, codes, 1, &code);
  EXPECT(code == kTVMNullptr);

  input = read_file(argv[3], &input_size);
  CHECK(TVMArrayAlloc(shape, 4, kDLFloat, 32, 1, kDLCPU, 0, &x));
  CHECK(TVMArrayCopyFromBytes(x, input, input_size));
  CHECK(TVMArrayAlloc(out_shape, 2, kDLFloat, 32, 1, kDLCPU, 0, &out));

  /* b: the factory's graph over the same library with a's params, shared not copied */
  json = call(lib, "get_graph_json", args, codes, 0, &code).v_str;
  EXPECT(code == kTVMStr);
  CHECK(TVMFuncGetGlobal("tvm.graph_executor.create", &create));
  args[0].v_str = json;
  codes[0] = kTVMStr;
  args[1].v_handle = lib;
  codes[1] = kTVMModuleHandle;
  args[2].v_int64 = kDLCPU;
  codes[2] = kTVMArgInt;
  args[3].v_int64 = 0;
  codes[3] = kTVMArgInt;
  CHECK(TVMFuncCall(create, args, codes, 4, &ret, &code));
  b = ret.v_handle;
  CHECK(TVMFuncFree(create));
  params = read_file(argv[2], &params_size);
  bytes.data = params;
  bytes.size = params_size;
  args[0].v_handle = a;
  codes[0] = kTVMModuleHandle;
  args[1].v_handle = &bytes;
  codes[1] = kTVMBytes;
  call(b, "share_params", args, codes, 2, &code);
  CHECK(TVMModFree(a)); /* b keeps the shared memory alive */
  args[0].v_str = "data";
  codes[0] = kTVMStr;
  args[1].v_handle = x;
  codes[1] = kTVMDLTensorHandle;
  call(b, "set_input", args, codes, 2, &code);
  call(b, "run", args, codes, 0, &code);
  args[0].v_int64 = 0;
  codes[0] = kTVMArgInt;
  view = (DLTensor*)call(b, "get_output", args, codes, 1, &code).v_handle;
  EXPECT(code == kTVMNDArrayHandle);
  write_array(argv[4], "shared", view);
  CHECK(TVMArrayFree(view));

  /* zero copy: b reads x and writes out directly */
  args[0].v_str = "data";
  codes[0] = kTVMStr;
  args[1].v_handle = x;
  codes[1] = kTVMNDArrayHandle;
  call(b, "set_input_zero_copy", args, codes, 2, &code);
  args[0].v_int64 = 0;
  codes[0] = kTVMArgInt;
  args[1].v_handle = out;
  memset(out->data, 0, 40);
  call(b, "set_output_zero_copy", args, codes, 2, &code);
  call(b, "run", args, codes, 0, &code);
  write_array(argv[4], "zerocopy", out);
  {
    DLTensor shifted = *out;
    TVMFunctionHandle f;
    shifted.byte_offset = 4;
    args[1].v_handle = &shifted;
    codes[1] = kTVMDLTensorHandle;
    CHECK(TVMModGetFunction(b, "set_output_zero_copy", 0, &f));
    EXPECT(TVMFuncCall(f, args, codes, 2, &ret, &code) != 0);
    EXPECT(strncmp(TVMGetLastError(), "ArrayError: zero-copy output 0: data at 0x", 42) == 0);
    EXPECT(strstr(TVMGetLastError(), "is not 64-byte aligned, which compiled kernels require") !=
           NULL);
    CHECK(TVMFuncFree(f));
  }
  CHECK(TVMObjectRetain(b));
  CHECK(TVMObjectFree(b));
  CHECK(TVMModFree(b));
  CHECK(TVMModFree(lib));
  CHECK(TVMArrayFree(x));
  CHECK(TVMArrayFree(out));
  free(input);
  free(params);
  printf(g_failed ? "FAILED\n" : "ok\n");
  return g_failed;
}
