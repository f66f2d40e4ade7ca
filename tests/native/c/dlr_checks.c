/*
 * DLR's C API misused on purpose, against the Neo folder argv[1] (the test's copy of
 * neo-cpu: inputs data float32 (1, 3, 8, 8) and mask int32 (1, 10)). Each check prints one
 * line "<label>: <rc> <DLRGetLastError() or ok>"; the test compares the lines. Runs under
 * ASan + UBSan too: every refusal must be an error, never a crash or a leak.
 */
#include <dlr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlpack/dlpack.h"

/* the pool size libdlr.so exports (tvmrt's; DLR has no getter) */
int tvmrt_get_num_threads(void);

static void report(const char* label, int rc) {
  printf("%s: %d %s\n", label, rc, rc == 0 ? "ok" : DLRGetLastError());
}

static char* slurp(const char* folder, const char* name, size_t* size) {
  char path[4096];
  FILE* f;
  long n;
  char* data;
  snprintf(path, sizeof(path), "%s/%s", folder, name);
  if ((f = fopen(path, "rb")) == NULL) return NULL;
  fseek(f, 0, SEEK_END);
  n = ftell(f);
  fseek(f, 0, SEEK_SET);
  data = (char*)malloc((size_t)n + 1);
  if (data == NULL || fread(data, 1, (size_t)n, f) != (size_t)n) exit(3);
  data[n] = '\0';
  fclose(f);
  *size = (size_t)n;
  return data;
}

static void from_elements(const char* folder) {
  size_t graph_size, params_size, meta_size;
  char* graph = slurp(folder, "compiled_model.json", &graph_size);
  char* params = slurp(folder, "compiled.params", &params_size);
  char* meta = slurp(folder, "compiled.meta", &meta_size);
  char lib[4096];
  DLRModelHandle h = NULL;
  int64_t size;
  int dim;
  const char* name = "";
  snprintf(lib, sizeof(lib), "%s/compiled.so", folder);
  {
    DLRModelElem elems[] = {{TVM_GRAPH, NULL, graph, 0},
                            {TVM_PARAMS, NULL, params, params_size},
                            {TVM_LIB, lib, NULL, 0},
                            {NEO_METADATA, NULL, meta, 0}};
    report("elems", CreateDLRModelFromModelElem(&h, elems, 4, 1, 0));
    report("elems output name", GetDLROutputName(&h, 1, &name));
    printf("elems name 1: %s\n", name);
    report("elems run", RunDLRModel(&h));
    report("elems size", GetDLROutputSizeDim(&h, 0, &size, &dim));
    printf("elems output 0: %lld %d\n", (long long)size, dim);
    report("elems delete", DeleteDLRModel(&h));
  }
  {
    char meta_path[4096];
    snprintf(meta_path, sizeof(meta_path), "%s/compiled.meta", folder);
    {
      DLRModelElem elems[] = {{NEO_METADATA, meta_path, NULL, 0},
                              {TVM_GRAPH, NULL, graph, 0},
                              {TVM_PARAMS, NULL, params, params_size},
                              {TVM_LIB, lib, NULL, 0},
                              {NEO_METADATA, meta_path, NULL, 0}};
      report("elems twice", CreateDLRModelFromModelElem(&h, elems, 5, 1, 0));
      report("elems twice delete", DeleteDLRModel(&h));
    }
  }
  {
    DLRModelElem elems[] = {{TVM_GRAPH, NULL, graph, 0}, {RELAY_EXEC, NULL, params, 1}};
    report("elems relay", CreateDLRModelFromModelElem(&h, elems, 2, 1, 0));
  }
  {
    DLRModelElem elems[] = {{TVM_GRAPH, NULL, graph, 0}, {(DLRModelElemType)42, NULL, NULL, 0}};
    report("elems type", CreateDLRModelFromModelElem(&h, elems, 2, 1, 0));
  }
  {
    DLRModelElem elems[] = {{TVM_GRAPH, NULL, graph, 0}, {TVM_LIB, lib, NULL, 0}};
    report("elems missing", CreateDLRModelFromModelElem(&h, elems, 2, 1, 0));
  }
  {
    DLRModelElem elems[] = {{TVM_GRAPH, NULL, graph, 0},
                            {TVM_PARAMS, NULL, params, params_size / 2},
                            {TVM_LIB, lib, NULL, 0}};
    report("elems short params", CreateDLRModelFromModelElem(&h, elems, 3, 1, 0));
  }
  free(graph);
  free(params);
  free(meta);
}

