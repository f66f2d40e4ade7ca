/*
 * The Relax VM's C API under threads and odd arguments (tests/native/test_c_relax.py and
 * test_c_relax_hostile.py): each check runs on the first model of a run_relax spec (its
 * first run's inputs) and prints what happened, one line per fact.
 *
 *   relax_checks threads SPEC N ROUNDS   N threads, a VM each over one executable, each
 *                                        calling main ROUNDS times: every result equal, byte
 *                                        for byte, to one computed first on the main thread
 *   relax_checks busy SPEC               thread A's invoke held inside the instrument (a C
 *                                        function, TVMFuncCreateFromCFunc): B's main,
 *                                        invoke_stateful and vm_initialization on that VM
 *                                        refused, a VM of B's own runs; A's result unchanged
 *   relax_checks instrument-race SPEC    while A's invoke is inside the instrument, B's
 *                                        set_instrument(NULL): refused, or does the
 *                                        instrument's finalizer run while it still runs?
 *   relax_checks chain SPEC DEPTH WHAT   a tuple nested DEPTH deep (runtime.Array, around
 *                                        the first input) freed (WHAT free), or given as the
 *                                        first argument to WHAT: main, set_input("main", ...)
 *                                        or save_function("main", "saved", 1, ...)
 *   relax_checks closure SPEC            main() returns a closure: invoke_closure runs it on
 *                                        its VM and is refused by another VM
 *   relax_checks typeindex SPEC          TVMObjectGetTypeIndex of main's result objects
 *
 * Exit 0 after a check ran (its lines say how), 1 when a C API call failed unexpectedly.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tvm/runtime/c_runtime_api.h>
#include "relax_io.h"

#define MAX_PARAMS 64
#define MAX_THREADS 16

static TVMValue g_in[MAX_PARAMS];
static int g_nin;

/* the spec's first model and its first run's inputs */
static void read_spec(const char* path, char* model, size_t cap) {
  size_t n;
  char *spec = read_file(path, &n), *line, *save = NULL;
  int runs = 0;
  model[0] = '\0';
  for (line = strtok_r(spec, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
    if (strncmp(line, "model ", 6) == 0 && model[0] == '\0') {
      snprintf(model, cap, "%s", line + 6);
    } else if (strncmp(line, "run ", 4) == 0) {
      if (++runs > 1) break;
    } else if (strncmp(line, "tensor ", 7) == 0 && runs == 1 && g_nin < MAX_PARAMS) {
      g_in[g_nin++].v_handle = rx_read_tensor(line);
    }
  }
  free(spec);
  if (model[0] == '\0') exit(2);
}

static void free_inputs(void) {
  int i;
  for (i = 0; i < g_nin; ++i) CHECK(TVMArrayFree(g_in[i].v_handle));
}

/* a result's tensors, depth first, appended to buf (the result freed) */
typedef struct {
  char* data;
  size_t size;
} bytes;

static void flatten(const rx_readers* r, TVMValue v, int code, bytes* out) {
  int64_t n, i;
  if (code == kTVMNDArrayHandle) {
    const DLTensor* t = (const DLTensor*)v.v_handle;
    size_t nb = rx_nbytes(t);
    out->data = (char*)realloc(out->data, out->size + nb + 1);
    memcpy(out->data + out->size, (const char*)t->data + t->byte_offset, nb);
    out->size += nb;
    CHECK(TVMArrayFree(v.v_handle));
    return;
  }
  if (code != kTVMObjectHandle) return;
  n = rx_tuple_size(r, v.v_handle);
  for (i = 0; i < n; ++i) {
    TVMValue a[2], ret;
    int c[2] = {kTVMObjectHandle, kDLInt}, rc;
    a[0] = v;
    a[1].v_int64 = i;
    CHECK(TVMFuncCall(r->array_item, a, c, 2, &ret, &rc));
    flatten(r, ret, rc, out);
  }
  CHECK(TVMObjectFree(v.v_handle));
}

/* main(inputs...) on vm: 0 and its bytes, or -1 (TVM's last error says why) */
static int call_main(TVMModuleHandle vm, const rx_readers* r, bytes* out) {
  TVMFunctionHandle f = get(vm, "main");
  TVMValue args[MAX_PARAMS], ret;
  int codes[MAX_PARAMS], code, i, status;
  for (i = 0; i < g_nin; ++i) args[i] = g_in[i], codes[i] = kTVMNDArrayHandle;
  status = TVMFuncCall(f, args, codes, g_nin, &ret, &code);
  CHECK(TVMFuncFree(f));
  out->data = NULL;
  out->size = 0;
  if (status == 0) flatten(r, ret, code, out);
  return status;
}

static TVMModuleHandle new_vm(TVMModuleHandle exe) {
  TVMModuleHandle vm;
  CHECK(rx_new_vm(exe, &vm));
  return vm;
}

/* ---------------------------------------------------------------------------------- */
/* threads: one VM per thread                                                          */

typedef struct {
  TVMModuleHandle exe;
  const rx_readers* readers;
  const bytes* want;
  int rounds, same;
} job;

static void* worker(void* arg) {
  job* j = (job*)arg;
  TVMModuleHandle vm = new_vm(j->exe);
  int k;
  for (k = 0; k < j->rounds; ++k) {
    bytes got;
    CHECK(call_main(vm, j->readers, &got));
    j->same += got.size == j->want->size && memcmp(got.data, j->want->data, got.size) == 0;
    free(got.data);
  }
  CHECK(TVMModFree(vm));
  return NULL;
}

static int check_threads(TVMModuleHandle exe, const rx_readers* r, int n, int rounds) {
  pthread_t threads[MAX_THREADS];
  job jobs[MAX_THREADS];
  TVMModuleHandle vm = new_vm(exe);
  bytes want;
  int i, same = 0;
  if (n < 1 || n > MAX_THREADS) return 2;
  CHECK(call_main(vm, r, &want));
  CHECK(TVMModFree(vm));
  for (i = 0; i < n; ++i) {
    jobs[i].exe = exe;
    jobs[i].readers = r;
    jobs[i].want = &want;
    jobs[i].rounds = rounds;
    jobs[i].same = 0;
    if (pthread_create(&threads[i], NULL, worker, &jobs[i]) != 0) return 1;
  }
  for (i = 0; i < n; ++i) {
    pthread_join(threads[i], NULL);
    same += jobs[i].same;
  }
  free(want.data);
  printf("threads: %d x %d invokes, %d the same bytes\n", n, rounds, same);
  return 0;
}

/* ---------------------------------------------------------------------------------- */
/* busy: an invoke held inside the instrument                                          */

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int inside, release, running, finalized, finalized_while_running;
} gate;

