/*
 * A graph build from C with tvmrt's C runtime (TVM's C API, no Python, no C++): a kernel
 * library of either ABI (TVM <= 0.20's packed functions, or TVM 0.21-0.27's tvm-ffi
 * kernels, e.g. `tvmrt compile`'s deploy.so) with its graph JSON and params.
 *
 *   graph_model LIB GRAPH.json PARAMS INPUT_NAME INPUT.bin OUTPUT.bin
 *
 * INPUT.bin: the input's raw bytes (its shape and dtype come from the graph); OUTPUT.bin
 * receives output 0's. `make graph_model` builds it; `make run-graph-c` runs it on the
 * digits model (../digits/model).
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

static char* read_file(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  char* buf = NULL;
  long n;
  if (f != NULL && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 &&
      fseek(f, 0, SEEK_SET) == 0) {
    buf = (char*)malloc((size_t)n + 1);
    if (buf != NULL && fread(buf, 1, (size_t)n, f) == (size_t)n) {
      buf[n] = '\0';
      *size = (size_t)n;
    } else {
      free(buf);
      buf = NULL;
    }
  }
  if (f != NULL) fclose(f);
  if (buf == NULL) {
    fprintf(stderr, "cannot read %s\n", path);
    exit(1);
  }
  return buf;
}

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
  TVMModuleHandle lib, gmod;
  TVMFunctionHandle create;
  TVMValue args[4], ret;
  int codes[4], code, i;
  size_t json_size, params_size, input_size;
  char *json, *params, *input;
  TVMByteArray params_bytes;
  DLTensor *in, *out;
  FILE* f;
  if (argc != 7) {
    fprintf(stderr, "usage: %s LIB GRAPH.json PARAMS INPUT_NAME INPUT.bin OUTPUT.bin\n", argv[0]);
    return 2;
  }
  json = read_file(argv[2], &json_size);
  params = read_file(argv[3], &params_size);
  input = read_file(argv[5], &input_size);

  /* tvm.graph_executor.create(graph_json, lib, device_type, device_id) */
  CHECK(TVMModLoadFromFile(argv[1], "so", &lib));
  CHECK(TVMFuncGetGlobal("tvm.graph_executor.create", &create));
  args[0].v_str = json;
  args[1].v_handle = lib;
  args[2].v_int64 = kDLCPU;
  args[3].v_int64 = 0;
  codes[0] = kTVMStr;
  codes[1] = kTVMModuleHandle;
  codes[2] = codes[3] = kDLInt;
  CHECK(TVMFuncCall(create, args, codes, 4, &ret, &code));
  gmod = ret.v_handle;
  CHECK(TVMFuncFree(create));
  CHECK(TVMModFree(lib)); /* the executor keeps its kernels */

  params_bytes.data = params;
  params_bytes.size = params_size;
  args[0].v_handle = &params_bytes;
  codes[0] = kTVMBytes;
  call(gmod, "load_params", args, codes, 1, &ret, &code);

  /* the executor's input array: its shape and dtype say how many bytes the file must hold */
  args[0].v_str = argv[4];
  codes[0] = kTVMStr;
  call(gmod, "get_input", args, codes, 1, &ret, &code);
  in = (DLTensor*)ret.v_handle;
  if (in == NULL || nbytes(in) != input_size) {
    fprintf(stderr, "%s: expected %zu bytes for input %s\n", argv[5], in ? nbytes(in) : 0, argv[4]);
    return 1;
  }
  CHECK(TVMArrayCopyFromBytes(in, input, input_size));
  CHECK(TVMArrayFree(in));
  call(gmod, "run", NULL, NULL, 0, &ret, &code);

  args[0].v_int64 = 0;
  codes[0] = kDLInt;
  call(gmod, "get_output", args, codes, 1, &ret, &code);
  out = (DLTensor*)ret.v_handle;
  f = fopen(argv[6], "wb");
  if (f == NULL || fwrite((char*)out->data + out->byte_offset, 1, nbytes(out), f) != nbytes(out))
    return 1;
  fclose(f);
  printf("output 0: shape (");
  for (i = 0; i < out->ndim; ++i) printf("%s%lld", i ? ", " : "", (long long)out->shape[i]);
  printf("), %zu bytes written to %s\n", nbytes(out), argv[6]);
  CHECK(TVMArrayFree(out));
  CHECK(TVMModFree(gmod));
  free(json);
  free(params);
  free(input);
  return 0;
}
