// Test helper linked beside an unchanged program with -Wl,--wrap=TVMArrayFree: each array
// the program frees is first written to freed_<n>.bin (its raw bytes) in the working folder,
// so a test can read back outputs the program itself only prints a summary of.
#include <tvm/runtime/c_runtime_api.h>

#include <cstdio>
#include <string>

extern "C" int __real_TVMArrayFree(TVMArrayHandle handle);

extern "C" int __wrap_TVMArrayFree(TVMArrayHandle handle) {
  static int count = 0;
  if (handle != nullptr && handle->data != nullptr) {
    size_t n = (handle->dtype.bits * handle->dtype.lanes + 7) / 8;
    for (int i = 0; i < handle->ndim; ++i) n *= static_cast<size_t>(handle->shape[i]);
    std::string name = "freed_" + std::to_string(count++) + ".bin";
    if (FILE* f = std::fopen(name.c_str(), "wb")) {
      std::fwrite(static_cast<char*>(handle->data) + handle->byte_offset, 1, n, f);
      std::fclose(f);
    }
  }
  return __real_TVMArrayFree(handle);
}
