/*
 * Drives libtvmrt_runtime into its error paths and prints one line per case,
 * "<case>: <TVMGetLastError()>", for tests/native/test_c_errors.py to compare with the
 * Python runtime's messages for the same mistakes. A case whose call does not fail
 * prints "<case>: NO ERROR"; a crash or leak fails the test (it also runs under ASan).
 *
 *   errors CNN_FACTORY.so AARCH64.so AOT.so
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tvm/runtime/c_runtime_api.h>

static void report(const char* name, int rc) {
  printf("%s: %s\n", name, rc != 0 ? TVMGetLastError() : "NO ERROR");
}

static int call(TVMModuleHandle mod, const char* fn, TVMValue* args, int* codes, int n,
                TVMValue* ret, int* code) {
  TVMFunctionHandle f = NULL;
  int rc;
  if (TVMModGetFunction(mod, fn, 0, &f) != 0 || f == NULL) {
    printf("%s: missing\n", fn);
    exit(1);
  }
  rc = TVMFuncCall(f, args, codes, n, ret, code);
  TVMFuncFree(f);
  return rc;
}

int main(int argc, char** argv) {
  TVMModuleHandle lib, gmod, other;
  TVMFunctionHandle f;
  TVMValue args[4], ret;
  int codes[4], code, rc;
  DLTensor* x;
  int64_t good[4] = {1, 3, 16, 16}, bad[4] = {1, 3, 16, 15};
  char junk[64];
  TVMByteArray bytes;
  if (argc != 4) return 2;

  report("load_missing", TVMModLoadFromFile("/nonexistent/x.so", "", &other));
  report("load_foreign_arch", TVMModLoadFromFile(argv[2], "", &other));
  report("load_unknown_blob_kind", TVMModLoadFromFile(argv[3], "", &other));
  report("load_tar", TVMModLoadFromFile("deploy.tar", "", &other));
  report("alloc_vulkan", TVMArrayAlloc(good, 4, kDLFloat, 32, 1, kDLVulkan, 0, &x));

  if (TVMFuncGetGlobal("no.such.function", &f) != 0 || f != NULL) return 1;
  printf("global_missing: null\n");

  if (TVMModLoadFromFile(argv[1], "", &lib) != 0) return 1;
  if (TVMModGetFunction(lib, "no_such_kernel", 1, &f) != 0 || f != NULL) return 1;
  printf("function_missing: null\n");
  args[0].v_device.device_type = kDLCPU;
  args[0].v_device.device_id = 0;
  codes[0] = kDLDevice;
  if (call(lib, "default", args, codes, 1, &ret, &code) != 0) return 1;
  gmod = ret.v_handle;

  TVMArrayAlloc(good, 4, kDLFloat, 32, 1, kDLCPU, 0, &x);
  args[0].v_str = "nope";
  codes[0] = kTVMStr;
  args[1].v_handle = x;
  codes[1] = kTVMDLTensorHandle;
  report("set_input_unknown_name", call(gmod, "set_input", args, codes, 2, &ret, &code));
  TVMArrayFree(x);
  TVMArrayAlloc(bad, 4, kDLFloat, 32, 1, kDLCPU, 0, &x);
  args[0].v_str = "data";
  args[1].v_handle = x;
  report("set_input_wrong_shape", call(gmod, "set_input", args, codes, 2, &ret, &code));
  TVMArrayFree(x);

  args[0].v_int64 = 3;
  codes[0] = kTVMArgInt;
  report("get_output_index", call(gmod, "get_output", args, codes, 1, &ret, &code));
  args[0].v_int64 = 7;
  report("get_input_index_range", call(gmod, "get_input", args, codes, 1, &ret, &code));
  report("get_input_index_int", call(gmod, "get_input_index", args, codes, 1, &ret, &code));

  memset(junk, 'A', sizeof(junk));
  bytes.data = junk;
  bytes.size = sizeof(junk);
  args[0].v_handle = &bytes;
  codes[0] = kTVMBytes;
  report("load_params_magic", call(gmod, "load_params", args, codes, 1, &ret, &code));
  bytes.size = 4;
  report("load_params_short", call(gmod, "load_params", args, codes, 1, &ret, &code));

  if (TVMFuncGetGlobal("tvm.graph_executor.create", &f) != 0 || f == NULL) return 1;
  args[0].v_str = "{\"nodes\": [}";
  codes[0] = kTVMStr;
  args[1].v_handle = lib;
  codes[1] = kTVMModuleHandle;
  args[2].v_int64 = kDLCPU;
  codes[2] = kTVMArgInt;
  args[3].v_int64 = 0;
  codes[3] = kTVMArgInt;
  report("graph_json_invalid", TVMFuncCall(f, args, codes, 4, &ret, &code));
  args[0].v_str =
      "{\"nodes\": [{\"op\": \"null\", \"name\": \"x\", \"inputs\": []}, {\"op\": \"tvm_op\", "
      "\"name\": \"k\", \"inputs\": [[0, 0, 0]], \"attrs\": {\"func_name\": \"no_such_kernel\", "
      "\"num_inputs\": \"1\", \"num_outputs\": \"1\", \"flatten_data\": \"0\"}}], "
      "\"arg_nodes\": [0], \"node_row_ptr\": [0, 1, 2], \"heads\": [[1, 0, 0]], \"attrs\": "
      "{\"dltype\": [\"list_str\", [\"float32\", \"float32\"]], \"shape\": [\"list_shape\", "
      "[[2], [2]]], \"storage_id\": [\"list_int\", [0, 1]]}}";
  report("graph_missing_kernel", TVMFuncCall(f, args, codes, 4, &ret, &code));
  rc = TVMFuncCall(f, args, codes, 2, &ret, &code);
  report("graph_create_arity", rc);
  TVMFuncFree(f);

  TVMModFree(gmod);
  TVMModFree(lib);
  return 0;
}
