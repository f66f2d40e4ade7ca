/*
 * The debug executor (TVM's GraphExecutorDebug, src/runtime/graph_executor/debug/): the
 * graph executor module, type key "GraphExecutor", whose lookup also answers
 *
 *   run_individual(timing...)            run the graph, then time every node: bytes, an int64
 *                                        node count then `repeat` doubles per node (seconds
 *                                        per call; zeros for inputs and params)
 *   run_individual_node(node, timing...) one node's `repeat` doubles
 *   execute_node(node)                   run up to `node`, continuing from the last executed
 *   get_node_output(node, index)         a CPU copy of an output of the last executed node
 *   debug_get_output(node[, out])        run 0 .. node; its first output (a CPU copy, or into
 *                                        `out`); `node` an index or the first node's name
 *
 * `timing...` are TVM's six time-evaluator arguments (timing.c). The bytes stay valid until
 * the executor's next run_individual* call. The Python face's profile() times each kernel
 * call through execute_node (its report is the face's: tvmrt.runtime.profiling). Behaviour
 * and words are the Python engine's (tvmrt/runtime/graph_executor/debug.py): the node that
 * execute_node continues from is also set by run, run_individual and debug_get_output, a
 * node index out of range is an InternalError, and debug_get_output returns node's first
 * output (TVM's returns entry number `node`).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_executor.h"

#define GE(self) ((graph_executor*)((tvmrt_module*)(self))->impl)

static int64_t node_arg(graph_executor* ge, TVMValue v, int code, const char* what) {
  int64_t n = (int64_t)ge->g.num_nodes;
  if (code != kDLInt && code != kDLUInt) {
    tvmrt_fail("ArgumentTypeError", "%s: node index must be an integer, got %s", what,
               tvmrt_py_type_name(code));
    return -1;
  }
  if (v.v_int64 < 0 || v.v_int64 >= n) {
    tvmrt_fail("InternalError",
               "%s: node index %lld is out of range; the graph has %lld nodes (0 to %lld)", what,
               (long long)v.v_int64, (long long)n, (long long)(n - 1));
    return -1;
  }
  return v.v_int64;
}

static uint32_t num_node_outputs(const graph_executor* ge, int64_t nid) {
  const tvmrt_node* node = &ge->g.nodes[nid];
  return node->is_op ? node->num_outputs : 1;
}

/* output `index` of node `nid`, checked with `what`'s words; NULL with an error set */
static const DLTensor* node_output(graph_executor* ge, int64_t nid, TVMValue v, int code,
                                   const char* what) {
  uint32_t count = num_node_outputs(ge, nid);
  if (code != kDLInt && code != kDLUInt) {
    tvmrt_fail("ArgumentTypeError", "%s: output index must be an integer, got %s", what,
               tvmrt_py_type_name(code));
    return NULL;
  }
  if (v.v_int64 < 0 || v.v_int64 >= (int64_t)count) {
    tvmrt_fail("InternalError",
               "%s: output index %lld is out of range; node %lld ('%.200s') has %u outputs", what,
               (long long)v.v_int64, (long long)nid, ge->g.nodes[nid].name, count);
    return NULL;
  }
  return &ge->entries[tvmrt_graph_eid(&ge->g, (uint32_t)nid, (uint32_t)v.v_int64)];
}

/* per node, its op's index (ops are one per op node, in node order), -1 for an input */
static int op_table(graph_executor* ge) {
  size_t i;
  if (ge->op_of != NULL) return 0;
  ge->op_of = (int32_t*)malloc((ge->g.num_nodes ? ge->g.num_nodes : 1) * sizeof(int32_t));
  if (ge->op_of == NULL) {
    return tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate the node table of %zu nodes",
                      ge->g.num_nodes);
  }
  for (i = 0; i < ge->g.num_nodes; ++i) ge->op_of[i] = -1;
  for (i = 0; i < ge->num_ops; ++i) ge->op_of[ge->ops[i].nid] = (int32_t)i;
  return 0;
}

/* run nodes first .. last (inclusive) */
static int run_nodes(graph_executor* ge, int64_t first, int64_t last) {
  int64_t nid;
  for (nid = first; nid <= last; ++nid) {
    if (ge->op_of[nid] >= 0 && tvmrt_ge_run_op(ge, (size_t)ge->op_of[nid]) != 0) return -1;
  }
  return 0;
}