int main(int argc, char** argv) {
  DLRModelHandle h = NULL, copy;
  const char *name = "", *type = "";
  float data[192], back[192];
  int32_t ints[192];
  int64_t shape[4] = {1, 3, 8, 8}, flat[2] = {1, 192}, mask[2] = {1, 10}, wrong[1] = {5},
          neg[2] = {-1, -192};
  int index = -1, i;
  const void* managed = NULL;
  DLTensor t;
  if (argc != 2 && argc != 3) return 2;
  for (i = 0; i < 192; ++i) data[i] = (float)i * 0.25f - 3.0f;
  memset(ints, 0, sizeof(ints));
  report("null handle", CreateDLRModel(NULL, argv[1], 1, 0));
  report("null path", CreateDLRModel(&h, NULL, 1, 0));
  report("no model", RunDLRModel(&h));
  report("create", CreateDLRModel(&h, argv[1], 1, 0));
  report("count", SetDLRInput(&h, "data", wrong, data, 1));
  report("negative", SetDLRInput(&h, "data", neg, data, 2));
  report("dim", SetDLRInput(&h, "data", shape, data, 33));
  report("unknown", SetDLRInput(&h, "nope", shape, data, 4));
  report("null input", SetDLRInput(&h, "data", shape, NULL, 4));
  report("flat", SetDLRInput(&h, "data", flat, data, 2));
  report("get input", GetDLRInput(&h, "data", back));
  printf("round trip: %s\n", memcmp(data, back, sizeof(data)) == 0 ? "equal" : "differs");
  report("input name", GetDLRInputName(&h, 2, &name));
  report("input name -1", GetDLRInputName(&h, -1, &name));
  report("input type", GetDLRInputType(&h, 1, &type));
  printf("input 1 type: %s\n", type);
  report("weight name", GetDLRWeightName(&h, 2, &name));
  report("output", GetDLROutput(&h, 5, back));
  report("output shape", GetDLROutputShape(&h, -1, flat));
  memset(&t, 0, sizeof(t));
  t.data = ints;
  t.device.device_type = kDLCPU;
  t.ndim = 4;
  t.shape = shape;
  t.dtype.code = kDLInt;
  t.dtype.bits = 32;
  t.dtype.lanes = 1;
  report("tensor dtype", SetDLRInputTensor(&h, "data", &t));
  t.data = data;
  t.dtype.code = kDLFloat;
  t.ndim = 2;
  t.shape = flat;
  report("tensor flat", SetDLRInputTensor(&h, "data", &t));
  t.device.device_type = kDLCUDA;
  t.ndim = 4;
  t.shape = shape;
  report("tensor device", SetDLRInputTensor(&h, "data", &t));
  report("mask count", SetDLRInput(&h, "mask", flat, ints, 1));
  report("mask", SetDLRInput(&h, "mask", mask, ints, 2));
  report("run", RunDLRModel(&h));
  {
    /* the same input bound without a copy (64-byte aligned, the input's shape): same output */
    float before[10], after[10];
    float* bound = (float*)aligned_alloc(64, sizeof(data));
    if (bound == NULL) return 3;
    memcpy(bound, data, sizeof(data));
    report("output copy", GetDLROutput(&h, 0, before));
    memset(data, 0, sizeof(data));
    report("flat again", SetDLRInput(&h, "data", flat, data, 2));
    t.data = bound;
    t.device.device_type = kDLCPU;
    report("zero copy", SetDLRInputTensorZeroCopy(&h, "data", &t));
    report("run zero copy", RunDLRModel(&h));
    report("output zero copy", GetDLROutput(&h, 0, after));
    printf("zero copy output: %s\n",
           memcmp(before, after, sizeof(after)) == 0 ? "equal" : "differs");
    t.data = (char*)bound + 4;
    report("zero copy unaligned", SetDLRInputTensorZeroCopy(&h, "data", &t));
    report("zero copy unknown", SetDLRInputTensorZeroCopy(&h, "nope", &t));
    report("delete zero copy", DeleteDLRModel(&h));
    free(bound);
    report("create again", CreateDLRModel(&h, argv[1], 1, 0));
    report("mask again", SetDLRInput(&h, "mask", mask, ints, 2));
    report("data again", SetDLRInput(&h, "data", shape, data, 4));
    report("run again", RunDLRModel(&h));
  }
  report("index", GetDLROutputIndex(&h, "class_id", &index));
  printf("class_id index: %d\n", index);
  report("index nope", GetDLROutputIndex(&h, "nope", &index));
  report("managed", GetDLROutputManagedTensorPtr(&h, 0, &managed));
  report("affinity 0", UseDLRCPUAffinity(&h, 0));
  report("affinity 1", UseDLRCPUAffinity(&h, 1));
  report("threads", SetDLRNumThreads(&h, 3));
  printf("pool threads: %d\n", tvmrt_get_num_threads());
  report("threads 0", SetDLRNumThreads(&h, 0));
  printf("pool threads after 0: %d\n", tvmrt_get_num_threads());
  report("threads 2", SetDLRNumThreads(&h, 2));
  report("malloc", SetDLRCustomAllocatorMalloc(malloc));
  report("pipeline", CreateDLRPipeline(&copy, 2, NULL, 1, 0));
  printf("device type: %d\n", GetDLRDeviceType(argv[1]));
  copy = h;
  report("delete", DeleteDLRModel(&h));
  report("delete again", DeleteDLRModel(&h));
  report("use after delete", RunDLRModel(&copy));
  {
    /* the managed tensor outlives the model: its memory stays readable until the deleter */
    DLManagedTensor* m = (DLManagedTensor*)managed;
    float first = ((const float*)m->dl_tensor.data)[0];
    printf("managed after delete: %d %s\n", m->dl_tensor.ndim, first >= 0.0f ? "read" : "bad");
    m->deleter(m);
  }
  from_elements(argv[1]);
  if (argc == 3) { /* a folder whose compiled.meta does not parse: DLR ignores it */
    bool has = true;
    report("bad meta", CreateDLRModel(&h, argv[2], 1, 0));
    report("bad meta has", GetDLRHasMetadata(&h, &has));
    printf("bad meta has metadata: %d\n", (int)has);
    report("bad meta name", GetDLROutputName(&h, 0, &name));
    report("bad meta device", GetDLRDeviceType(argv[2]) == -1 ? -1 : 0);
    report("bad meta delete", DeleteDLRModel(&h));
  }
  return 0;
}
