/*
 * What the C test programs share: CHECK (a TVM C API call that must succeed; the program
 * exits 1 naming it and TVM's last error otherwise) and EXPECT (a condition; a miss is
 * printed and sets the program's `g_failed`, which a program using EXPECT defines).
 */
#ifndef TVMRT_TESTS_CHECK_H_
#define TVMRT_TESTS_CHECK_H_

#include <stdio.h>
#include <stdlib.h>

#include <tvm/runtime/c_runtime_api.h>

#define CHECK(call)                                                                                \
  do {                                                                                             \
    if ((call) != 0) {                                                                             \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, TVMGetLastError());     \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)
#define EXPECT(cond)                                                                               \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond);                          \
      g_failed = 1;                                                                                \
    }                                                                                              \
  } while (0)

#endif /* TVMRT_TESTS_CHECK_H_ */
