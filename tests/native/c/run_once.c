/*
 * TVMBackendRunOnce as pthread_once: a second caller returns only after the first caller's
 * function has finished, a failed function is not taken as done (the next call runs it
 * again), and a function calling it again for its own handle does not wait on itself.
 * Prints "ok" or the first broken rule.
 *
 *   run_once
 */
#include <pthread.h>
#include <stdio.h>
#include <time.h>

#include <tvm/runtime/c_backend_api.h>

static void* g_handle; /* a kernel's static slot */
static int g_finished, g_runs;

static void pause_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

static int slow_init(void* cdata) {
  (void)cdata;
  __atomic_add_fetch(&g_runs, 1, __ATOMIC_SEQ_CST);
  pause_ms(200);
  __atomic_store_n(&g_finished, 1, __ATOMIC_SEQ_CST);
  return 0;
}

static void* second_caller(void* seen) {
  pause_ms(50); /* the first caller is inside slow_init by now */
  if (TVMBackendRunOnce(&g_handle, slow_init, NULL, 0) != 0) return NULL;
  *(int*)seen = __atomic_load_n(&g_finished, __ATOMIC_SEQ_CST);
  return NULL;
}

static int failing_runs;
static int fail_first(void* cdata) {
  (void)cdata;
  return ++failing_runs == 1 ? -1 : 0;
}

static void* g_nested_handle;
static int nested_runs;
static int nested(void* cdata) {
  (void)cdata;
  ++nested_runs;
  return TVMBackendRunOnce(&g_nested_handle, nested, NULL, 0); /* its own handle again */
}

int main(void) {
  pthread_t t;
  int seen = -1;
  static void* failing;
  pthread_create(&t, NULL, second_caller, &seen);
  if (TVMBackendRunOnce(&g_handle, slow_init, NULL, 0) != 0) return puts("first call failed"), 1;
  pthread_join(t, NULL);
  if (seen != 1) return printf("the second caller returned before the function finished\n"), 1;
  if (g_runs != 1) return printf("the function ran %d times\n", g_runs), 1;

  if (TVMBackendRunOnce(&failing, fail_first, NULL, 0) == 0)
    return puts("a failing function was reported as a success"), 1;
  if (TVMBackendRunOnce(&failing, fail_first, NULL, 0) != 0 || failing_runs != 2)
    return printf("a failed function was taken as done (%d runs)\n", failing_runs), 1;
  if (TVMBackendRunOnce(&failing, fail_first, NULL, 0) != 0 || failing_runs != 2)
    return puts("a function that succeeded ran again"), 1;

  if (TVMBackendRunOnce(&g_nested_handle, nested, NULL, 0) != 0 || nested_runs != 1)
    return printf("a nested call for the same handle: %d runs\n", nested_runs), 1;
  puts("ok");
  return 0;
}