/* ---------------------------------------------------------------------------------- */
/* timing                                                                              */

typedef struct {
  graph_executor* ge;
  size_t op;
  DLDevice node_dev; /* synchronized after each call when it is not the host's CPU */
  int sync_node;
} timed_node;

static int call_node(void* ctx) {
  timed_node* t = (timed_node*)ctx;
  if (tvmrt_ge_run_op(t->ge, t->op) != 0) return -1;
  if (t->sync_node) return TVMSynchronize(t->node_dev.device_type, t->node_dev.device_id, NULL);
  return 0;
}

/* how op node `nid` is timed: its op, and the device synchronized after its call */
static void node_timing(graph_executor* ge, int64_t nid, timed_node* t) {
  DLDevice host = ge->devs[0];
  t->ge = ge;
  t->op = (size_t)ge->op_of[nid];
  t->node_dev = num_node_outputs(ge, nid) == 0
                    ? host
                    : ge->entries[tvmrt_graph_eid(&ge->g, (uint32_t)nid, 0)].device;
  t->sync_node =
      t->node_dev.device_type != kDLCPU &&
      (t->node_dev.device_type != host.device_type || t->node_dev.device_id != host.device_id);
}

/* seconds per call of node `nid` for each repeat, into results (zeros: it is not an op) */
static int time_node(graph_executor* ge, int64_t nid, const tvmrt_timing* timing, double* results) {
  timed_node t;
  DLDevice host = ge->devs[0];
  int32_t op = ge->op_of[nid];
  int64_t r;
  if (op < 0) { /* an input or param; a __nop is timed, as TVM times its empty call */
    for (r = 0; r < timing->repeat; ++r) results[r] = 0.0;
    return 0;
  }
  node_timing(ge, nid, &t);
  return tvmrt_time_evaluate(call_node, &t, host, timing, results);
}

/* `size` bytes that become the call's result (the executor's blob, valid until its next
   bytes result), or NULL (no error set) when out of memory */
static unsigned char* give_blob(graph_executor* ge, size_t size, TVMValue* ret, int* rc) {
  unsigned char* blob = (unsigned char*)malloc(size + 1);
  if (blob == NULL) return NULL;
  free(ge->blob);
  ge->blob = blob;
  ge->blob_ref.data = (const char*)blob;
  ge->blob_ref.size = size;
  ret->v_handle = &ge->blob_ref;
  *rc = kTVMBytes;
  return blob;
}

/* `count` doubles (after an int64 node count when `with_count`) as the call's bytes */
static int give_bytes(graph_executor* ge, size_t count, int with_count, double** slots,
                      TVMValue* ret, int* rc) {
  size_t head = with_count ? sizeof(int64_t) : 0;
  unsigned char* blob;
  if (count > ((size_t)1 << 40) / sizeof(double)) {
    return tvmrt_fail("InvalidArgumentError", "%zu timing results are too many", count);
  }
  if ((blob = give_blob(ge, head + count * sizeof(double), ret, rc)) == NULL) {
    return tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate %zu timing results", count);
  }
  *slots = (double*)(void*)(blob + head);
  return 0;
}

static int f_run_individual(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  graph_executor* ge = GE(self);
  tvmrt_timing timing;
  double* slots;
  int64_t nid, count = (int64_t)ge->g.num_nodes;
  if (tvmrt_arity("run_individual", n, 0, 6) != 0) return -1;
  if (tvmrt_timing_args(args, codes, n, &timing) != 0 || op_table(ge) != 0) return -1;
  if (tvmrt_ge_enter(ge) != 0) return -1;
  if (tvmrt_ge_run(ge) != 0) return tvmrt_ge_leave(ge, -1); /* warm-up */
  if (give_bytes(ge, (size_t)count * (size_t)timing.repeat, 1, &slots, ret, rc) != 0) {
    return tvmrt_ge_leave(ge, -1);
  }
  memcpy(ge->blob, &count, sizeof(count));
  for (nid = 0; nid < count; ++nid) {
    if (time_node(ge, nid, &timing, slots + nid * timing.repeat) != 0) {
      *rc = kTVMNullptr;
      return tvmrt_ge_leave(ge, -1);
    }
  }
  ge->last_executed = count - 1;
  return tvmrt_ge_leave(ge, 0);
}

