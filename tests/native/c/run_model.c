/*
 * Runs one graph-executor artifact through libtvmrt_runtime's C API and writes each output's
 * raw bytes, for tests/native/test_c_models.py to compare with the artifact's golden.npz.
 *
 *   run_model factory LIB                    INPUT_NAME INPUT.bin OUT_PREFIX
 *   run_model syslib  LIB|-                  INPUT_NAME INPUT.bin OUT_PREFIX
 *   run_model files   LIB GRAPH.json PARAMS  INPUT_NAME INPUT.bin OUT_PREFIX
 *
 * factory: lib["default"](cpu); syslib: runtime.SystemLib()["default"](cpu) after loading
 * LIB (`-`: nothing to load, the system library is linked into this program); files:
 * tvm.graph_runtime.create(json, lib, 1, 0) + load_params. Every output is read twice
 * (get_output(i) and get_output(i, out)) and the two must agree. RUN_MODEL_DEVICE=cuda (or
 * opencl) runs the executor on cuda(0) (opencl(0)) instead of the CPU: the input and outputs
 * are CPU arrays copied to and from the device by set_input and get_output. A list
 * (RUN_MODEL_DEVICE=cpu,opencl, at most 4) gives the executor several devices, the first
 * the fallback.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tvm/runtime/c_runtime_api.h>
#include "model_io.h"

static TVMModuleHandle call_for_module(TVMFunctionHandle f, TVMValue* args, int* codes, int n) {
  TVMValue ret;
  int code;
  CHECK(TVMFuncCall(f, args, codes, n, &ret, &code));
  if (code != kTVMModuleHandle) {
    fprintf(stderr, "expected a module, got type code %d\n", code);
    exit(1);
  }
  return ret.v_handle;
}

static size_t nbytes(const DLTensor* t) {
  size_t n = (t->dtype.bits * t->dtype.lanes + 7) / 8;
  int i;
  for (i = 0; i < t->ndim; ++i) n *= (size_t)t->shape[i];
  return n;
}

/* runtime.MapCount(map, key) */
static int64_t map_count(TVMValue map, const char* key) {
  TVMFunctionHandle count;
  TVMValue args[2], ret;
  int codes[2] = {kTVMObjectHandle, kTVMStr}, code;
  args[0] = map;
  args[1].v_str = key;
  if (TVMFuncGetGlobal("runtime.MapCount", &count) != 0 ||
      TVMFuncCall(count, args, codes, 2, &ret, &code) != 0) {
    fprintf(stderr, "runtime.MapCount: %s\n", TVMGetLastError());
    exit(1);
  }
  TVMFuncFree(count);
  return ret.v_int64;
}

