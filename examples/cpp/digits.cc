// The digits model the repository ships (examples/digits/tvm016: an MLP built by TVM 0.16,
// legacy ABI; examples/digits/model: the same built by `tvmrt compile`, tvm-ffi kernels),
// run from C++ with tvmrt's C runtime and no Python: the deployment guide's
// flow (load the library, create the graph executor, load params, set the input, run, get
// the output) on the 360 held-out digits, then the accuracy against their labels.
//
//   digits LIB GRAPH.json PARAMS IMAGES.bin LABELS.bin [PROBS.bin]
//
// IMAGES.bin: float32 360x64 (8x8 pixels, 0..1), LABELS.bin: int64 360, the members of
// examples/digits/model/heldout.npz as raw bytes (`make run-digits` writes them); PROBS.bin,
// if named, receives the 360x10 float32 output. C programs run legacy-ABI builds (TVM <= 0.20)
// and tvm-ffi kernel libraries (TVM 0.21 to 0.27) beside their graph JSON.
#include <dlpack/dlpack.h>
#include <tvm/runtime/module.h>
#include <tvm/runtime/ndarray.h>
#include <tvm/runtime/packed_func.h>
#include <tvm/runtime/registry.h>

#include <cstdint>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

static const int64_t kRows = 360, kPixels = 64, kClasses = 10;

static std::string ReadFile(const char* path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(std::string("cannot read ") + path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

int main(int argc, char** argv) {
  if (argc != 6 && argc != 7) {
    std::cerr << "usage: " << argv[0]
              << " LIB GRAPH.json PARAMS IMAGES.bin LABELS.bin [PROBS.bin]\n";
    return 2;
  }
  try {
    std::string images = ReadFile(argv[4]), labels = ReadFile(argv[5]);
    if (images.size() != kRows * kPixels * 4 || labels.size() != kRows * 8) {
      std::cerr << "expected " << kRows << " images of " << kPixels << " float32 and " << kRows
                << " int64 labels\n";
      return 2;
    }
    tvm::runtime::Module lib = tvm::runtime::Module::LoadFromFile(argv[1]);
    std::string graph = ReadFile(argv[2]), params = ReadFile(argv[3]);
    tvm::runtime::Module gmod = (*tvm::runtime::Registry::Get("tvm.graph_executor.create"))(
        graph, lib, static_cast<int>(kDLCPU), 0);
    TVMByteArray blob{params.data(), params.size()};
    gmod.GetFunction("load_params")(blob);

    DLDevice cpu{kDLCPU, 0};
    DLDataType f32{kDLFloat, 32, 1};
    tvm::runtime::NDArray x = tvm::runtime::NDArray::Empty({kRows, kPixels}, f32, cpu);
    x.CopyFromBytes(images.data(), images.size());
    gmod.GetFunction("set_input")("image", x);
    gmod.GetFunction("run")();
    tvm::runtime::NDArray y = tvm::runtime::NDArray::Empty({kRows, kClasses}, f32, cpu);
    gmod.GetFunction("get_output")(0, y);

    std::vector<float> probs(kRows * kClasses);
    y.CopyToBytes(probs.data(), probs.size() * sizeof(float));
    const int64_t* truth = reinterpret_cast<const int64_t*>(labels.data());
    int64_t right = 0;
    for (int64_t row = 0; row < kRows; ++row) {
      int64_t best = 0;
      for (int64_t c = 1; c < kClasses; ++c) {
        if (probs[row * kClasses + c] > probs[row * kClasses + best]) best = c;
      }
      right += best == truth[row];
      if (row < 5)
        std::cout << "digit " << row << ": " << best << " (label " << truth[row] << ")\n";
    }
    std::cout << "accuracy: " << right << "/" << kRows << " held-out digits\n";
    if (argc == 7) {
      std::ofstream out(argv[6], std::ios::binary);
      out.write(reinterpret_cast<const char*>(probs.data()), probs.size() * sizeof(float));
    }
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
