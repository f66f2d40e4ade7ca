/*
 * TVM's apps/bundle_deploy library in tvmrt's own words: a system-lib model linked with this
 * file into bundle.so, which a program dlopens (bundle_driver.c). As TVM's bundle.cc it
 * includes only c_runtime_api.h and registry.h, and calls strlen and uses uint64_t without
 * including <cstring> or <cstdint> itself: TVM's registry.h brings them, and so does tvmrt's.
 */
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/registry.h>

#include <memory>

#define BUNDLE_API __attribute__((visibility("default")))

extern "C" {

BUNDLE_API void* tvm_runtime_create(const char* graph_json, const char* params_bin,
                                    const uint64_t params_bin_len) {
  const std::string json(graph_json, graph_json + strlen(graph_json));
  tvm::runtime::Module syslib = (*tvm::runtime::Registry::Get("runtime.SystemLib"))();
  tvm::runtime::Module mod =
      (*tvm::runtime::Registry::Get("tvm.graph_executor.create"))(json, syslib, kDLCPU, 0);
  TVMByteArray params;
  params.data = params_bin;
  params.size = params_bin_len;
  mod.GetFunction("load_params")(params);
  return new tvm::runtime::Module(mod);
}

BUNDLE_API void tvm_runtime_destroy(void* handle) {
  delete reinterpret_cast<tvm::runtime::Module*>(handle);
}

BUNDLE_API void tvm_runtime_set_input(void* handle, const char* name, void* tensor) {
  reinterpret_cast<tvm::runtime::Module*>(handle)->GetFunction("set_input")(
      name, reinterpret_cast<DLTensor*>(tensor));
}

BUNDLE_API void tvm_runtime_run(void* handle) {
  reinterpret_cast<tvm::runtime::Module*>(handle)->GetFunction("run")();
}

BUNDLE_API void tvm_runtime_get_output(void* handle, int index, void* tensor) {
  reinterpret_cast<tvm::runtime::Module*>(handle)->GetFunction("get_output")(
      index, reinterpret_cast<DLTensor*>(tensor));
}
}
