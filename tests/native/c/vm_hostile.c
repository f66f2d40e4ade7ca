/*
 * Relay VMs misused from C, for tests/native/test_c_vm_hostile.py (code.ro files written there):
 *
 *   vm_hostile busy CODE_RO LIB_SO
 *       one VM: thread A invokes main (a loop reading a constant until the step budget),
 *       thread B calls init and set_input all the while (A tries again while B's call holds the
 *       VM). B's calls while A's invoke runs must be refused as busy ("busy refused: ERROR",
 *       exit 0); exit 4 if none was refused.
 *   vm_hostile cross A_RO B_RO LIB_SO
 *       A's main returns a tuple holding a closure of A; B's main(p) calls p's field 0.
 *       B's set_input(main, A's tuple) must be refused ("cross refused: ERROR", exit 0);
 *       exit 4 if B ran it.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tvm/runtime/c_runtime_api.h>
#include "model_io.h"

static TVMModuleHandle load_vm(const char* code_ro, const char* lib_so) {
  TVMModuleHandle lib, exe, vm;
  TVMValue a[3], r;
  int c[3], rc;
  CHECK(TVMModLoadFromFile(lib_so, "", &lib));
  exe = load_executable(code_ro, lib);
  CHECK(TVMModFree(lib));
  call_named(exe, "vm_load_executable", a, c, 0, &r, &rc);
  vm = r.v_handle;
  CHECK(TVMModFree(exe));
  a[0].v_int64 = kDLCPU, a[1].v_int64 = 0, a[2].v_int64 = 2;
  c[0] = c[1] = c[2] = kDLInt;
  call_named(vm, "init", a, c, 3, &r, &rc);
  return vm;
}

static TVMModuleHandle g_vm;
static int g_started, g_done;
static char g_invoke_error[1024];

static void* invoker(void* arg) {
  TVMFunctionHandle invoke = get(g_vm, "invoke");
  TVMValue a, r;
  int c = kTVMStr, rc;
  a.v_str = "main";
  __atomic_store_n(&g_started, 1, __ATOMIC_RELEASE);
  while (TVMFuncCall(invoke, &a, &c, 1, &r, &rc) != 0) { /* B's call may hold the VM first */
    snprintf(g_invoke_error, sizeof(g_invoke_error), "%s", TVMGetLastError());
    if (strstr(g_invoke_error, "already running in another thread") == NULL) break;
  }
  __atomic_store_n(&g_done, 1, __ATOMIC_RELEASE);
  CHECK(TVMFuncFree(invoke));
  return arg;
}

static int busy(const char* code_ro, const char* lib_so) {
  pthread_t t;
  TVMFunctionHandle init, set_input;
  TVMValue a[3], r;
  int c[3] = {kDLInt, kDLInt, kDLInt}, rc, ran = 0, refused = 0;
  char first[1024] = "";
  g_vm = load_vm(code_ro, lib_so);
  init = get(g_vm, "init");
  set_input = get(g_vm, "set_input");
  if (pthread_create(&t, NULL, invoker, NULL) != 0) return 1;
  while (!__atomic_load_n(&g_started, __ATOMIC_ACQUIRE)) {
  }
  while (!__atomic_load_n(&g_done, __ATOMIC_ACQUIRE)) {
    TVMValue s;
    int sc = kTVMStr;
    a[0].v_int64 = kDLCPU, a[1].v_int64 = 0, a[2].v_int64 = 2;
    s.v_str = "main";
    if (TVMFuncCall(init, a, c, 3, &r, &rc) != 0) { /* init is the call that frees state */
      if (strstr(TVMGetLastError(), "already running in another thread") == NULL) {
        fprintf(stderr, "init failed otherwise: %s\n", TVMGetLastError());
        return 1;
      }
      if (refused++ == 0) snprintf(first, sizeof(first), "%s", TVMGetLastError());
    } else {
      ++ran;
    }
    if (TVMFuncCall(set_input, &s, &sc, 1, &r, &rc) != 0 &&
        strstr(TVMGetLastError(), "already running in another thread") == NULL) {
      fprintf(stderr, "set_input failed otherwise: %s\n", TVMGetLastError());
      return 1;
    }
  }
  pthread_join(t, NULL);
  printf("invoke: %s\n", g_invoke_error[0] ? g_invoke_error : "ran");
  CHECK(TVMFuncFree(init));
  CHECK(TVMFuncFree(set_input));
  CHECK(TVMModFree(g_vm));
  if (refused == 0) {
    fprintf(stderr, "init ran %d times while invoke ran, never refused\n", ran);
    return 4;
  }
  printf("busy refused: %s\n", first);
  return 0;
}

static int cross(const char* a_ro, const char* b_ro, const char* lib_so) {
  TVMModuleHandle a = load_vm(a_ro, lib_so), b = load_vm(b_ro, lib_so);
  TVMValue v[2], r;
  int c[2] = {kTVMStr, kTVMObjectHandle}, rc;
  TVMFunctionHandle set_input;
  void* tuple;
  v[0].v_str = "main";
  call_named(a, "invoke", v, c, 1, &r, &rc);
  if (rc != kTVMObjectHandle) return 1;
  tuple = r.v_handle;
  v[1].v_handle = tuple;
  set_input = get(b, "set_input");
  if (TVMFuncCall(set_input, v, c, 2, &r, &rc) == 0) {
    call_named(b, "invoke", v, c, 1, &r, &rc);
    fprintf(stderr, "B ran A's closure (result type code %d)\n", rc);
    return 4;
  }
  printf("cross refused: %s\n", TVMGetLastError());
  CHECK(TVMFuncFree(set_input));
  CHECK(TVMObjectFree(tuple));
  CHECK(TVMModFree(a));
  CHECK(TVMModFree(b));
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 4 && strcmp(argv[1], "busy") == 0) return busy(argv[2], argv[3]);
  if (argc == 5 && strcmp(argv[1], "cross") == 0) return cross(argv[2], argv[3], argv[4]);
  fprintf(stderr, "usage: vm_hostile busy CODE_RO LIB_SO | cross A_RO B_RO LIB_SO\n");
  return 2;
}
