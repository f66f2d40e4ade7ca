/*
 * TVM's apps/howto_deploy flow in tvmrt's own words: the constructs cpp_deploy.cc uses
 * (the same four includes, LOG(INFO), ICHECK, ICHECK_EQ, Module::LoadFromFile,
 * Registry::Get("runtime.SystemLib"), a graph executor over a factory, NDArray::Empty),
 * compiled with `tvmrt config --cflags --libs` only, then the macros' failures.
 *
 *   howto_deploy ADDONE_DLL.so RELAY_ADD.so    (linked with addone_sys.o, a system lib)
 */
#include <dlpack/dlpack.h>
#include <tvm/runtime/module.h>
#include <tvm/runtime/packed_func.h>
#include <tvm/runtime/registry.h>

#include <cstdio>

static void Verify(tvm::runtime::Module mod, std::string fname) {
  tvm::runtime::PackedFunc f = mod.GetFunction(fname);
  ICHECK(f != nullptr);
  DLTensor* x;
  DLTensor* y;
  int64_t shape[1] = {10};
  TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCPU, 0, &x);
  TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCPU, 0, &y);
  for (int i = 0; i < shape[0]; ++i) static_cast<float*>(x->data)[i] = static_cast<float>(i);
  f(x, y);
  for (int i = 0; i < shape[0]; ++i) ICHECK_EQ(static_cast<float*>(y->data)[i], i + 1.0f);
  LOG(INFO) << "verified " << fname;
  TVMArrayFree(x);
  TVMArrayFree(y);
}

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s ADDONE_DLL.so RELAY_ADD.so\n", argv[0]);
    return 2;
  }
  Verify(tvm::runtime::Module::LoadFromFile(argv[1]), "addone");
  Verify((*tvm::runtime::Registry::Get("runtime.SystemLib"))(), "addonesys");

  DLDevice dev{kDLCPU, 0};
  tvm::runtime::Module factory = tvm::runtime::Module::LoadFromFile(argv[2]);
  tvm::runtime::Module gmod = factory.GetFunction("default")(dev);
  tvm::runtime::NDArray x = tvm::runtime::NDArray::Empty({2, 2}, DLDataType{kDLFloat, 32, 1}, dev);
  tvm::runtime::NDArray y = tvm::runtime::NDArray::Empty({2, 2}, DLDataType{kDLFloat, 32, 1}, dev);
  for (int i = 0; i < 4; ++i) static_cast<float*>(x->data)[i] = static_cast<float>(i);
  gmod.GetFunction("set_input")("x", x);
  gmod.GetFunction("run")();
  gmod.GetFunction("get_output")(0, y);
  for (int i = 0; i < 4; ++i) ICHECK_EQ(static_cast<float*>(y->data)[i], i + 1);
  LOG(INFO) << "graph executor verified";

  /* what a failed check says, and what it throws */
  try {
    ICHECK_EQ(2 + 2, 5) << "arithmetic";
  } catch (const tvm::runtime::InternalError& e) {
    std::printf("ICHECK_EQ: %s\n", e.what());
  }
  try {
    int* none = nullptr;
    ICHECK(none != nullptr) << "no pointer";
  } catch (const tvm::Error& e) {
    std::printf("ICHECK: %s\n", e.what());
  }
  try {
    CHECK_LT(3, 1);
  } catch (const tvm::InternalError& e) {
    std::printf("CHECK_LT: %s (line %d)\n", e.what(), e.lineno() > 0 ? 1 : 0);
  }
  try {
    LOG(FATAL) << "fatal " << 42;
  } catch (const std::runtime_error& e) {
    std::printf("LOG(FATAL): %s\n", e.what());
  }
  const char* name = "ok";
  std::printf("CHECK_NOTNULL: %s\n", CHECK_NOTNULL(name));
  DLOG(INFO) << "compiled out";
  LOG_IF(WARNING, false) << "not shown";
  std::printf("done\n");
  return 0;
}