static gate g_gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, 0, 0};

/* the instrument: (func, name, before, ret, args...); the first call waits for release */
static int hold(TVMValue* args, int* codes, int n, TVMRetValueHandle ret, void* resource) {
  gate* g = (gate*)resource;
  (void)args, (void)codes, (void)n, (void)ret;
  pthread_mutex_lock(&g->mu);
  g->running = 1;
  if (!g->inside) {
    g->inside = 1;
    pthread_cond_broadcast(&g->cv);
    while (!g->release) pthread_cond_wait(&g->cv, &g->mu);
  }
  g->running = 0;
  pthread_mutex_unlock(&g->mu);
  return 0;
}

static void hold_finalized(void* resource) {
  gate* g = (gate*)resource;
  pthread_mutex_lock(&g->mu);
  g->finalized = 1;
  g->finalized_while_running = g->running;
  pthread_mutex_unlock(&g->mu);
}

typedef struct {
  TVMModuleHandle vm;
  const rx_readers* readers;
  bytes got;
  int status;
} invoke_job;

static void* invoke_worker(void* arg) {
  invoke_job* j = (invoke_job*)arg;
  j->status = call_main(j->vm, j->readers, &j->got);
  if (j->status != 0) fprintf(stderr, "A's invoke failed: %s\n", TVMGetLastError());
  return NULL;
}

