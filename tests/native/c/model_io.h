/*
 * What the model-running test programs (run_model.c, run_vm.c) share: a whole file read
 * into memory, and a module's function looked up or the program ends naming it.
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

#endif /* TVMRT_TESTS_MODEL_IO_H_ */
