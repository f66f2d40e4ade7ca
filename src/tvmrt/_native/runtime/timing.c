/*
 * TVM's time evaluator (src/runtime/profiling.cc, WrapTimeEvaluator) for C callers: the
 * debug executor's run_individual and run_individual_node (graph_debug.c) time a node with
 * it. One warm-up call, then `repeat` measurements of `number` calls; while a measurement is
 * shorter than min_repeat_ms (and at most limit_zero_time_iterations of them took no time),
 * `number` grows and it is measured again. The Python runtime's evaluator
 * (tvmrt/runtime/benchmark.py) times Python callables the same way; the arguments are checked
 * with its words (TimingConfig).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rt.h"

static const tvmrt_timing k_defaults = {10, 1, 0.0, 100, 0.0, 1}; /* TimingConfig's */

uint64_t tvmrt_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

static int count_arg(TVMValue v, int code, const char* name, int64_t minimum, int64_t* out) {
  if (code != kDLInt && code != kDLUInt) {
    return tvmrt_fail("ArgumentTypeError", "%s must be an integer, got %s", name,
                      tvmrt_py_type_name(code));
  }
  if (v.v_int64 < minimum) {
    return tvmrt_fail("InvalidArgumentError", "%s must be %s, got %lld", name,
                      minimum ? "> 0" : ">= 0", (long long)v.v_int64);
  }
  *out = v.v_int64;
  return 0;
}

static int duration_arg(TVMValue v, int code, const char* name, double* out) {
  double d;
  char text[40];
  if (code == kDLInt || code == kDLUInt) {
    if (v.v_int64 < 0) {
      return tvmrt_fail("InvalidArgumentError", "%s must be >= 0, got %lld", name,
                        (long long)v.v_int64);
    }
    *out = (double)v.v_int64;
    return 0;
  }
  if (code != kDLFloat) {
    return tvmrt_fail("ArgumentTypeError", "%s must be a number, got %s", name,
                      tvmrt_py_type_name(code));
  }
  d = v.v_float64;
  if (!(d >= 0)) { /* NaN fails too */
    tvmrt_float_repr(d, text, sizeof(text));
    return tvmrt_fail("InvalidArgumentError", "%s must be >= 0, got %s", name, text);
  }
  *out = d;
  return 0;
}

int tvmrt_timing_args(const TVMValue* args, const int* codes, int n, tvmrt_timing* out) {
  *out = k_defaults;
  if (n > 6) {
    return tvmrt_fail("InvalidArgumentError", "expected at most 6 timing arguments, got %d", n);
  }
  if (n > 0 && count_arg(args[0], codes[0], "number", 1, &out->number) != 0) return -1;
  if (n > 1 && count_arg(args[1], codes[1], "repeat", 1, &out->repeat) != 0) return -1;
  if (n > 2 && duration_arg(args[2], codes[2], "min_repeat_ms", &out->min_repeat_ms) != 0)
    return -1;
  if (n > 3 && count_arg(args[3], codes[3], "limit_zero_time_iterations", 0,
                         &out->limit_zero_time_iterations) != 0)
    return -1;
  if (n > 4 &&
      duration_arg(args[4], codes[4], "cooldown_interval_ms", &out->cooldown_interval_ms) != 0)
    return -1;
  if (n > 5 &&
      count_arg(args[5], codes[5], "repeats_to_cooldown", 1, &out->repeats_to_cooldown) != 0)
    return -1;
  if (out->repeat > TVMRT_TIMING_MAX_REPEAT) {
    return tvmrt_fail("InvalidArgumentError", "repeat must be at most %d, got %lld",
                      TVMRT_TIMING_MAX_REPEAT, (long long)out->repeat);
  }
  return 0;
}

static int sync(DLDevice dev) {
  if (dev.device_type == kDLCPU) return 0;
  return TVMSynchronize(dev.device_type, dev.device_id, NULL);
}

int tvmrt_time_evaluate(int (*call)(void* ctx), void* ctx, DLDevice dev, const tvmrt_timing* t,
                        double* results) {
  int64_t number = t->number, r, k;
  if (call(ctx) != 0) return -1; /* warm-up, discarded */
  if (sync(dev) != 0) return -1;
  for (r = 0; r < t->repeat; ++r) {
    double duration_ms = 0.0;
    int64_t zero_times = 0;
    for (;;) {
      uint64_t start, elapsed;
      if (duration_ms > 0.0) {
        double grown = t->min_repeat_ms / (duration_ms / (double)number) + 1;
        double golden = (double)number * 1.618;
        number = (int64_t)(grown > golden ? grown : golden);
      }
      if (sync(dev) != 0) return -1;
      start = tvmrt_now_ns();
      for (k = 0; k < number; ++k) {
        if (call(ctx) != 0) return -1;
      }
      if (sync(dev) != 0) return -1;
      elapsed = tvmrt_now_ns() - start;
      if (elapsed == 0) ++zero_times;
      duration_ms = (double)elapsed / 1e6;
      if (!(duration_ms < t->min_repeat_ms && zero_times < t->limit_zero_time_iterations)) break;
    }
    results[r] = duration_ms / 1e3 / (double)number;
    if (t->cooldown_interval_ms > 0 && r % t->repeats_to_cooldown == 0) {
      struct timespec pause;
      double s = t->cooldown_interval_ms / 1000;
      pause.tv_sec = (time_t)s;
      pause.tv_nsec = (long)((s - (double)pause.tv_sec) * 1e9);
      nanosleep(&pause, NULL);
    }
  }
  return 0;
}
