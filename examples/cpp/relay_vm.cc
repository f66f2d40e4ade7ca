// A Relay VM model (relay.vm.compile, then exe.mod.export_library("vm.so")) from C++ with
// tvmrt's C runtime, as TVM's C++ runtime runs it: load vm.so, make a VirtualMachine, init it
// on the CPU with the pooled allocator, set the input, invoke, read every output.
//
//   relay_vm VM_SO INPUT.bin D0 [D1 ...] OUT_PREFIX
//
// INPUT.bin holds a float32 tensor of shape D0 x D1 x ... (raw, little-endian); output k is
// written to OUT_PREFIX<k>.bin and its shape printed. Several VMs may share one executable;
// a dynamic-batch model takes any D0 here.
#include <tvm/runtime/module.h>
#include <tvm/runtime/ndarray.h>
#include <tvm/runtime/packed_func.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 5) {
    std::cerr << "usage: relay_vm VM_SO INPUT.bin D0 [D1 ...] OUT_PREFIX\n";
    return 2;
  }
  tvm::runtime::Module exe = tvm::runtime::Module::LoadFromFile(argv[1]);
  tvm::runtime::Module vm = exe.GetFunction("vm_load_executable")();
  vm.GetFunction("init")(static_cast<int>(kDLCPU), 0, 2);  // device type, id, pooled allocator

  std::vector<int64_t> shape;
  for (int i = 3; i < argc - 1; ++i) shape.push_back(std::atoll(argv[i]));
  tvm::runtime::NDArray x =
      tvm::runtime::NDArray::Empty(tvm::runtime::ShapeTuple(shape.begin(), shape.end()),
                                   DLDataType{kDLFloat, 32, 1}, DLDevice{kDLCPU, 0});
  size_t count = 1;
  for (int64_t d : shape) count *= static_cast<size_t>(d);
  std::vector<float> data(count);
  std::ifstream in(argv[2], std::ios::binary);
  in.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(count * 4));
  if (!in) {
    std::cerr << "cannot read " << count * 4 << " bytes from " << argv[2] << "\n";
    return 2;
  }
  x.CopyFromBytes(data.data(), count * 4);

  vm.GetFunction("set_input")("main", x);
  vm.GetFunction("invoke_stateful")("main");
  int num_outputs = vm.GetFunction("get_num_outputs")();
  tvm::runtime::PackedFunc get_output = vm.GetFunction("get_output");
  for (int k = 0; k < num_outputs; ++k) {
    tvm::runtime::NDArray y = get_output(k);
    size_t bytes = (y->dtype.bits + 7) / 8 * y->dtype.lanes;
    std::cout << "output " << k << ":";
    for (int d = 0; d < y->ndim; ++d) {
      std::cout << " " << y->shape[d];
      bytes *= static_cast<size_t>(y->shape[d]);
    }
    std::cout << "\n";
    std::vector<char> out(bytes);
    y.CopyToBytes(out.data(), bytes);
    std::ofstream(std::string(argv[argc - 1]) + std::to_string(k) + ".bin", std::ios::binary)
        .write(out.data(), static_cast<std::streamsize>(bytes));
  }
  return 0;
}
