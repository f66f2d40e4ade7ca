/*
 * Times vm["main"](inputs...) of a Relax executable under TVM 0.27's own runtime, through
 * tvm-ffi's C API (TVM 0.21+ has no TVMFuncCall): ffi.ModuleLoadFromFile ->
 * vm_load_executable -> vm_initialization(cpu, pooled) -> get "main" -> TVMFFIFunctionCall
 * with Tensor objects. Built by bench/relax.py against the apache-tvm wheel's
 * libtvm_runtime and apache-tvm-ffi's libtvm_ffi. See relax_invoke.h.
 */
#include <tvm/ffi/c_api.h>

#include "relax_invoke.h"

static void check(int rc, const char* what) {
  if (rc == 0) return;
  TVMFFIObjectHandle err = NULL;
  TVMFFIErrorMoveFromRaised(&err);
  if (err) {
    /* the error cell follows the object header, as tvm-ffi's bindings read it */
    const TVMFFIErrorCell* cell = (const TVMFFIErrorCell*)((char*)err + sizeof(TVMFFIObject));
    fprintf(stderr, "%s: %.*s: %.*s\n", what, (int)cell->kind.size, cell->kind.data,
            (int)cell->message.size, cell->message.data);
  }
  bench_die(what, "failed");
}

static TVMFFIAny none(void) {
  TVMFFIAny v;
  memset(&v, 0, sizeof(v));
  v.type_index = kTVMFFINone;
  return v;
}

static TVMFFIAny str_arg(const char* s) {
  TVMFFIAny v = none();
  v.type_index = kTVMFFIRawStr;
  v.v_c_str = s;
  return v;
}

static TVMFFIAny int_arg(int64_t x) {
  TVMFFIAny v = none();
  v.type_index = kTVMFFIInt;
  v.v_int64 = x;
  return v;
}

static TVMFFIAny obj_arg(TVMFFIObjectHandle h) {
  TVMFFIAny v = none();
  v.type_index = ((TVMFFIObject*)h)->type_index;
  v.v_obj = (TVMFFIObject*)h;
  return v;
}

static void release(TVMFFIAny* v) {
  if (v->type_index >= kTVMFFIStaticObjectBegin) TVMFFIObjectDecRef(v->v_obj);
  *v = none();
}

static TVMFFIObjectHandle call_global(const char* name, TVMFFIAny* args, int n) {
  TVMFFIByteArray key = {name, strlen(name)};
  TVMFFIObjectHandle f = NULL;
  check(TVMFFIFunctionGetGlobal(&key, &f), name);
  if (!f) bench_die("no global function", name);
  TVMFFIAny ret = none();
  check(TVMFFIFunctionCall(f, args, n, &ret), name);
  TVMFFIObjectDecRef(f);
  return ret.v_obj;
}

static TVMFFIObjectHandle get_function(TVMFFIObjectHandle mod, const char* name) {
  TVMFFIAny args[3] = {obj_arg(mod), str_arg(name), int_arg(0)};
  args[2].type_index = kTVMFFIBool;
  TVMFFIObjectHandle f = call_global("ffi.ModuleGetFunction", args, 3);
  if (!f) bench_die("no module function", name);
  return f;
}

static void free_managed(DLManagedTensor* self) {
  free(self->dl_tensor.data);
  free(self->dl_tensor.shape);
  free(self);
}

static TVMFFIObjectHandle make_tensor(const BenchInput* in) {
  DLManagedTensor* m = calloc(1, sizeof(*m));
  int64_t* shape = malloc(sizeof(int64_t) * (size_t)(in->ndim > 0 ? in->ndim : 1));
  size_t bytes = (size_t)in->count * sizeof(float);
  void* data = aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
  if (!m || !shape || !data) bench_die("out of memory", NULL);
  memcpy(shape, in->shape, sizeof(int64_t) * (size_t)in->ndim);
  memcpy(data, in->data, bytes);
  m->dl_tensor.data = data;
  m->dl_tensor.device.device_type = kDLCPU;
  m->dl_tensor.ndim = in->ndim;
  m->dl_tensor.dtype.code = kDLFloat;
  m->dl_tensor.dtype.bits = 32;
  m->dl_tensor.dtype.lanes = 1;
  m->dl_tensor.shape = shape;
  m->deleter = free_managed;
  TVMFFIObjectHandle out = NULL;
  check(TVMFFITensorFromDLPack(m, 64, 1, &out), "TVMFFITensorFromDLPack");
  return out;
}

int main(int argc, char** argv) {
  if (argc < 4 || argc - 4 > BENCH_MAX_INPUTS) bench_die("usage", "model.so REPEAT BATCHES in...");
  int repeat = atoi(argv[2]), batches = atoi(argv[3]), nin = argc - 4;
  TVMFFIAny a[BENCH_MAX_INPUTS], ret = none();
  a[0] = str_arg(argv[1]);
  TVMFFIObjectHandle lib = call_global("ffi.ModuleLoadFromFile", a, 1);
  TVMFFIObjectHandle load = get_function(lib, "vm_load_executable");
  check(TVMFFIFunctionCall(load, a, 0, &ret), "vm_load_executable");
  TVMFFIObjectHandle vm = ret.v_obj;
  TVMFFIObjectHandle init = get_function(vm, "vm_initialization");
  a[0] = int_arg(kDLCPU), a[1] = int_arg(0), a[2] = int_arg(2); /* kPooled */
  ret = none();
  check(TVMFFIFunctionCall(init, a, 3, &ret), "vm_initialization");
  release(&ret);
  TVMFFIObjectHandle main_fn = get_function(vm, "main");

  TVMFFIObjectHandle tensors[BENCH_MAX_INPUTS];
  for (int i = 0; i < nin; ++i) {
    BenchInput in;
    bench_read_input(argv[4 + i], &in);
    tensors[i] = make_tensor(&in);
    free(in.data);
    a[i] = obj_arg(tensors[i]);
  }
  double* times = malloc(sizeof(double) * (size_t)batches);
  for (int w = 0; w < repeat / 10 + 1; ++w) { /* warm-up: the pools fill, pages fault in */
    check(TVMFFIFunctionCall(main_fn, a, nin, &ret), "main");
    release(&ret);
  }
  for (int b = 0; b < batches; ++b) {
    double t0 = bench_now_us();
    for (int r = 0; r < repeat; ++r) {
      check(TVMFFIFunctionCall(main_fn, a, nin, &ret), "main");
      release(&ret);
    }
    times[b] = (bench_now_us() - t0) / repeat;
  }
  check(TVMFFIFunctionCall(main_fn, a, nin, &ret), "main");
  double sum = 0;
  if (ret.type_index == kTVMFFITensor) {
    const DLTensor* out = (const DLTensor*)((char*)ret.v_obj + sizeof(TVMFFIObject));
    int64_t count = 1;
    for (int d = 0; d < out->ndim; ++d) count *= out->shape[d];
    sum = bench_checksum((const float*)((const char*)out->data + out->byte_offset), count);
  }
  release(&ret);
  printf("per_invoke_us %.4f\nchecksum %.9g\n", bench_median(times, batches), sum);
  for (int i = 0; i < nin; ++i) TVMFFIObjectDecRef(tensors[i]);
  TVMFFIObjectDecRef(main_fn);
  TVMFFIObjectDecRef(init);
  TVMFFIObjectDecRef(vm);
  TVMFFIObjectDecRef(load);
  TVMFFIObjectDecRef(lib);
  free(times);
  return 0;
}
