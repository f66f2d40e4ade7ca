// TVM's deployment guide C++ program ("Deploy NNVM Modules"), as written there: it
// compiles unchanged against tvmrt's headers and links with libtvmrt_runtime alone.
// Run it in a folder holding deploy_lib.so, deploy_graph.json, deploy_param.params and cat.bin
// (a float32 1x3x224x224 image, e.g. MobileNet v1's input).
#include <dlpack/dlpack.h>
#include <tvm/runtime/module.h>
#include <tvm/runtime/registry.h>
#include <tvm/runtime/packed_func.h>
#include <fstream>
#include <iterator>
#include <algorithm>
#include <iostream>

int main() {
  tvm::runtime::Module mod_syslib = tvm::runtime::Module::LoadFromFile("deploy_lib.so");
  std::ifstream json_in("deploy_graph.json", std::ios::in);
  std::string json_data((std::istreambuf_iterator<char>(json_in)),
                        std::istreambuf_iterator<char>());
  std::ifstream params_in("deploy_param.params", std::ios::binary);
  std::string params_data((std::istreambuf_iterator<char>(params_in)),
                          std::istreambuf_iterator<char>());
  TVMByteArray params_arr;
  params_arr.data = params_data.c_str();
  params_arr.size = params_data.length();
  int dtype_code = kDLFloat, dtype_bits = 32, dtype_lanes = 1, device_type = kDLCPU, device_id = 0;
  tvm::runtime::Module mod = (*tvm::runtime::Registry::Get("tvm.graph_runtime.create"))(
      json_data, mod_syslib, device_type, device_id);
  DLTensor* x;
  int64_t in_shape[4] = {1, 3, 224, 224};
  TVMArrayAlloc(in_shape, 4, dtype_code, dtype_bits, dtype_lanes, device_type, device_id, &x);
  std::ifstream data_fin("cat.bin", std::ios::binary);
  data_fin.read(static_cast<char*>(x->data), 3 * 224 * 224 * 4);
  tvm::runtime::PackedFunc set_input = mod.GetFunction("set_input");
  set_input("data", x);
  tvm::runtime::PackedFunc load_params = mod.GetFunction("load_params");
  load_params(params_arr);
  tvm::runtime::PackedFunc run = mod.GetFunction("run");
  run();
  DLTensor* y;
  int64_t out_shape[2] = {1, 1000};
  TVMArrayAlloc(out_shape, 2, dtype_code, dtype_bits, dtype_lanes, device_type, device_id, &y);
  tvm::runtime::PackedFunc get_output = mod.GetFunction("get_output");
  get_output(0, y);
  auto y_iter = static_cast<float*>(y->data);
  auto max_iter = std::max_element(y_iter, y_iter + 1000);
  std::cout << "The maximum position in output vector is: " << std::distance(y_iter, max_iter)
            << std::endl;
  TVMArrayFree(x);
  TVMArrayFree(y);
  return 0;
}
