/*
 * Times vm["main"](inputs...) of a Relax executable through TVM's C API (tvmrt's
 * libtvmrt_runtime): TVMModLoadFromFile -> vm_load_executable -> vm_initialization(cpu,
 * pooled) -> get "main" -> TVMFuncCall with NDArray handles. See relax_invoke.h.
 */
#include <tvm/runtime/c_runtime_api.h>

#include "relax_invoke.h"

#define CHECK(call)                                                                                \
  if ((call) != 0) bench_die(#call, TVMGetLastError())

int main(int argc, char** argv) {
  if (argc < 4 || argc - 4 > BENCH_MAX_INPUTS) bench_die("usage", "model.so REPEAT BATCHES in...");
  int repeat = atoi(argv[2]), batches = atoi(argv[3]), nin = argc - 4;
  TVMModuleHandle lib, exec, vm;
  TVMFunctionHandle load, init, main_fn;
  TVMValue args[BENCH_MAX_INPUTS], ret;
  int codes[BENCH_MAX_INPUTS], code;
  CHECK(TVMModLoadFromFile(argv[1], "", &lib));
  CHECK(TVMModGetFunction(lib, "vm_load_executable", 0, &load));
  CHECK(TVMFuncCall(load, args, codes, 0, &ret, &code));
  exec = ret.v_handle;
  CHECK(TVMModGetFunction(exec, "vm_initialization", 0, &init));
  args[0].v_int64 = kDLCPU, args[1].v_int64 = 0, args[2].v_int64 = 2; /* kPooled */
  codes[0] = codes[1] = codes[2] = kTVMArgInt;
  CHECK(TVMFuncCall(init, args, codes, 3, &ret, &code));
  CHECK(TVMModGetFunction(exec, "main", 0, &main_fn));
  vm = exec;
  (void)vm;

  TVMArrayHandle arrays[BENCH_MAX_INPUTS];
  for (int i = 0; i < nin; ++i) {
    BenchInput in;
    bench_read_input(argv[4 + i], &in);
    CHECK(TVMArrayAlloc(in.shape, in.ndim, kDLFloat, 32, 1, kDLCPU, 0, &arrays[i]));
    CHECK(TVMArrayCopyFromBytes(arrays[i], in.data, (size_t)in.count * sizeof(float)));
    free(in.data);
    args[i].v_handle = arrays[i];
    codes[i] = kTVMNDArrayHandle;
  }
  double* times = malloc(sizeof(double) * (size_t)batches);
  for (int w = 0; w < repeat / 10 + 1; ++w) { /* warm-up: the pools fill, pages fault in */
    CHECK(TVMFuncCall(main_fn, args, codes, nin, &ret, &code));
    if (code == kTVMNDArrayHandle) TVMArrayFree(ret.v_handle);
    else if (code == kTVMObjectHandle) TVMObjectFree(ret.v_handle);
  }
  for (int b = 0; b < batches; ++b) {
    double t0 = bench_now_us();
    for (int r = 0; r < repeat; ++r) {
      CHECK(TVMFuncCall(main_fn, args, codes, nin, &ret, &code));
      if (code == kTVMNDArrayHandle) TVMArrayFree(ret.v_handle);
      else if (code == kTVMObjectHandle) TVMObjectFree(ret.v_handle);
    }
    times[b] = (bench_now_us() - t0) / repeat;
  }
  CHECK(TVMFuncCall(main_fn, args, codes, nin, &ret, &code));
  double sum = 0;
  if (code == kTVMNDArrayHandle) {
    DLTensor* out = ret.v_handle;
    int64_t count = 1;
    for (int d = 0; d < out->ndim; ++d) count *= out->shape[d];
    sum = bench_checksum((const float*)((char*)out->data + out->byte_offset), count);
    TVMArrayFree(ret.v_handle);
  } else if (code == kTVMObjectHandle) {
    TVMObjectFree(ret.v_handle);
  }
  printf("per_invoke_us %.4f\nchecksum %.9g\n", bench_median(times, batches), sum);
  for (int i = 0; i < nin; ++i) TVMArrayFree(arrays[i]);
  TVMFuncFree(main_fn);
  TVMFuncFree(init);
  TVMFuncFree(load);
  TVMModFree(exec);
  TVMModFree(lib);
  free(times);
  return 0;
}
