/*
 * Several application threads, each with its own graph executor made from one factory
 * module (shared library, shared kernel thread pool), run the same input many times; every
 * output must equal the first one bit for bit and the file the test compares with the
 * golden. One more thread makes mistakes meanwhile: its errors stay in its own
 * TVMGetLastError.
 *
 *   threads FACTORY.so INPUT.bin OUT.bin THREADS RUNS
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tvm/runtime/c_runtime_api.h>

static TVMModuleHandle g_lib;
static float g_input[3 * 16 * 16];
static int g_runs;

typedef struct {
  float out[10];
  int failed;
} result;

static int call(TVMModuleHandle mod, const char* name, TVMValue* args, int* codes, int n,
                TVMValue* ret) {
  TVMFunctionHandle f = NULL;
  int code, rc;
  if (TVMModGetFunction(mod, name, 1, &f) != 0 || f == NULL) return -1;
  rc = TVMFuncCall(f, args, codes, n, ret, &code);
  TVMFuncFree(f);
  return rc;
}

static void* worker(void* arg) {
  result* r = (result*)arg;
  TVMValue args[2], ret;
  int codes[2], i;
  int64_t in_shape[4] = {1, 3, 16, 16}, out_shape[2] = {1, 10};
  DLTensor *x, *y;
  TVMModuleHandle gmod;
  args[0].v_device.device_type = kDLCPU;
  args[0].v_device.device_id = 0;
  codes[0] = kDLDevice;
  if (call(g_lib, "default", args, codes, 1, &ret) != 0) {
    r->failed = 1;
    return NULL;
  }
  gmod = ret.v_handle;
  TVMArrayAlloc(in_shape, 4, kDLFloat, 32, 1, kDLCPU, 0, &x);
  TVMArrayAlloc(out_shape, 2, kDLFloat, 32, 1, kDLCPU, 0, &y);
  TVMArrayCopyFromBytes(x, g_input, sizeof(g_input));
  for (i = 0; i < g_runs && !r->failed; ++i) {
    args[0].v_str = "data";
    codes[0] = kTVMStr;
    args[1].v_handle = x;
    codes[1] = kTVMDLTensorHandle;
    r->failed |= call(gmod, "set_input", args, codes, 2, &ret) != 0;
    r->failed |= call(gmod, "run", args, codes, 0, &ret) != 0;
    args[0].v_int64 = 0;
    codes[0] = kTVMArgInt;
    args[1].v_handle = y;
    r->failed |= call(gmod, "get_output", args, codes, 2, &ret) != 0;
    if (i == 0) memcpy(r->out, y->data, sizeof(r->out));
    r->failed |= memcmp(r->out, y->data, sizeof(r->out)) != 0;
  }
  TVMArrayFree(x);
  TVMArrayFree(y);
  TVMModFree(gmod);
  return NULL;
}

static void* mistakes(void* arg) {
  int i, *failed = (int*)arg;
  for (i = 0; i < g_runs * 4; ++i) {
    TVMModuleHandle m;
    char path[64];
    char want[128];
    snprintf(path, sizeof(path), "/nonexistent/%d.so", i);
    snprintf(want, sizeof(want), "ModuleFileNotFoundError: module file '%s' does not exist", path);
    if (TVMModLoadFromFile(path, "", &m) == 0 || strcmp(TVMGetLastError(), want) != 0) {
      *failed = 1;
    }
  }
  return NULL;
}

int main(int argc, char** argv) {
  pthread_t tids[16], bad;
  result results[16];
  int n, i, status = 0, bad_failed = 0;
  FILE* f;
  if (argc != 6) return 2;
  n = atoi(argv[4]);
  g_runs = atoi(argv[5]);
  if (n < 1 || n > 16) return 2;
  f = fopen(argv[2], "rb");
  if (f == NULL || fread(g_input, 1, sizeof(g_input), f) != sizeof(g_input)) return 2;
  fclose(f);
  if (TVMModLoadFromFile(argv[1], "", &g_lib) != 0) {
    fprintf(stderr, "%s\n", TVMGetLastError());
    return 1;
  }
  memset(results, 0, sizeof(results));
  for (i = 0; i < n; ++i) pthread_create(&tids[i], NULL, worker, &results[i]);
  pthread_create(&bad, NULL, mistakes, &bad_failed);
  for (i = 0; i < n; ++i) pthread_join(tids[i], NULL);
  pthread_join(bad, NULL);
  for (i = 0; i < n; ++i) {
    if (results[i].failed || memcmp(results[i].out, results[0].out, sizeof(results[0].out))) {
      fprintf(stderr, "thread %d disagrees or failed\n", i);
      status = 1;
    }
  }
  if (bad_failed) {
    fprintf(stderr, "an error message crossed threads\n");
    status = 1;
  }
  f = fopen(argv[3], "wb");
  if (f == NULL || fwrite(results[0].out, 4, 10, f) != 10) return 1;
  fclose(f);
  TVMModFree(g_lib);
  printf(status ? "FAILED\n" : "ok\n");
  return status;
}