/* vm.set_instrument(hook), the hook handle freed (the VM holds it) */
static void set_hook(TVMModuleHandle vm) {
  TVMFunctionHandle hook;
  TVMValue a;
  int c = kTVMPackedFuncHandle, rc;
  TVMValue ret;
  CHECK(TVMFuncCreateFromCFunc(hold, &g_gate, hold_finalized, &hook));
  a.v_handle = hook;
  rx_call(vm, "set_instrument", &a, &c, 1, &ret, &rc);
  CHECK(TVMFuncFree(hook));
}

static void wait_inside(void) {
  pthread_mutex_lock(&g_gate.mu);
  while (!g_gate.inside) pthread_cond_wait(&g_gate.cv, &g_gate.mu);
  pthread_mutex_unlock(&g_gate.mu);
}

static void open_gate(void) {
  pthread_mutex_lock(&g_gate.mu);
  g_gate.release = 1;
  pthread_cond_broadcast(&g_gate.cv);
  pthread_mutex_unlock(&g_gate.mu);
}

/* fn(args) on vm from this thread: print whether it ran or why it was refused */
static void try_call(TVMModuleHandle vm, const char* what, const char* fn, TVMValue* a, int* c,
                     int n) {
  TVMFunctionHandle f = get(vm, fn);
  TVMValue ret;
  int rc, status = TVMFuncCall(f, a, c, n, &ret, &rc);
  CHECK(TVMFuncFree(f));
  if (status == 0) {
    printf("%s: ran\n", what);
    if (rc == kTVMNDArrayHandle) CHECK(TVMArrayFree(ret.v_handle));
    if (rc == kTVMObjectHandle) CHECK(TVMObjectFree(ret.v_handle));
  } else {
    printf("%s: %s\n", what, TVMGetLastError());
  }
}

static int check_busy(TVMModuleHandle exe, const rx_readers* r, int race) {
  TVMModuleHandle vm = new_vm(exe), other;
  invoke_job a = {vm, r, {NULL, 0}, -1};
  pthread_t thread;
  bytes want, mine;
  TVMValue args[MAX_PARAMS + 1], ret;
  int codes[MAX_PARAMS + 1], i, rc;
  CHECK(call_main(vm, r, &want)); /* before the instrument */
  args[0].v_str = "main";
  codes[0] = kTVMStr;
  for (i = 0; i < g_nin; ++i) args[i + 1] = g_in[i], codes[i + 1] = kTVMNDArrayHandle;
  rx_call(vm, "set_input", args, codes, g_nin + 1, &ret, &rc);
  set_hook(vm);
  if (pthread_create(&thread, NULL, invoke_worker, &a) != 0) return 1;
  wait_inside();
  if (race) { /* B replaces the instrument A is running */
    TVMValue none;
    int c = kTVMNullptr;
    none.v_handle = NULL;
    try_call(vm, "set_instrument(None) during A's invoke", "set_instrument", &none, &c, 1);
  } else {
    for (i = 0; i < g_nin; ++i) args[i] = g_in[i], codes[i] = kTVMNDArrayHandle;
    try_call(vm, "main on B", "main", args, codes, g_nin);
    args[0].v_str = "main";
    codes[0] = kTVMStr;
    try_call(vm, "invoke_stateful on B", "invoke_stateful", args, codes, 1);
    args[0].v_int64 = kDLCPU, args[1].v_int64 = 0, args[2].v_int64 = 2;
    codes[0] = codes[1] = codes[2] = kDLInt;
    try_call(vm, "vm_initialization on B", "vm_initialization", args, codes, 3);
    other = new_vm(exe); /* a VM of B's own runs meanwhile */
    CHECK(call_main(other, r, &mine));
    printf("B's own VM: %s\n",
           mine.size == want.size && memcmp(mine.data, want.data, want.size) == 0
               ? "the same bytes"
               : "DIFFERENT bytes");
    free(mine.data);
    CHECK(TVMModFree(other));
  }
  open_gate();
  pthread_join(thread, NULL);
  if (a.status == 0) {
    printf("A's invoke: %s\n",
           a.got.size == want.size && memcmp(a.got.data, want.data, want.size) == 0
               ? "the same bytes"
               : "DIFFERENT bytes");
  }
  if (race) {
    printf("the instrument was %s\n", !g_gate.finalized ? "not finalized"
                                      : g_gate.finalized_while_running
                                          ? "finalized while it ran"
                                          : "finalized after it returned");
  }
  free(a.got.data);
  free(want.data);
  CHECK(TVMModFree(vm));
  return 0;
}

