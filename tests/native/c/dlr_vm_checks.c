/*
 * DLR's C API on a Neo Relay VM folder argv[1] (the test's copy of neo-relayvm: input x
 * float32 (-1, 4), outputs features (-1, 3) and total (-1)) with the input argv[2] (raw
 * float32, batch 5) and argv[3] (batch 1), as DLR's RelayVMModel answers. Each check prints
 * one line "<label>: <value>" or "<label>: <rc> <DLRGetLastError() or ok>"; outputs are
 * written to argv[4]/<name>.bin for the test to compare. Runs under ASan + UBSan too.
 */
#include <dlr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlpack/dlpack.h"

static void report(const char* label, int rc) {
  printf("%s: %d %s\n", label, rc, rc == 0 ? "ok" : DLRGetLastError());
}

static char* slurp(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  long n;
  char* data;
  if (f == NULL) exit(3);
  fseek(f, 0, SEEK_END);
  n = ftell(f);
  fseek(f, 0, SEEK_SET);
  data = (char*)malloc((size_t)n + 1);
  if (data == NULL || fread(data, 1, (size_t)n, f) != (size_t)n) exit(3);
  fclose(f);
  *size = (size_t)n;
  return data;
}

static void dump(const char* dir, const char* name, const void* data, size_t size) {
  char path[4096];
  FILE* f;
  snprintf(path, sizeof(path), "%s/%s.bin", dir, name);
  if ((f = fopen(path, "wb")) == NULL || fwrite(data, 1, size, f) != size) exit(3);
  fclose(f);
}

static void shape_line(const char* label, const int64_t* shape, int dim, int64_t size) {
  int d;
  printf("%s: %lld (", label, (long long)size);
  for (d = 0; d < dim; ++d) printf(d ? ", %lld" : "%lld", (long long)shape[d]);
  printf(")\n");
}

static void output_shape(DLRModelHandle* h, const char* label, int index) {
  int64_t shape[8], size = 0;
  int dim = 0;
  int rc = GetDLROutputSizeDim(h, index, &size, &dim);
  if (rc == 0) rc = GetDLROutputShape(h, index, shape);
  if (rc != 0) report(label, rc);
  else shape_line(label, shape, dim, size);
}

/* the model made from memory: RELAY_EXEC's bytes, TVM_LIB's path, NEO_METADATA's text */
static void from_elements(const char* folder, const float* x1) {
  char path[4096], lib[4096];
  size_t code_size, meta_size;
  char *code, *meta;
  DLRModelHandle h = NULL;
  int64_t shape[2] = {1, 4};
  float total;
  snprintf(path, sizeof(path), "%s/code.ro", folder);
  code = slurp(path, &code_size);
  snprintf(path, sizeof(path), "%s/compiled.meta", folder);
  meta = slurp(path, &meta_size);
  meta[meta_size] = '\0';
  snprintf(lib, sizeof(lib), "%s/compiled.so", folder);
  {
    DLRModelElem elems[] = {{RELAY_EXEC, NULL, code, code_size},
                            {TVM_LIB, lib, NULL, 0},
                            {NEO_METADATA, NULL, meta, 0}};
    report("elems", CreateDLRModelFromModelElem(&h, elems, 3, 1, 0));
    report("elems set", SetDLRInput(&h, "x", shape, x1, 2));
    report("elems run", RunDLRModel(&h));
    report("elems total", GetDLROutputByName(&h, "total", &total));
    dump(folder, "elems_total", &total, sizeof(total));
    report("elems delete", DeleteDLRModel(&h));
  }
  {
    DLRModelElem elems[] = {{RELAY_EXEC, NULL, code, code_size}, {TVM_LIB, lib, NULL, 0}};
    report("elems no meta", CreateDLRModelFromModelElem(&h, elems, 2, 1, 0));
  }
  free(code);
  free(meta);
}