static int f_run_individual_node(void* self, TVMValue* args, int* codes, int n, TVMValue* ret,
                                 int* rc) {
  graph_executor* ge = GE(self);
  tvmrt_timing timing;
  double* slots;
  int64_t nid;
  if (tvmrt_arity("run_individual_node", n, 1, 7) != 0) return -1;
  if ((nid = node_arg(ge, args[0], codes[0], "run_individual_node")) < 0) return -1;
  if (tvmrt_timing_args(args + 1, codes + 1, n - 1, &timing) != 0 || op_table(ge) != 0) return -1;
  if (tvmrt_ge_enter(ge) != 0) return -1;
  if (give_bytes(ge, (size_t)timing.repeat, 0, &slots, ret, rc) != 0) return tvmrt_ge_leave(ge, -1);
  if (time_node(ge, nid, &timing, slots) != 0) {
    *rc = kTVMNullptr;
    return tvmrt_ge_leave(ge, -1);
  }
  return tvmrt_ge_leave(ge, 0);
}

/* ---------------------------------------------------------------------------------- */
/* node outputs                                                                        */

static int f_execute_node(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  graph_executor* ge = GE(self);
  int64_t nid, last = ge->last_executed;
  int status = 0;
  (void)ret, (void)rc;
  if (tvmrt_arity("execute_node", n, 1, 1) != 0) return -1;
  if ((nid = node_arg(ge, args[0], codes[0], "execute_node")) < 0 || op_table(ge) != 0) return -1;
  if (tvmrt_ge_enter(ge) != 0) return -1;
  if (nid > last) {
    status = run_nodes(ge, last + 1, nid);
  } else if (nid < last) {
    status = run_nodes(ge, 0, nid);
  }
  if (status == 0) ge->last_executed = nid;
  return tvmrt_ge_leave(ge, status);
}

/* a new CPU array holding a copy of `t` */
static int give_copy(void* self, const DLTensor* t, TVMValue* ret, int* rc) {
  tvmrt_ndarray* copy = tvmrt_ndarray_empty(t->shape, t->ndim, t->dtype);
  if (copy == NULL) return -1;
  if (tvmrt_copy_tensor(t, &copy->dl) != 0) {
    tvmrt_release(&copy->hdr);
    return -1;
  }
  (void)self;
  ret->v_handle = &copy->dl;
  *rc = kTVMNDArrayHandle;
  return 0;
}

static int f_get_node_output(void* self, TVMValue* args, int* codes, int n, TVMValue* ret,
                             int* rc) {
  graph_executor* ge = GE(self);
  const DLTensor* t;
  int64_t nid;
  if (tvmrt_arity("get_node_output", n, 2, 2) != 0) return -1;
  if ((nid = node_arg(ge, args[0], codes[0], "get_node_output")) < 0) return -1;
  if (nid != ge->last_executed) {
    return tvmrt_fail("InternalError",
                      "get_node_output: node %lld is not the last executed node (%lld); call "
                      "execute_node(%lld) first",
                      (long long)nid, (long long)ge->last_executed, (long long)nid);
  }
  if ((t = node_output(ge, nid, args[1], codes[1], "get_node_output")) == NULL) return -1;
  return give_copy(self, t, ret, rc);
}

/* tvmrt's profile_nodes(): run the graph once, op node by op node, each call timed (TVM's
   profile: the Python face makes its report). Bytes: an int64 count, then per timed node its
   index (int64) and the CLOCK_MONOTONIC ns before and after its call (two uint64: the call,
   and a device synchronisation when the node is on another device than the host) */
