/*
 * Shared by the two Relax invoke timers (relax_invoke_tvmrt.c, relax_invoke_tvm.c): the
 * command line, the raw input files and the clock. Inputs are float32 files of raw bytes
 * the bench script writes from a fixture's npz, each named with its shape:
 *
 *   prog model.so REPEAT BATCHES path:2x16 path:32 ...
 *
 * Each program prints "per_invoke_us <median over BATCHES of REPEAT invokes>" and
 * "checksum <sum of the first output's elements>" (both runtimes must print the same).
 */
#ifndef TVMRT_BENCH_RELAX_INVOKE_H_
#define TVMRT_BENCH_RELAX_INVOKE_H_

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_MAX_INPUTS 16
#define BENCH_MAX_DIMS 8

typedef struct {
  int64_t shape[BENCH_MAX_DIMS];
  int ndim;
  int64_t count;
  float* data;
} BenchInput;

static void bench_die(const char* what, const char* detail) {
  fprintf(stderr, "relax_invoke: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
  exit(1);
}

static void bench_read_input(const char* spec, BenchInput* in) {
  char path[4096];
  const char* colon = strrchr(spec, ':');
  if (!colon || (size_t)(colon - spec) >= sizeof(path)) bench_die("expected path:DIMS", spec);
  memcpy(path, spec, (size_t)(colon - spec));
  path[colon - spec] = '\0';
  in->ndim = 0;
  in->count = 1;
  for (const char* p = colon + 1; *p;) {
    char* end;
    long long d = strtoll(p, &end, 10);
    if (end == p || d < 0 || in->ndim == BENCH_MAX_DIMS) bench_die("bad shape", spec);
    in->shape[in->ndim++] = d;
    in->count *= d;
    p = *end == 'x' ? end + 1 : end;
    if (*end && *end != 'x') bench_die("bad shape", spec);
  }
  in->data = malloc((size_t)(in->count > 0 ? in->count : 1) * sizeof(float));
  FILE* f = fopen(path, "rb");
  if (!f || !in->data) bench_die("cannot read", path);
  if (fread(in->data, sizeof(float), (size_t)in->count, f) != (size_t)in->count) {
    bench_die("short input file", path);
  }
  fclose(f);
}

static double bench_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int bench_cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double bench_median(double* v, int n) {
  qsort(v, (size_t)n, sizeof(double), bench_cmp);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double bench_checksum(const float* data, int64_t count) {
  double sum = 0;
  for (int64_t i = 0; i < count; ++i) sum += data[i];
  return sum;
}

#endif /* TVMRT_BENCH_RELAX_INVOKE_H_ */