/* ---------------------------------------------------------------------------------- */
/* chain: a deeply nested tuple                                                        */

static TVMObjectHandle make_chain(long depth) {
  TVMFunctionHandle array;
  TVMValue a, ret;
  int c, rc;
  long k;
  CHECK(TVMFuncGetGlobal("runtime.Array", &array));
  a.v_handle = g_in[0].v_handle;
  c = kTVMNDArrayHandle;
  for (k = 0; k < depth; ++k) {
    CHECK(TVMFuncCall(array, &a, &c, 1, &ret, &rc));
    if (c == kTVMObjectHandle) CHECK(TVMObjectFree(a.v_handle)); /* the new tuple holds it */
    a = ret;
    c = rc;
  }
  CHECK(TVMFuncFree(array));
  return a.v_handle;
}

static int check_chain(TVMModuleHandle exe, long depth, const char* what) {
  TVMModuleHandle vm = new_vm(exe);
  TVMObjectHandle chain = make_chain(depth);
  TVMValue args[MAX_PARAMS + 3];
  int codes[MAX_PARAMS + 3], i, first = 0;
  if (strcmp(what, "free") == 0) {
    CHECK(TVMObjectFree(chain));
    printf("a %ld-deep tuple: freed\n", depth);
    CHECK(TVMModFree(vm));
    return 0;
  }
  if (strcmp(what, "set_input") == 0) { /* set_input("main", chain, inputs[1:]...) */
    args[0].v_str = "main";
    codes[0] = kTVMStr;
    first = 1;
  } else if (strcmp(what, "save_function") == 0) { /* save_function("main", "saved", 1, ...) */
    args[0].v_str = "main";
    args[1].v_str = "saved";
    args[2].v_int64 = 1;
    codes[0] = codes[1] = kTVMStr;
    codes[2] = kDLInt;
    first = 3;
  } else if (strcmp(what, "main") != 0) {
    return 2;
  }
  args[first].v_handle = chain;
  codes[first] = kTVMObjectHandle;
  for (i = 1; i < g_nin; ++i) args[first + i] = g_in[i], codes[first + i] = kTVMNDArrayHandle;
  try_call(vm, what, what, args, codes, first + (g_nin > 0 ? g_nin : 1));
  CHECK(TVMObjectFree(chain));
  CHECK(TVMModFree(vm)); /* with whatever set_input and save_function kept */
  printf("freed\n");
  return 0;
}

/* ---------------------------------------------------------------------------------- */
/* closure: a closure of one VM given to another                                       */