static int f_profile_nodes(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  graph_executor* ge = GE(self);
  unsigned char* blob;
  int64_t count = (int64_t)ge->num_ops;
  size_t i;
  (void)args, (void)codes;
  if (tvmrt_arity("profile_nodes", n, 0, 0) != 0 || op_table(ge) != 0) return -1;
  if (tvmrt_ge_enter(ge) != 0) return -1;
  if ((blob = give_blob(ge, sizeof(int64_t) * (1 + 3 * ge->num_ops), ret, rc)) == NULL) {
    return tvmrt_ge_leave(ge, tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate the profile"));
  }
  memcpy(blob, &count, sizeof(count));
  for (i = 0; i < ge->num_ops; ++i) {
    timed_node t;
    int64_t nid = (int64_t)ge->ops[i].nid, row[3];
    uint64_t t0, t1;
    node_timing(ge, nid, &t);
    t0 = tvmrt_now_ns();
    if (call_node(&t) != 0) {
      *rc = kTVMNullptr;
      return tvmrt_ge_leave(ge, -1);
    }
    t1 = tvmrt_now_ns();
    row[0] = nid, row[1] = (int64_t)t0, row[2] = (int64_t)t1;
    memcpy(blob + sizeof(int64_t) + i * sizeof(row), row, sizeof(row));
  }
  ge->last_executed = (int64_t)ge->g.num_nodes - 1;
  return tvmrt_ge_leave(ge, 0);
}

static int64_t node_of_name(graph_executor* ge, const char* name) {
  size_t i;
  for (i = 0; i < ge->g.num_nodes; ++i) {
    if (strcmp(ge->g.nodes[i].name, name) == 0) return (int64_t)i;
  }
  tvmrt_fail("TVMError", "cannot find a node named '%.200s' among the %zu nodes", name,
             ge->g.num_nodes);
  return -1;
}

static int f_debug_get_output(void* self, TVMValue* args, int* codes, int n, TVMValue* ret,
                              int* rc) {
  graph_executor* ge = GE(self);
  const DLTensor* t;
  DLTensor* out = NULL;
  TVMValue first;
  int64_t nid;
  if (tvmrt_arity("debug_get_output", n, 1, 2) != 0) return -1;
  nid = codes[0] == kTVMStr ? node_of_name(ge, args[0].v_str)
                            : node_arg(ge, args[0], codes[0], "debug_get_output");
  if (nid < 0) return -1;
  if (n == 2) {
    if ((codes[1] != kTVMDLTensorHandle && codes[1] != kTVMNDArrayHandle) ||
        args[1].v_handle == NULL) {
      return tvmrt_fail("ArgumentTypeError", "debug_get_output: out must be an NDArray, got %s",
                        tvmrt_py_type_name(codes[1]));
    }
    out = (DLTensor*)args[1].v_handle;
  }
  if (op_table(ge) != 0 || tvmrt_ge_enter(ge) != 0) return -1;
  if (run_nodes(ge, 0, nid) != 0) return tvmrt_ge_leave(ge, -1);
  ge->last_executed = nid;
  tvmrt_ge_leave(ge, 0);
  first.v_int64 = 0;
  if ((t = node_output(ge, nid, first, kDLInt, "debug_get_output")) == NULL) return -1;
  if (out == NULL) return give_copy(self, t, ret, rc);
  if (out->ndim != t->ndim || memcmp(out->shape, t->shape, (size_t)t->ndim * sizeof(int64_t))) {
    char want[256], got[256];
    tvmrt_ge_shape_text(out, got, sizeof(got));
    tvmrt_ge_shape_text(t, want, sizeof(want));
    return tvmrt_fail("ArrayError",
                      "debug_get_output: out has shape %s, but node %lld ('%.200s') outputs "
                      "shape %s",
                      got, (long long)nid, ge->g.nodes[nid].name, want);
  }
  return tvmrt_copy_tensor(t, out);
}

static const struct {
  const char* name;
  tvmrt_fn fn;
} k_debug_functions[] = {
    {"run_individual", f_run_individual},     {"run_individual_node", f_run_individual_node},
    {"execute_node", f_execute_node},         {"get_node_output", f_get_node_output},
    {"debug_get_output", f_debug_get_output}, {"profile_nodes", f_profile_nodes},
};

/* the debug functions first, then the executor's */
static tvmrt_func* debug_lookup(tvmrt_module* mod, const char* name) {
  size_t i;
  for (i = 0; i < sizeof(k_debug_functions) / sizeof(k_debug_functions[0]); ++i) {
    if (strcmp(k_debug_functions[i].name, name) == 0) {
      return tvmrt_func_new(k_debug_functions[i].fn, mod, &mod->hdr);
    }
  }
  return tvmrt_ge_lookup(mod, name);
}

tvmrt_module* tvmrt_graph_executor_debug_create(const char* json, size_t len, tvmrt_module* lib,
                                                const DLDevice* devs, size_t num_devs) {
  tvmrt_module* mod = tvmrt_ge_module(tvmrt_ge_create(json, len, lib, devs, num_devs));
  if (mod != NULL) mod->lookup = debug_lookup;
  return mod;
}