int main(int argc, char** argv) {
  DLRModelHandle h = NULL;
  size_t x5_size, x1_size;
  float *x5, *x1, features[15], total[5], back[20];
  int64_t shape5[2] = {5, 4}, shape1[2] = {1, 4}, in_shape[4], size;
  const char *text, *backend;
  const void* ptr;
  const DLManagedTensor* managed = NULL;
  int n, dim, index;
  bool meta;
  if (argc != 4) return 2;
  x5 = (float*)slurp(argv[2], &x5_size);
  x1 = (float*)slurp(argv[3], &x1_size);
  report("create", CreateDLRModel(&h, argv[1], 1, 0));
  GetDLRBackend(&h, &backend);
  printf("backend: %s\n", backend);
  GetDLRHasMetadata(&h, &meta);
  printf("has metadata: %d\n", (int)meta);
  GetDLRNumInputs(&h, &n);
  printf("inputs: %d\n", n);
  GetDLRNumWeights(&h, &n);
  printf("weights: %d\n", n);
  GetDLRNumOutputs(&h, &n);
  printf("outputs: %d\n", n);
  GetDLRInputName(&h, 0, &text);
  printf("input 0: %s\n", text);
  GetDLRInputType(&h, 0, &text);
  printf("input 0 type: %s\n", text);
  GetDLRInputSizeDim(&h, 0, &size, &dim);
  GetDLRInputShape(&h, 0, in_shape);
  shape_line("input 0 shape", in_shape, dim, size);
  report("input 1", GetDLRInputName(&h, 1, &text));
  report("weight 0", GetDLRWeightName(&h, 0, &text));
  GetDLROutputType(&h, 1, &text);
  printf("output 1 type: %s\n", text);
  output_shape(&h, "output 0 shape before", 0);
  output_shape(&h, "output 1 shape before", 1);
  report("output before run", GetDLROutput(&h, 0, features));
  report("output ptr before run", GetDLROutputPtr(&h, 0, &ptr));
  report("run unset", RunDLRModel(&h));
  report("get input unset", GetDLRInput(&h, "x", back));
  report("set unknown", SetDLRInput(&h, "nope", shape5, x5, 2));
  report("set negative", SetDLRInput(&h, "x", (int64_t[]){-1, 4}, x5, 2));
  report("set null", SetDLRInput(&h, "x", shape5, NULL, 2));
  report("zero copy", SetDLRInputTensorZeroCopy(&h, "x", &(DLTensor){0}));
  report("threads", SetDLRNumThreads(&h, 2));
  report("affinity", UseDLRCPUAffinity(&h, 0));
  report("set 5", SetDLRInput(&h, "x", shape5, x5, 2));
  report("get input", GetDLRInput(&h, "x", back));
  printf("input round trip: %s\n", memcmp(back, x5, sizeof(float) * 20) == 0 ? "equal" : "differ");
  report("run 5", RunDLRModel(&h));
  output_shape(&h, "output 0 shape", 0);
  output_shape(&h, "output 1 shape", 1);
  report("output 0", GetDLROutput(&h, 0, features));
  dump(argv[1], "features_5", features, sizeof(features));
  GetDLROutputIndex(&h, "total", &index);
  printf("total index: %d\n", index);
  report("output total", GetDLROutputByName(&h, "total", total));
  dump(argv[1], "total_5", total, sizeof(total));
  report("output 2", GetDLROutput(&h, 2, total));
  report("managed", GetDLROutputManagedTensorPtr(&h, 1, (const void**)&managed));
  {
    DLTensor t = {x1, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape1, NULL, 0};
    DLTensor no_data = {NULL, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape1, NULL, 0};
    DLTensor no_shape = {x1, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, NULL, NULL, 0};
    DLTensor small = {back, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape1, NULL, 0};
    report("set tensor no data", SetDLRInputTensor(&h, "x", &no_data));
    report("set tensor no shape", SetDLRInputTensor(&h, "x", &no_shape));
    report("output tensor no data", GetDLROutputTensor(&h, 0, &no_data));
    report("output tensor small", GetDLROutputTensor(&h, 0, &small));
    report("set tensor 1", SetDLRInputTensor(&h, "x", &t));
  }
  report("run 1", RunDLRModel(&h));
  output_shape(&h, "output 0 shape after 1", 0);
  report("output ptr", GetDLROutputPtr(&h, 0, &ptr));
  dump(argv[1], "features_1", ptr, sizeof(float) * 3);
  report("delete", DeleteDLRModel(&h));
  if (managed != NULL) { /* the first run's totals outlive the model */
    printf("managed after delete: %lld\n", (long long)managed->dl_tensor.shape[0]);
    dump(argv[1], "managed_total", managed->dl_tensor.data, sizeof(float) * 5);
    managed->deleter((DLManagedTensor*)managed);
  }
  from_elements(argv[1], x1);
  free(x5);
  free(x1);
  return 0;
}
