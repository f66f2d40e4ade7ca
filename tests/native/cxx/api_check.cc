// Checks of the C++ layer beyond the guide program, against the real runtime:
// TVM_REGISTER_GLOBAL / Registry::Get round trips, TVMRetValue conversions, NDArray,
// modules returned by calls, and errors. Prints "ok" and exits 0, or names the failure.
#include <tvm/runtime/data_type.h>
#include <tvm/runtime/module.h>
#include <tvm/runtime/ndarray.h>
#include <tvm/runtime/packed_func.h>
#include <tvm/runtime/registry.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using tvm::runtime::DataType;
using tvm::runtime::NDArray;
using tvm::runtime::PackedFunc;
using tvm::runtime::Registry;
using tvm::runtime::TVMArgs;
using tvm::runtime::TVMRetValue;

#define CHECK_TRUE(cond)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      std::fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #cond);                      \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

TVM_REGISTER_GLOBAL("test.add_scaled").set_body([](TVMArgs args, TVMRetValue* rv) {
  int64_t a = args[0];
  double scale = args[1];
  *rv = static_cast<double>(a) * scale;
});

TVM_REGISTER_GLOBAL("test.greet").set_body([](TVMArgs args, TVMRetValue* rv) {
  std::string name = args[0];
  *rv = "hello " + name;
});

TVM_REGISTER_GLOBAL("test.sum").set_body([](TVMArgs args, TVMRetValue* rv) {
  DLTensor* t = args[0];
  const float* p = static_cast<const float*>(t->data);
  double s = 0;
  for (int64_t i = 0; i < t->shape[0]; ++i) s += p[i];
  *rv = s;
});

TVM_REGISTER_GLOBAL("test.fail").set_body([](TVMArgs, TVMRetValue*) {
  throw tvm::runtime::Error("test.fail: asked to fail");
});

int main(int argc, char** argv) {
  CHECK_TRUE(Registry::Get("test.no_such_function") == nullptr);
  const PackedFunc* add = Registry::Get("test.add_scaled");
  CHECK_TRUE(add != nullptr);
  CHECK_TRUE(Registry::Get("test.add_scaled") == add);  // one entry per name
  double r = (*add)(3, 0.5);
  CHECK_TRUE(r == 1.5);
  std::string greeting = (*Registry::Get("test.greet"))("tvmrt");
  CHECK_TRUE(greeting == "hello tvmrt");
  std::string from_std = (*Registry::Get("test.greet"))(std::string("c++"));
  CHECK_TRUE(from_std == "hello c++");

  // a PackedFunc made from a lambda, passed as an argument is callable through the runtime
  PackedFunc twice([](TVMArgs args, TVMRetValue* rv) { *rv = 2 * static_cast<int64_t>(args[0]); });
  int64_t four = twice(2);
  CHECK_TRUE(four == 4);

  NDArray a = NDArray::Empty({4}, DLDataType{kDLFloat, 32, 1}, DLDevice{kDLCPU, 0});
  float host[4] = {1.f, 2.f, 3.5f, -0.5f};
  a.CopyFromBytes(host, sizeof(host));
  CHECK_TRUE(a->ndim == 1 && a->shape[0] == 4);
  CHECK_TRUE(a.DataType() == DataType::Float(32));
  CHECK_TRUE(tvm::runtime::DLDataType2String(a->dtype) == "float32");
  double sum = (*Registry::Get("test.sum"))(a);  // NDArray passed as an NDArray handle
  CHECK_TRUE(sum == 6.0);
  NDArray b = a.CopyTo(DLDevice{kDLCPU, 0});
  float back[4] = {0, 0, 0, 0};
  b.CopyToBytes(back, sizeof(back));
  CHECK_TRUE(std::memcmp(host, back, sizeof(host)) == 0);
  NDArray c = b;
  CHECK_TRUE(c.use_count() == 2);

  // DLPack out and back in: one tensor, no copy; the memory stays until the last owner goes
  DLManagedTensor* exported = a.ToDLPack();
  CHECK_TRUE(exported->dl_tensor.data == a->data);
  {
    NDArray again = NDArray::FromDLPack(exported);  // owns `exported` now
    CHECK_TRUE(again->data == a->data && again->shape[0] == 4);
    a = NDArray();  // `again` keeps the memory alive through the DLPack tensor
    float through[4] = {0, 0, 0, 0};
    again.CopyToBytes(through, sizeof(through));
    CHECK_TRUE(std::memcmp(host, through, sizeof(host)) == 0);
  }  // the last owner: the exported tensor's deleter frees it (ASan: no leak)

  // errors from C++ bodies and from the runtime come back as tvm::runtime::Error
  bool threw = false;
  try {
    (*Registry::Get("test.fail"))();
  } catch (const tvm::runtime::Error& e) {
    threw = std::string(e.what()).find("asked to fail") != std::string::npos;
  }
  CHECK_TRUE(threw);
  threw = false;
  try {
    tvm::runtime::Module::LoadFromFile("/nonexistent/deploy_lib.so");
  } catch (const tvm::runtime::Error& e) {
    threw = std::string(e.what()).find("/nonexistent/deploy_lib.so") != std::string::npos;
  }
  CHECK_TRUE(threw);
  threw = false;
  try {
    std::string not_a_string = (*add)(1, 1.0);
  } catch (const tvm::runtime::Error& e) {
    threw = std::string(e.what()) == "expected str but got float";
  }
  CHECK_TRUE(threw);

  // a factory library: lib["default"](dev) returns a Module, its functions work
  if (argc == 2) {
    tvm::runtime::Module lib = tvm::runtime::Module::LoadFromFile(argv[1]);
    PackedFunc create = lib.GetFunction("default");
    CHECK_TRUE(create != nullptr);
    CHECK_TRUE(lib.GetFunction("no_such_function") == nullptr);
    tvm::runtime::Module gmod = create(DLDevice{kDLCPU, 0});
    int64_t n_in = gmod.GetFunction("get_num_inputs")();
    int64_t n_out = gmod.GetFunction("get_num_outputs")();
    CHECK_TRUE(n_in == 1 && n_out == 1);
    NDArray in = gmod.GetFunction("get_input")(0);
    CHECK_TRUE(in->ndim == 4 && in->shape[1] == 3);
    std::printf("inputs=%lld outputs=%lld\n", static_cast<long long>(n_in),
                static_cast<long long>(n_out));
  }
  std::printf("ok\n");
  return 0;
}
