/*
 * The graph executor's state, shared by its core (graph_executor.c: storage, binding, run)
 * and its packed functions (graph_funcs.c).
 */
#ifndef TVMRT_NATIVE_RUNTIME_GRAPH_EXECUTOR_H_
#define TVMRT_NATIVE_RUNTIME_GRAPH_EXECUTOR_H_

#include "graph.h"
#include "rt.h"

enum { OP_KERNEL, OP_NOP, OP_COPY };

typedef struct {
  int kind;
  uint32_t nid;
  tvmrt_func* func; /* OP_KERNEL */
  TVMValue* args;
  int* codes;
  int num_args;
  DLTensor* tensors;    /* one per argument (flattened copies when flatten_data) */
  int64_t* flat_shapes; /* one dim per argument when flatten_data */
  uint32_t* eids;       /* the entry each argument views */
} tvmrt_ge_op;

typedef struct {
  tvmrt_graph g;
  tvmrt_module* lib;
  DLDevice dev; /* the first device: where entries go that no device of theirs was given for */
  DLDevice devs[TVMRT_GE_MAX_DEVICES]; /* the executor's devices (TVM's devices_) */
  size_t num_devs;
  tvmrt_ndarray** pool;  /* per storage id: 64-byte aligned memory */
  DLTensor* entries;     /* per entry: a view of its storage (data may be rebound) */
  tvmrt_object** owners; /* per entry: what keeps its data alive (NULL: the caller's memory) */
  tvmrt_ge_op* ops;
  size_t num_ops;
  tvmrt_object** shared; /* the memory of the parameters this one shares (references) */
  size_t num_shared;
  int running;              /* run in progress (another thread's run is refused) */
  unsigned char* is_param;  /* per input: loaded or shared as a param (TVM's param_names_),
                               which get_input_info leaves out */
  tvmrt_object** held;      /* per input, then per output: the runtime array a zero-copy binding
                               views (a reference, so the memory outlives the caller's handle) */
  unsigned char* read_only; /* per input: bound zero-copy to memory its caller said is read-only
                               (set_input_zero_copy's third argument, tvmrt's), which set_input
                               and load_params refuse to write */
  /* the debug executor's (graph_debug.c) */
  int64_t last_executed; /* the node execute_node continues from (-1: none); run sets it */
  int32_t* op_of;        /* per node: its op's index, -1 for an input (made on first use) */
  unsigned char* blob;   /* the bytes run_individual* last returned, kept until the next */
  TVMByteArray blob_ref;
} graph_executor;

/* graph_executor.c: create (over num_devs devices, the first the fallback), destroy, run,
   rebind */
graph_executor* tvmrt_ge_create(const char* json, size_t len, tvmrt_module* lib,
                                const DLDevice* devs, size_t num_devs);
void tvmrt_ge_destroy(graph_executor* ge);
int tvmrt_ge_run(graph_executor* ge);
/* mark a run in progress: 0, or -1 with the Python runtime's error when another thread's
   is (one executor runs in one thread at a time); tvmrt_ge_leave ends it, returning `status` */
int tvmrt_ge_enter(graph_executor* ge);
int tvmrt_ge_leave(graph_executor* ge, int status);
/* op `i` alone (ops are in node order, one per op node), with the run's words on failure */
int tvmrt_ge_run_op(graph_executor* ge, size_t i);
/* after rebinding entries: point the kernel args at them */
void tvmrt_ge_refresh(graph_executor* ge);
/* zero copy: rebind entry `eid` (and, for inputs, every entry sharing its storage) to a
   checked `ext`, whose memory `owner` keeps alive (NULL: the caller's) */
int tvmrt_ge_rebind(graph_executor* ge, uint32_t eid, const DLTensor* ext, int share_storage,
                    tvmrt_object* owner);

/* graph_arrays.c: keys, texts, array checks, params */
int tvmrt_ge_input_index(const graph_executor* ge, const char* name); /* -1 if none (last wins) */
uint32_t tvmrt_ge_input_eid(const graph_executor* ge, size_t index);
uint32_t tvmrt_ge_output_eid(const graph_executor* ge, size_t index);
/* TVM's and Python's text of a shape: (1, 3, 16, 16) (dtypes: tvmrt_dtype_text, rt.h) */
void tvmrt_ge_shape_text(const DLTensor* t, char* buf, size_t n);
int tvmrt_ge_same_layout(const DLTensor* a, const DLTensor* b); /* shape and dtype */
/* why `ext` cannot stand in for entry `want` (the Python runtime's check_external, its
   words, `label` first): -1 with an ArrayError set, or 0 if it can */
int tvmrt_ge_external_problem(const DLTensor* want, const DLTensor* ext, const char* label);
/* 0 if input `idx` may be written (set_input, load_params), else -1 with the Python runtime's
   words: it is bound zero-copy to memory its caller said is read-only */
int tvmrt_ge_writable_input(const graph_executor* ge, size_t idx);

/* graph_funcs.c: the module's functions, and the module over `ge` (which it then owns);
   graph_debug.c's module looks its own functions up first */
tvmrt_func* tvmrt_ge_lookup(tvmrt_module* mod, const char* name);
tvmrt_module* tvmrt_ge_module(graph_executor* ge);

#endif /* TVMRT_NATIVE_RUNTIME_GRAPH_EXECUTOR_H_ */