int main(int argc, char** argv) {
  const char *mode, *input_name, *input_path, *prefix;
  TVMModuleHandle lib, gmod;
  TVMFunctionHandle f;
  TVMValue args[10], ret;
  int codes[10], code, i, num_outputs;
  DLTensor *view, *x;
  char* data;
  size_t size;
  const char* device = getenv("RUN_MODEL_DEVICE");
  int types[4], num_devices = 0;
  if (argc < 6) {
    fprintf(stderr, "usage: see the file comment\n");
    return 2;
  }
  while (num_devices < 4) { /* RUN_MODEL_DEVICE: device names, comma-separated */
    const char* at = device != NULL ? device : "cpu";
    size_t len = strcspn(at, ",");
    types[num_devices++] = strncmp(at, "cuda", len) == 0 && len == 4     ? kDLCUDA
                           : strncmp(at, "opencl", len) == 0 && len == 6 ? kDLOpenCL
                                                                         : kDLCPU;
    if (device == NULL || at[len] == '\0') break;
    device = at + len + 1;
  }
  mode = argv[1];
  lib = NULL;
  if (strcmp(argv[2], "-") != 0) CHECK(TVMModLoadFromFile(argv[2], "", &lib));
  if (strcmp(mode, "files") == 0) {
    char *json, *params;
    size_t json_size, params_size;
    TVMByteArray bytes;
    if (argc != 8) return 2;
    json = read_file(argv[3], &json_size);
    params = read_file(argv[4], &params_size);
    CHECK(TVMFuncGetGlobal("tvm.graph_runtime.create", &f));
    args[0].v_str = json;
    codes[0] = kTVMStr;
    args[1].v_handle = lib;
    codes[1] = kTVMModuleHandle;
    for (i = 0; i < num_devices; ++i) { /* (device_type, device_id) pairs, as TVM's */
      args[2 + 2 * i].v_int64 = types[i];
      codes[2 + 2 * i] = kTVMArgInt;
      args[3 + 2 * i].v_int64 = 0;
      codes[3 + 2 * i] = kTVMArgInt;
    }
    gmod = call_for_module(f, args, codes, 2 + 2 * num_devices);
    CHECK(TVMFuncFree(f));
    bytes.data = params;
    bytes.size = params_size;
    args[0].v_handle = &bytes;
    codes[0] = kTVMBytes;
    f = get(gmod, "load_params");
    CHECK(TVMFuncCall(f, args, codes, 1, &ret, &code));
    CHECK(TVMFuncFree(f));
    free(json);
    free(params);
    argv += 2;
  } else {
    TVMModuleHandle root = lib;
    if (argc != 6) return 2;
    if (strcmp(mode, "syslib") == 0) {
      CHECK(TVMFuncGetGlobal("runtime.SystemLib", &f));
      root = call_for_module(f, args, codes, 0);
      CHECK(TVMFuncFree(f));
    }
    f = get(root, "default");
    for (i = 0; i < num_devices; ++i) {
      args[i].v_device.device_type = (DLDeviceType)types[i];
      args[i].v_device.device_id = 0;
      codes[i] = kDLDevice;
    }
    gmod = call_for_module(f, args, codes, num_devices);
    CHECK(TVMFuncFree(f));
    if (root != lib) CHECK(TVMModFree(root));
  }
  /* TVM's info maps, {"shape": {...}, "dtype": {...}} (type index 5, Map), freed again: the
     sanitizer build checks their references */
  for (i = 0; i < 2; ++i) {
    TVMFunctionHandle map_size;
    TVMValue info, size;
    int info_code, size_code;
    unsigned tindex;
    f = get(gmod, i ? "get_output_info" : "get_input_info");
    CHECK(TVMFuncCall(f, args, codes, 0, &info, &info_code));
    CHECK(TVMFuncFree(f));
    CHECK(TVMObjectGetTypeIndex(info.v_handle, &tindex));
    CHECK(TVMFuncGetGlobal("runtime.MapSize", &map_size));
    CHECK(TVMFuncCall(map_size, &info, &info_code, 1, &size, &size_code));
    CHECK(TVMFuncFree(map_size));
    if (info_code != kTVMObjectHandle || tindex != 5 || size.v_int64 != 2 ||
        map_count(info, "shape") != 1 || map_count(info, "dtype") != 1 ||
        map_count(info, "layout") != 0) {
      fprintf(stderr, "%s: not a Map of shape and dtype\n",
              i ? "get_output_info" : "get_input_info");
      return 1;
    }
    CHECK(TVMObjectFree(info.v_handle));
  }
  input_name = argv[3];
  input_path = argv[4];
  prefix = argv[5];

  /* an array of the input's shape and dtype, filled from the file, set as input */
  f = get(gmod, "get_input");
  args[0].v_str = input_name;
  codes[0] = kTVMStr;
  CHECK(TVMFuncCall(f, args, codes, 1, &ret, &code));
  CHECK(TVMFuncFree(f));
  if (code != kTVMNDArrayHandle) {
    fprintf(stderr, "graph has no input %s\n", input_name);
    return 1;
  }
  view = (DLTensor*)ret.v_handle;
  CHECK(TVMArrayAlloc(view->shape, view->ndim, view->dtype.code, view->dtype.bits,
                      view->dtype.lanes, kDLCPU, 0, &x));
  CHECK(TVMArrayFree(view));
  data = read_file(input_path, &size);
  CHECK(TVMArrayCopyFromBytes(x, data, size));
  free(data);
  f = get(gmod, "set_input");
  args[1].v_handle = x;
  codes[1] = kTVMDLTensorHandle;
  CHECK(TVMFuncCall(f, args, codes, 2, &ret, &code));
  CHECK(TVMFuncFree(f));
  CHECK(TVMArrayFree(x));

  f = get(gmod, "run");
  CHECK(TVMFuncCall(f, args, codes, 0, &ret, &code));
  CHECK(TVMFuncFree(f));

  f = get(gmod, "get_num_outputs");
  CHECK(TVMFuncCall(f, args, codes, 0, &ret, &code));
  CHECK(TVMFuncFree(f));
  num_outputs = (int)ret.v_int64;
  f = get(gmod, "get_output");
  for (i = 0; i < num_outputs; ++i) {
    char path[4096];
    FILE* out;
    DLTensor* copy;
    size_t n;
    char *bytes, *direct;
    args[0].v_int64 = i;
    codes[0] = kTVMArgInt;
    CHECK(TVMFuncCall(f, args, codes, 1, &ret, &code));
    view = (DLTensor*)ret.v_handle;
    n = nbytes(view);
    CHECK(TVMArrayAlloc(view->shape, view->ndim, view->dtype.code, view->dtype.bits,
                        view->dtype.lanes, kDLCPU, 0, &copy));
    args[1].v_handle = copy;
    codes[1] = kTVMNDArrayHandle;
    CHECK(TVMFuncCall(f, args, codes, 2, &ret, &code));
    bytes = (char*)malloc(n ? n : 1);
    direct = (char*)malloc(n ? n : 1);
    CHECK(TVMArrayCopyToBytes(copy, bytes, n));
    CHECK(TVMArrayCopyToBytes(view, direct, n)); /* the view may be GPU memory */
    if (n != 0 && memcmp(bytes, direct, n) != 0) {
      fprintf(stderr, "get_output(%d) and get_output(%d, out) disagree\n", i, i);
      return 1;
    }
    snprintf(path, sizeof(path), "%s%d.bin", prefix, i);
    out = fopen(path, "wb");
    if (out == NULL || fwrite(bytes, 1, n, out) != n) return 1;
    fclose(out);
    free(bytes);
    free(direct);
    CHECK(TVMArrayFree(copy));
    CHECK(TVMArrayFree(view));
  }
  CHECK(TVMFuncFree(f));
  printf("outputs: %d\n", num_outputs);
  CHECK(TVMModFree(gmod));
  if (lib != NULL) CHECK(TVMModFree(lib));
  return 0;
}
