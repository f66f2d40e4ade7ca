// A system-module application (TVM's "Deploy as System Module"): the model's kernels
// (lib0.o) and module blob (devc.c) from export_library("deploy.tar", fcompile=False) of a
// system-lib build are linked into this program with libtvmrt_runtime.a: one executable,
// no .so beside it, no dlopen of the model.
//
//   system_module INPUT_NAME INPUT.bin OUTPUT.bin
//
// reads INPUT.bin (raw bytes of the input tensor, in the graph's shape and dtype), runs the
// graph once on the CPU and writes output 0's raw bytes to OUTPUT.bin.
#include <dlpack/dlpack.h>
#include <tvm/runtime/module.h>
#include <tvm/runtime/ndarray.h>
#include <tvm/runtime/packed_func.h>
#include <tvm/runtime/registry.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

static size_t NumBytes(const tvm::runtime::NDArray& array) {
  size_t n = (array->dtype.bits * array->dtype.lanes + 7) / 8;
  for (int i = 0; i < array->ndim; ++i) n *= static_cast<size_t>(array->shape[i]);
  return n;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: " << argv[0] << " INPUT_NAME INPUT.bin OUTPUT.bin\n";
    return 2;
  }
  try {
    // the kernels and the blob registered themselves before main: get them as one module
    tvm::runtime::Module syslib = (*tvm::runtime::Registry::Get("runtime.SystemLib"))();
    DLDevice dev{kDLCPU, 0};
    tvm::runtime::Module gmod = syslib.GetFunction("default")(dev);
    tvm::runtime::PackedFunc set_input = gmod.GetFunction("set_input");
    tvm::runtime::PackedFunc get_input = gmod.GetFunction("get_input");
    tvm::runtime::PackedFunc get_input_index = gmod.GetFunction("get_input_index");
    tvm::runtime::PackedFunc run = gmod.GetFunction("run");
    tvm::runtime::PackedFunc get_output = gmod.GetFunction("get_output");

    int index = get_input_index(argv[1]);
    if (index < 0) {
      std::cerr << "the graph has no input named " << argv[1] << "\n";
      return 1;
    }
    tvm::runtime::NDArray input = get_input(index);
    std::ifstream in(argv[2], std::ios::binary);
    std::vector<char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (data.size() != NumBytes(input)) {
      std::cerr << argv[2] << " has " << data.size() << " bytes, input " << argv[1] << " needs "
                << NumBytes(input) << "\n";
      return 1;
    }
    input.CopyFromBytes(data.data(), data.size());
    set_input(argv[1], input);
    run();
    tvm::runtime::NDArray output = get_output(0);
    std::vector<char> result(NumBytes(output));
    output.CopyToBytes(result.data(), result.size());
    std::ofstream out(argv[3], std::ios::binary);
    out.write(result.data(), static_cast<std::streamsize>(result.size()));
    std::cout << "output 0: " << tvm::runtime::DataType(output->dtype) << " " << result.size()
              << " bytes\n";
  } catch (const tvm::runtime::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
