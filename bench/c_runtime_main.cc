// bench/c_runtime.py's program: the deployment guide's MobileNet flow (load, create, set
// input, load params, run, get output) written only with the TVM C++ API that tvmrt's
// headers and TVM 0.16's own both have, so the same source is built against either runtime.
//
//   c_runtime_main RUNS OUT.bin     (in a folder with deploy_lib.so, deploy_graph.json,
//                                    deploy_param.params, cat.bin)
//
// Prints first_output_ms (process start to the first output, measured from main) and,
// after RUNS more timed run() calls, run_ms=<median>; writes the first output to OUT.bin.
#include <dlpack/dlpack.h>
#include <tvm/runtime/module.h>
#include <tvm/runtime/packed_func.h>
#include <tvm/runtime/registry.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

using Clock = std::chrono::steady_clock;

static double Ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

int main(int argc, char** argv) {
  Clock::time_point start = Clock::now();
  if (argc != 3) {
    std::cerr << "usage: " << argv[0] << " RUNS OUT.bin\n";
    return 2;
  }
  int runs = std::atoi(argv[1]);
  // TVM 0.16 dlopens a bare name through the library path, hence ./; it registers only
  // the new name of the executor constructor (tvmrt has both)
  tvm::runtime::Module lib = tvm::runtime::Module::LoadFromFile("./deploy_lib.so");
  std::ifstream json_in("deploy_graph.json");
  std::string json((std::istreambuf_iterator<char>(json_in)), std::istreambuf_iterator<char>());
  std::ifstream params_in("deploy_param.params", std::ios::binary);
  std::string params((std::istreambuf_iterator<char>(params_in)),
                     std::istreambuf_iterator<char>());
  TVMByteArray params_arr{params.data(), params.size()};
  int device_type = kDLCPU, device_id = 0;
  tvm::runtime::Module mod = (*tvm::runtime::Registry::Get("tvm.graph_executor.create"))(
      json, lib, device_type, device_id);
  DLTensor* x;
  DLTensor* y;
  int64_t in_shape[4] = {1, 3, 224, 224};
  int64_t out_shape[2] = {1, 1000};
  TVMArrayAlloc(in_shape, 4, kDLFloat, 32, 1, device_type, device_id, &x);
  TVMArrayAlloc(out_shape, 2, kDLFloat, 32, 1, device_type, device_id, &y);
  std::ifstream data_in("cat.bin", std::ios::binary);
  data_in.read(static_cast<char*>(x->data), 3 * 224 * 224 * 4);
  tvm::runtime::PackedFunc set_input = mod.GetFunction("set_input");
  tvm::runtime::PackedFunc run = mod.GetFunction("run");
  tvm::runtime::PackedFunc get_output = mod.GetFunction("get_output");
  mod.GetFunction("load_params")(params_arr);
  set_input("data", x);
  run();
  get_output(0, y);
  Clock::time_point first = Clock::now();
  std::printf("first_output_ms=%.3f\n", Ms(start, first));
  if (FILE* f = std::fopen(argv[2], "wb")) {
    std::fwrite(y->data, 4, 1000, f);
    std::fclose(f);
  }
  std::vector<double> times;
  for (int i = 0; i < runs; ++i) {
    Clock::time_point t0 = Clock::now();
    run();
    times.push_back(Ms(t0, Clock::now()));
  }
  if (!times.empty()) {
    std::sort(times.begin(), times.end());
    std::printf("run_ms=%.3f\n", times[times.size() / 2]);
  }
  TVMArrayFree(x);
  TVMArrayFree(y);
  return 0;
}
