/*
 * What the model-running test programs (run_model.c, run_vm.c, vm_hostile.c, debug_exec.c)
 * share: a whole file read into memory, a module's function looked up (or the program ends
 * naming it) and called once, and a Relay VM executable made from code.ro and its library.
 */
#ifndef TVMRT_TESTS_MODEL_IO_H_
#define TVMRT_TESTS_MODEL_IO_H_

#include <stdio.h>
#include <stdlib.h>

#include "check.h"

static inline char* read_file(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  char* buf;
  long n;
  if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0) {
    fprintf(stderr, "cannot read %s\n", path);
    exit(1);
  }
  rewind(f);
  buf = (char*)malloc((size_t)n + 1);
  if (buf == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n) exit(1);
  buf[n] = '\0';
  fclose(f);
  *size = (size_t)n;
  return buf;
}

static inline TVMFunctionHandle get(TVMModuleHandle mod, const char* name) {
  TVMFunctionHandle f = NULL;
  CHECK(TVMModGetFunction(mod, name, 0, &f));
  if (f == NULL) {
    fprintf(stderr, "module has no function %s\n", name);
    exit(1);
  }
  return f;
}

/* call mod[name] once (the handle freed after) */
static inline void call_named(TVMModuleHandle mod, const char* name, TVMValue* args, int* codes,
                              int n, TVMValue* ret, int* code) {
  TVMFunctionHandle f = get(mod, name);
  CHECK(TVMFuncCall(f, args, codes, n, ret, code));
  CHECK(TVMFuncFree(f));
}

/* runtime.Load_Executable(the bytes of code_ro, lib): the executable (which holds lib) */
static inline TVMModuleHandle load_executable(const char* code_ro, TVMModuleHandle lib) {
  TVMFunctionHandle load;
  TVMByteArray bytes;
  TVMValue args[2], ret;
  int codes[2], code;
  size_t n;
  char* data = read_file(code_ro, &n);
  bytes.data = data;
  bytes.size = n;
  CHECK(TVMFuncGetGlobal("runtime.Load_Executable", &load));
  args[0].v_handle = &bytes;
  codes[0] = kTVMBytes;
  args[1].v_handle = lib;
  codes[1] = kTVMModuleHandle;
  CHECK(TVMFuncCall(load, args, codes, 2, &ret, &code));
  free(data);
  CHECK(TVMFuncFree(load));
  return ret.v_handle;
}

#endif /* TVMRT_TESTS_MODEL_IO_H_ */
