/*
 * The program side of the bundle (tests/native/cxx/bundle.cc), as TVM's
 * apps/bundle_deploy/demo.cc is: dlopen the bundle and call its five functions.
 *
 *   bundle_driver BUNDLE.so GRAPH.json PARAMS.bin DATA.bin OUT.bin
 *
 * DATA.bin: a float32 (1, 3, 8, 8) input "data"; OUT.bin receives the (1, 4) output.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <dlpack/dlpack.h>

static char* read_all(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  char* buf = NULL;
  long n;
  if (f != NULL && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 &&
      fseek(f, 0, SEEK_SET) == 0) {
    buf = (char*)malloc((size_t)n + 1);
    if (buf != NULL && fread(buf, 1, (size_t)n, f) == (size_t)n) {
      buf[n] = '\0';
      *size = (size_t)n;
    } else {
      free(buf);
      buf = NULL;
    }
  }
  if (f != NULL) fclose(f);
  if (buf == NULL) {
    fprintf(stderr, "cannot read %s\n", path);
    exit(1);
  }
  return buf;
}

static void* need(void* bundle, const char* name) {
  void* f = dlsym(bundle, name);
  if (f == NULL) {
    fprintf(stderr, "the bundle has no %s\n", name);
    exit(1);
  }
  return f;
}

int main(int argc, char** argv) {
  void* bundle;
  void* handle;
  size_t json_size, params_size, data_size;
  char *json, *params, *data;
  float out[4];
  int64_t in_shape[4] = {1, 3, 8, 8}, out_shape[2] = {1, 4};
  DLTensor input = {0}, output = {0};
  FILE* f;
  void* (*create)(const char*, const char*, uint64_t);
  void (*set_input)(void*, const char*, void*);
  void (*run)(void*);
  void (*get_output)(void*, int, void*);
  void (*destroy)(void*);
  if (argc != 6) {
    fprintf(stderr, "usage: %s BUNDLE.so GRAPH.json PARAMS.bin DATA.bin OUT.bin\n", argv[0]);
    return 2;
  }
  bundle = dlopen(argv[1], RTLD_LAZY | RTLD_LOCAL);
  if (bundle == NULL) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  *(void**)&create = need(bundle, "tvm_runtime_create");
  *(void**)&set_input = need(bundle, "tvm_runtime_set_input");
  *(void**)&run = need(bundle, "tvm_runtime_run");
  *(void**)&get_output = need(bundle, "tvm_runtime_get_output");
  *(void**)&destroy = need(bundle, "tvm_runtime_destroy");
  json = read_all(argv[2], &json_size);
  params = read_all(argv[3], &params_size);
  data = read_all(argv[4], &data_size);
  if (data_size != 1 * 3 * 8 * 8 * sizeof(float)) {
    fprintf(stderr, "%s: expected %zu bytes\n", argv[4], 1 * 3 * 8 * 8 * sizeof(float));
    return 1;
  }
  handle = create(json, params, params_size);
  input.data = data;
  input.device.device_type = kDLCPU;
  input.ndim = 4;
  input.dtype.code = kDLFloat;
  input.dtype.bits = 32;
  input.dtype.lanes = 1;
  input.shape = in_shape;
  set_input(handle, "data", &input);
  run(handle);
  output = input;
  output.data = out;
  output.ndim = 2;
  output.shape = out_shape;
  get_output(handle, 0, &output);
  destroy(handle);
  f = fopen(argv[5], "wb");
  if (f == NULL || fwrite(out, sizeof(float), 4, f) != 4) return 1;
  fclose(f);
  printf("output 0: %g %g %g %g\n", out[0], out[1], out[2], out[3]);
  free(json);
  free(params);
  free(data);
  return 0;
}
