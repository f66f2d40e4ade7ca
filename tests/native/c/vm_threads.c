/*
 * The Relay VM from several threads: one executable (vm.so of a model with one float32 input
 * of shape (batch, FEATURES)) shared by THREADS VirtualMachines, each thread running its own
 * batch size ROUNDS times; every output must equal, byte for byte, what a single thread
 * computed first. Then two threads call one shared VM at once: every call either runs (and
 * gives the same bytes) or fails with the VM's "already running in another thread" error.
 *
 *   vm_threads VM_SO FEATURES THREADS ROUNDS
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tvm/runtime/c_runtime_api.h>
#include "check.h"

#define MAX_THREADS 16

static TVMModuleHandle g_exe;
static int g_features, g_rounds;

typedef struct {
  TVMModuleHandle vm; /* NULL: make one from g_exe */
  int batch;
  char* want; /* the single-thread output, NULL: record it */
  size_t want_bytes;
  int ran, busy; /* shared-VM mode: calls that ran, calls refused as busy */
} job;

static void call(TVMModuleHandle mod, const char* name, TVMValue* a, int* c, int n, TVMValue* r,
                 int* rc) {
  TVMFunctionHandle f = NULL;
  CHECK(TVMModGetFunction(mod, name, 0, &f));
  CHECK(f == NULL ? -1 : TVMFuncCall(f, a, c, n, r, rc));
  CHECK(TVMFuncFree(f));
}

static TVMModuleHandle new_vm(void) {
  TVMValue a[3], r;
  int c[3] = {kDLInt, kDLInt, kDLInt}, rc;
  TVMModuleHandle vm;
  call(g_exe, "vm_load_executable", a, c, 0, &r, &rc);
  vm = r.v_handle;
  a[0].v_int64 = kDLCPU, a[1].v_int64 = 0, a[2].v_int64 = 2;
  call(vm, "init", a, c, 3, &r, &rc);
  return vm;
}

static void* worker(void* arg) {
  job* j = (job*)arg;
  int shared = j->vm != NULL, k;
  TVMModuleHandle vm = shared ? j->vm : new_vm();
  int64_t shape[2] = {j->batch, g_features};
  TVMArrayHandle x;
  TVMValue a[2], r;
  int c[2] = {kTVMStr, kTVMNDArrayHandle}, rc;
  TVMFunctionHandle invoke = NULL;
  CHECK(TVMArrayAlloc(shape, 2, kDLFloat, 32, 1, kDLCPU, 0, &x));
  for (k = 0; k < j->batch * g_features; ++k) ((float*)x->data)[k] = (float)((k * 37) % 11) - 5.f;
  CHECK(TVMModGetFunction(vm, "invoke", 0, &invoke));
  a[0].v_str = "main";
  a[1].v_handle = x;
  if (!shared) call(vm, "set_input", a, c, 2, &r, &rc);
  for (k = 0; k < g_rounds; ++k) {
    DLTensor* y;
    size_t n;
    int i;
    if (TVMFuncCall(invoke, a, c, 1, &r, &rc) != 0) {
      if (shared && strstr(TVMGetLastError(), "already running in another thread") != NULL) {
        ++j->busy;
        continue;
      }
      fprintf(stderr, "invoke failed: %s\n", TVMGetLastError());
      exit(1);
    }
    y = (DLTensor*)r.v_handle;
    n = 4;
    for (i = 0; i < y->ndim; ++i) n *= (size_t)y->shape[i];
    if (j->want == NULL) {
      j->want = (char*)malloc(n);
      memcpy(j->want, y->data, n);
      j->want_bytes = n;
    } else if (n != j->want_bytes || memcmp(y->data, j->want, n) != 0) {
      fprintf(stderr, "batch %d: round %d differs from the single-thread output\n", j->batch, k);
      exit(1);
    }
    ++j->ran;
    CHECK(TVMArrayFree((TVMArrayHandle)y));
  }
  CHECK(TVMFuncFree(invoke));
  CHECK(TVMArrayFree(x));
  if (!shared) CHECK(TVMModFree(vm));
  return NULL;
}

int main(int argc, char** argv) {
  job jobs[MAX_THREADS];
  pthread_t tids[MAX_THREADS];
  int threads, i, busy = 0;
  TVMModuleHandle shared;
  TVMValue a[2], r;
  int c[2] = {kTVMStr, kTVMNDArrayHandle}, rc;
  if (argc != 5) return 2;
  CHECK(TVMModLoadFromFile(argv[1], "", &g_exe));
  g_features = atoi(argv[2]);
  threads = atoi(argv[3]);
  g_rounds = atoi(argv[4]);
  if (threads < 2 || threads > MAX_THREADS || g_rounds < 1) return 2;
  memset(jobs, 0, sizeof(jobs));
  for (i = 0; i < threads; ++i) { /* the single-thread answers first */
    int save = g_rounds;
    jobs[i].batch = 1 + 7 * i;
    g_rounds = 1;
    worker(&jobs[i]);
    g_rounds = save;
  }
  for (i = 0; i < threads; ++i) CHECK(pthread_create(&tids[i], NULL, worker, &jobs[i]));
  for (i = 0; i < threads; ++i) CHECK(pthread_join(tids[i], NULL));
  /* one VM, two threads at once: each call runs or is refused as busy */
  shared = new_vm();
  {
    int64_t shape[2] = {jobs[0].batch, g_features};
    TVMArrayHandle x;
    int k;
    CHECK(TVMArrayAlloc(shape, 2, kDLFloat, 32, 1, kDLCPU, 0, &x));
    for (k = 0; k < jobs[0].batch * g_features; ++k)
      ((float*)x->data)[k] = (float)((k * 37) % 11) - 5.f;
    a[0].v_str = "main";
    a[1].v_handle = x;
    call(shared, "set_input", a, c, 2, &r, &rc);
    CHECK(TVMArrayFree(x));
  }
  for (i = 0; i < 2; ++i) {
    jobs[i].vm = shared;
    jobs[i].ran = 0;
    jobs[i].batch = jobs[0].batch;
  }
  free(jobs[1].want);
  jobs[1].want = (char*)malloc(jobs[0].want_bytes);
  memcpy(jobs[1].want, jobs[0].want, jobs[0].want_bytes);
  jobs[1].want_bytes = jobs[0].want_bytes;
  for (i = 0; i < 2; ++i) CHECK(pthread_create(&tids[i], NULL, worker, &jobs[i]));
  for (i = 0; i < 2; ++i) CHECK(pthread_join(tids[i], NULL));
  for (i = 0; i < 2; ++i) busy += jobs[i].busy;
  if (jobs[0].ran + jobs[1].ran + busy != 2 * g_rounds || jobs[0].ran + jobs[1].ran == 0) return 3;
  CHECK(TVMModFree(shared));
  for (i = 0; i < threads; ++i) free(jobs[i].want);
  CHECK(TVMModFree(g_exe));
  printf("ok: %d threads x %d rounds; shared VM: %d ran, %d refused as busy\n", threads, g_rounds,
         jobs[0].ran + jobs[1].ran, busy);
  return 0;
}
