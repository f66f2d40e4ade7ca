// A C++ deployment program for a CUDA or OpenCL build, written as TVM's C++ users wrote one:
// the factory library's "default" on kDLCUDA or kDLOpenCL, input and output NDArrays on the
// device, bytes in and out with CopyFromBytes/CopyToBytes. It compiles against tvmrt's
// headers and links with libtvmrt_runtime alone. make gpu-check runs it on relay019_ptx.so
// (scripts/gpu_check_faces.py); tests/native/test_c_opencl.py on an OpenCL build on pocl.
//
//   device_deploy cuda|opencl LIB INPUT_NAME IN_FLOATS IN.bin OUT_FLOATS OUT.bin
//
// The input is IN_FLOATS float32 values shaped (1, IN_FLOATS); the output (1, OUT_FLOATS).
#include <dlpack/dlpack.h>
#include <tvm/runtime/module.h>
#include <tvm/runtime/ndarray.h>
#include <tvm/runtime/packed_func.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  const std::string device = argc == 8 ? argv[1] : "";
  if (argc != 8 || (device != "cuda" && device != "opencl")) {
    std::cerr << "usage: device_deploy cuda|opencl LIB INPUT_NAME IN_FLOATS IN.bin OUT_FLOATS "
                 "OUT.bin\n";
    return 2;
  }
  ++argv;
  const int64_t n_in = std::atoll(argv[3]), n_out = std::atoll(argv[5]);
  std::ifstream in_file(argv[4], std::ios::binary);
  std::vector<char> in_bytes((std::istreambuf_iterator<char>(in_file)),
                             std::istreambuf_iterator<char>());
  if (n_in <= 0 || n_out <= 0 || in_bytes.size() != static_cast<size_t>(n_in) * 4) {
    std::cerr << "device_deploy: " << argv[4] << " should hold " << n_in << " float32 values\n";
    return 2;
  }
  try {
    DLDevice dev{device == "cuda" ? kDLCUDA : kDLOpenCL, 0};
    tvm::runtime::Module lib = tvm::runtime::Module::LoadFromFile(argv[1]);
    tvm::runtime::Module gmod = lib.GetFunction("default")(dev);
    DLDataType f32{kDLFloat, 32, 1};
    tvm::runtime::NDArray x = tvm::runtime::NDArray::Empty({1, n_in}, f32, dev);
    x.CopyFromBytes(in_bytes.data(), in_bytes.size());
    gmod.GetFunction("set_input")(argv[2], x);
    gmod.GetFunction("run")();
    tvm::runtime::NDArray y = tvm::runtime::NDArray::Empty({1, n_out}, f32, dev);
    gmod.GetFunction("get_output")(0, y);
    std::vector<float> out(static_cast<size_t>(n_out));
    y.CopyToBytes(out.data(), out.size() * sizeof(float));  // waits for the device
    std::ofstream(argv[6], std::ios::binary)
        .write(reinterpret_cast<const char*>(out.data()),
               static_cast<std::streamsize>(out.size() * sizeof(float)));
  } catch (const std::exception& exc) {
    std::cerr << "device_deploy: " << exc.what() << "\n";
    return 1;
  }
  return 0;
}
