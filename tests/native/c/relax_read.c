/*
 * The Relax VM executable reader on its own (tvmrt_rx_read, relax_format.c), fed raw
 * payload bytes (tests/native/test_c_relax_hostile.py; linked with libtvmrt_runtime.a to
 * reach the internal function):
 *
 *   relax_read ERA FILE             "ok: F functions, C constants, I instructions", or the
 *                                   error
 *   relax_read ERA FILE prefixes    every proper prefix of FILE (0 to size - 1 bytes), one
 *                                   line each: "N: ok ..." or "N: error"
 *
 * ERA: 0 TVM <= 0.20 (tags 0-5), 1 TVM 0.21, 2 TVM >= 0.22 (what the blob container says).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_io.h"
#include "runtime/relax.h"

static void read_one(const uint8_t* data, size_t size, int era) {
  rx_exe exe;
  TVMAPISetLastError("");
  if (tvmrt_rx_read(data, size, era, "relax.Executable", &exe) != 0) {
    const char* msg = TVMGetLastError();
    printf("%s\n", msg != NULL && *msg ? msg : "(an error without a message)");
    return;
  }
  printf("ok: %zu functions, %zu constants, %zu instructions\n", exe.num_funcs, exe.num_consts,
         exe.num_code);
  tvmrt_rx_exe_free(&exe);
}

int main(int argc, char** argv) {
  size_t size, n;
  char* data;
  int era;
  if (argc < 3 || argc > 4 || (argc == 4 && strcmp(argv[3], "prefixes") != 0)) {
    fprintf(stderr, "usage: relax_read ERA FILE [prefixes]\n");
    return 2;
  }
  era = atoi(argv[1]);
  if (era < RX_ERA_LEGACY || era > RX_ERA_FFI) return 2;
  data = read_file(argv[2], &size);
  tvmrt_init();
  if (argc == 3) {
    read_one((const uint8_t*)data, size, era);
  } else {
    for (n = 0; n < size; ++n) {
      /* each prefix in a buffer of its own size, so that ASan sees any read past it */
      uint8_t* copy = (uint8_t*)malloc(n ? n : 1);
      memcpy(copy, data, n);
      printf("%zu: ", n);
      read_one(copy, n, era);
      free(copy);
    }
  }
  free(data);
  return 0;
}
