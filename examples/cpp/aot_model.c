/*
 * A Relay AOT build from C with tvmrt's C runtime (TVM's C API, no Python, no C++): a
 * shared library built with Executor("aot") and exported with export_library (TVM 0.10 to
 * 0.20), run through TVM's AOT executor, lib["default"](cpu).
 *
 *   aot_model LIB INPUT.bin OUTPUT.bin
 *
 * INPUT.bin: input 0's raw bytes (shape and dtype from the build's metadata); OUTPUT.bin
 * receives output 0's. `make aot_model` builds it.
 */
#include <stdio.h>
#include <stdlib.h>

#include <tvm/runtime/c_runtime_api.h>

#define CHECK(call)                                                                                \
  do {                                                                                             \
    if ((call) != 0) {                                                                             \
      fprintf(stderr, "%s failed: %s\n", #call, TVMGetLastError());                                \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

static size_t nbytes(const DLTensor* t) {
  size_t n = (size_t)(t->dtype.bits * t->dtype.lanes + 7) / 8;
  int i;
  for (i = 0; i < t->ndim; ++i) n *= (size_t)t->shape[i];
  return n;
}

/* module[name](args...) */
static void call(TVMModuleHandle mod, const char* name, TVMValue* args, int* codes, int n,
                 TVMValue* ret, int* ret_code) {
  TVMFunctionHandle f;
  CHECK(TVMModGetFunction(mod, name, 0, &f));
  if (f == NULL) {
    fprintf(stderr, "the module has no function %s\n", name);
    exit(1);
  }
  CHECK(TVMFuncCall(f, args, codes, n, ret, ret_code));
  CHECK(TVMFuncFree(f));
}

int main(int argc, char** argv) {
  TVMModuleHandle lib, exec;
  TVMValue args[1], ret;
  int codes[1], code;
  int64_t i, num_inputs;
  DLTensor *in, *out;
  FILE* f;
  if (argc != 4) {
    fprintf(stderr, "usage: %s LIB INPUT.bin OUTPUT.bin\n", argv[0]);
    return 2;
  }
  CHECK(TVMModLoadFromFile(argv[1], "so", &lib));
  args[0].v_device.device_type = kDLCPU; /* the AOT executor runs on cpu(0) */
  args[0].v_device.device_id = 0;
  codes[0] = kDLDevice;
  call(lib, "default", args, codes, 1, &ret, &code);
  exec = ret.v_handle;
  CHECK(TVMModFree(lib));

  call(exec, "get_num_inputs", NULL, NULL, 0, &ret, &code);
  num_inputs = ret.v_int64;
  for (i = 0; i < num_inputs; ++i) {
    args[0].v_int64 = i;
    codes[0] = kDLInt;
    call(exec, "get_input_name", args, codes, 1, &ret, &code);
    printf("input %lld: %s\n", (long long)i, ret.v_str);
  }

  /* input 0 from the file, straight into the executor's own array */
  args[0].v_int64 = 0;
  codes[0] = kDLInt;
  call(exec, "get_input", args, codes, 1, &ret, &code);
  in = (DLTensor*)ret.v_handle;
  f = fopen(argv[2], "rb");
  if (f == NULL || fread((char*)in->data + in->byte_offset, 1, nbytes(in), f) != nbytes(in) ||
      fgetc(f) != EOF) {
    fprintf(stderr, "%s: expected %zu bytes for input 0\n", argv[2], nbytes(in));
    return 1;
  }
  fclose(f);
  CHECK(TVMArrayFree(in));
  call(exec, "run", NULL, NULL, 0, &ret, &code);

  args[0].v_int64 = 0;
  call(exec, "get_output", args, codes, 1, &ret, &code);
  out = (DLTensor*)ret.v_handle;
  f = fopen(argv[3], "wb");
  if (f == NULL || fwrite((char*)out->data + out->byte_offset, 1, nbytes(out), f) != nbytes(out))
    return 1;
  fclose(f);
  printf("output 0: %zu bytes written to %s\n", nbytes(out), argv[3]);
  CHECK(TVMArrayFree(out));
  CHECK(TVMModFree(exec));
  return 0;
}