static int check_closure(TVMModuleHandle exe) {
  TVMModuleHandle vm = new_vm(exe), other = new_vm(exe);
  TVMFunctionHandle f = get(vm, "main");
  TVMValue ret, a;
  int rc, c = kTVMObjectHandle;
  CHECK(TVMFuncCall(f, NULL, NULL, 0, &ret, &rc));
  CHECK(TVMFuncFree(f));
  if (rc != kTVMObjectHandle) {
    fprintf(stderr, "main returned type code %d, not a closure\n", rc);
    return 1;
  }
  a = ret;
  try_call(vm, "invoke_closure on its own VM", "invoke_closure", &a, &c, 1);
  try_call(other, "invoke_closure on another VM", "invoke_closure", &a, &c, 1);
  CHECK(TVMObjectFree(a.v_handle));
  CHECK(TVMModFree(other));
  CHECK(TVMModFree(vm));
  return 0;
}

/* ---------------------------------------------------------------------------------- */
/* typeindex: what TVMObjectGetTypeIndex says of main's result                         */

static void type_of(const rx_readers* r, TVMValue v, int code, int depth) {
  unsigned index;
  char* key = NULL;
  int64_t n, i;
  if (code != kTVMObjectHandle) {
    printf("%*stype code %d\n", 2 * depth, "", code);
    if (code == kTVMNDArrayHandle) CHECK(TVMArrayFree(v.v_handle));
    return;
  }
  if (TVMObjectGetTypeIndex(v.v_handle, &index) == 0 && TVMObjectTypeIndex2Key(index, &key) == 0) {
    printf("%*sobject: type index %u, %s\n", 2 * depth, "", index, key);
    free(key);
  } else {
    printf("%*sobject: %s\n", 2 * depth, "", TVMGetLastError());
  }
  n = rx_tuple_size(r, v.v_handle);
  for (i = 0; i < n; ++i) {
    TVMValue a[2], ret;
    int c[2] = {kTVMObjectHandle, kDLInt}, rc;
    a[0] = v;
    a[1].v_int64 = i;
    CHECK(TVMFuncCall(r->array_item, a, c, 2, &ret, &rc));
    type_of(r, ret, rc, depth + 1);
  }
  CHECK(TVMObjectFree(v.v_handle));
}

static int check_typeindex(TVMModuleHandle exe, const rx_readers* r) {
  TVMModuleHandle vm = new_vm(exe);
  TVMFunctionHandle f = get(vm, "main");
  TVMValue args[MAX_PARAMS], ret;
  int codes[MAX_PARAMS], rc, i;
  for (i = 0; i < g_nin; ++i) args[i] = g_in[i], codes[i] = kTVMNDArrayHandle;
  CHECK(TVMFuncCall(f, args, codes, g_nin, &ret, &rc));
  CHECK(TVMFuncFree(f));
  type_of(r, ret, rc, 0);
  CHECK(TVMModFree(vm));
  return 0;
}

int main(int argc, char** argv) {
  char model[4096];
  TVMModuleHandle exe;
  rx_readers readers;
  int status;
  if (argc < 3) {
    fprintf(stderr, "usage: relax_checks CHECK SPEC [ARGS...]\n");
    return 2;
  }
  read_spec(argv[2], model, sizeof(model));
  rx_readers_get(&readers);
  CHECK(TVMModLoadFromFile(model, "", &exe));
  if (strcmp(argv[1], "threads") == 0 && argc == 5) {
    status = check_threads(exe, &readers, atoi(argv[3]), atoi(argv[4]));
  } else if (strcmp(argv[1], "busy") == 0) {
    status = check_busy(exe, &readers, 0);
  } else if (strcmp(argv[1], "instrument-race") == 0) {
    status = check_busy(exe, &readers, 1);
  } else if (strcmp(argv[1], "chain") == 0 && argc == 5) {
    status = check_chain(exe, atol(argv[3]), argv[4]);
  } else if (strcmp(argv[1], "closure") == 0) {
    status = check_closure(exe);
  } else if (strcmp(argv[1], "typeindex") == 0) {
    status = check_typeindex(exe, &readers);
  } else {
    fprintf(stderr, "unknown check %s\n", argv[1]);
    status = 2;
  }
  CHECK(TVMModFree(exe));
  rx_readers_free(&readers);
  free_inputs();
  return status;
}
