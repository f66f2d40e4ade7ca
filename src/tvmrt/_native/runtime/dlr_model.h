/*
 * DLR 1.10's C API over the C runtime's graph executor (libdlr.so only; sources.txt's `dlr`
 * lines), the rules of tvmrt.dlr (src/tvmrt/dlr/) in C:
 *   dlr_files.c  a Neo folder's files by suffix, the backend, files read whole, compiled.meta,
 *                the API's index check
 *   dlr_model.c  a model: the executor, its params, inputs less weights, the meta
 *   dlr_api.c    dlr.h's functions: create, delete, run, settings
 *   dlr_io.c     dlr.h's functions: inputs (and the helpers dlr_out.c shares)
 *   dlr_out.c    dlr.h's functions: outputs, output names
 *   dlr_vm.c     a Relay VM model (code.ro + the library + the meta) on the runtime's VM
 * Errors are the runtime's (tvmrt_fail), DLR's own words under the kind "DLRError".
 */
#ifndef TVMRT_NATIVE_RUNTIME_DLR_MODEL_H_
#define TVMRT_NATIVE_RUNTIME_DLR_MODEL_H_

#include <stddef.h>
#include <stdint.h>

#include "graph_executor.h"
#include "json.h"
#include "rt.h"

#define DLR_MAGIC 0x444c5231u /* "DLR1": a live model (tvmrt_object_live) */

/* -- dlr_files.c ------------------------------------------------------------------------ */

/* the files DLR's InitModelPath picks by suffix (NULL: none) */
typedef struct {
  char* model_json;
  char* model_lib;
  char* params;
  char* metadata;
  char* relay_executable;
} dlr_paths;

typedef struct {
  char** names;
  size_t count;
} dlr_list;

/* every file of the folders and files of model_path (colon-separated, empty parts skipped),
   each folder's names sorted; a part that does not exist is an error */
int dlr_find_files(const char* model_path, dlr_list* out);
void dlr_list_free(dlr_list* list);
/* DLR's backend: "tvm" (a .params) or "relayvm" (a .ro), or -1 naming the one tvmrt lacks */
int dlr_backend(const dlr_list* files, const char* model_path, const char** backend);
/* DLR's InitModelPath: one file per role ("Found multiple *.json files: a b") */
int dlr_pick(const dlr_list* files, dlr_paths* out);
void dlr_paths_free(dlr_paths* p);
/* 0 if path is a regular file of at most RT_MAX_LIBRARY_BYTES, else -1 with an error naming
   `role` (never blocks) */
int dlr_regular_file(const char* path, const char* role);
/* the kinds of file a model reads, each with its size bound (and magic) */
typedef enum { DLR_META, DLR_GRAPH, DLR_PARAMS, DLR_CODE } dlr_file_kind;
/* a regular file's bytes, NUL-terminated (free with free), within its kind's bound; `role`
   names it in errors */
int dlr_read_file(const char* path, const char* role, dlr_file_kind kind, char** data,
                  size_t* size);
/* compiled.meta's text as JSON, or *meta NULL and *problem saying why (DLR ignores a meta
   that does not parse); never fails but on memory */
int dlr_meta_parse(const char* text, size_t len, const char* where, tvmrt_json** meta,
                   char** problem);
/* DLR's ValidateDeviceTypeIfExists: the meta's Requirements.TargetDeviceType against dev_type */
int dlr_check_device(const tvmrt_json* meta, int dev_type);
/* index in [0, count), or -1 with an error naming `what` and `fn` */
int dlr_check_index(int index, size_t count, const char* what, const char* fn);
/* Requirements.TargetDeviceType as DLPack's type (1 cpu, 2 gpu, 4 opencl, 12 other), or 0 */
int dlr_meta_device(const tvmrt_json* meta);

/* -- dlr_model.c ------------------------------------------------------------------------ */

typedef struct dlr_vm dlr_vm;

typedef struct {
  tvmrt_object hdr; /* DLR_MAGIC */
  dlr_vm* vm;       /* a Relay VM model (dlr_vm.c; the fields below unused), or NULL */
  tvmrt_module* executor;
  graph_executor* ge;
  tvmrt_json* meta;      /* NULL: no compiled.meta (or one that does not parse) */
  char* meta_problem;    /* why a meta given did not parse, or NULL */
  char** weights;        /* the params' names, in DLR 1.10's order (TVM's Map: map_order.c) */
  char** sorted_weights; /* the same strings, sorted: looked up by bsearch */
  size_t num_weights;
  uint32_t* inputs; /* per DLR input: its index among the graph's inputs */
  size_t num_inputs;
  char (*input_types)[40];
  char (*output_types)[40];
} dlr_model;

/* what a TVM model is made of (from files or from memory) */
typedef struct {
  const char* graph; /* graph JSON text */
  size_t graph_len;
  const char* params; /* a params blob */
  size_t params_len;
  const char* code; /* a Relay VM's code.ro, or NULL: a graph model */
  size_t code_len;
  const char* lib_path; /* the kernels' library */
  const char* meta;     /* compiled.meta's text, or NULL */
  size_t meta_len;
  const char* meta_where; /* its name in messages */
} dlr_parts;

/* the meta's device check and DataTransform refusal, then the executor over the parts */
int dlr_model_create(const dlr_parts* parts, DLDevice dev, dlr_model** out);
/* the model behind a DLRModelHandle* (NULL with an error naming `fn`: none, or not live) */
dlr_model* dlr_model_of(void** handle, const char* fn);
/* call the executor's packed function `fn` */
int dlr_model_call(dlr_model* m, const char* fn, TVMValue* args, int* codes, int n);
/* Model.Outputs[index].name of the meta */
int dlr_model_output_name(const dlr_model* m, int index, const char** name);

/* -- dlr_io.c --------------------------------------------------------------------------- */

int64_t dlr_count_dims(const int64_t* shape, int ndim); /* -1 if a dimension is */
/* the executor's `fn` with (index, tensor) */
int dlr_call2(dlr_model* m, const char* fn, int index, DLTensor* t);
/* a caller's DLTensor: a shape (ndim 0 to 32, sizes >= 0) and data unless empty */
int dlr_check_tensor(const DLTensor* t, const char* fn);
/* the entry's layout over the caller's CPU memory */
DLTensor dlr_over(const DLTensor* entry, void* data);

/* -- dlr_vm.c --------------------------------------------------------------------------- */

/* m->vm over parts (code, lib_path; m->meta is required) */
int dlr_vm_create(dlr_model* m, const dlr_parts* parts, DLDevice dev);
void dlr_vm_free(dlr_vm* vm);
size_t dlr_vm_num_inputs(const dlr_vm* vm);
size_t dlr_vm_num_outputs(const dlr_vm* vm);
/* input `index`: main's parameter name, the meta's dtype and shape (-1: any size) */
int dlr_vm_input(const dlr_vm* vm, int index, const char* fn, const char** name, const char** type,
                 const int64_t** shape, int* dim);
/* the input's dtype (the meta's), or -1 for an unknown input or dtype */
int dlr_vm_input_dtype(const dlr_vm* vm, const char* name, DLDataType* dtype);
/* input `name` := a copy of src (an array of src's shape and dtype) */
int dlr_vm_set_input(dlr_vm* vm, const char* name, const DLTensor* src);
const DLTensor* dlr_vm_input_value(const dlr_vm* vm, const char* name); /* NULL: not set */
int dlr_vm_run(dlr_vm* vm);
/* output `index`: the meta's dtype; the last run's shape (the meta's before a run) */
int dlr_vm_output(const dlr_vm* vm, int index, const char* fn, const char** type,
                  const int64_t** shape, int* dim);
/* the last run's output `index` (borrowed), or NULL with an error (no run yet) */
tvmrt_ndarray* dlr_vm_output_value(const dlr_vm* vm, int index, const char* fn);

/* the API functions' prologues: a pointer argument that must not be NULL; the live model */
#define CHECK_PTR(p, what)                                                                         \
  if ((p) == NULL) return tvmrt_fail("InvalidArgumentError", "%s: %s is NULL", __func__, what)
#define MODEL(m)                                                                                   \
  dlr_model* m = dlr_model_of((void**)handle, __func__);                                           \
  if (m == NULL) return -1

#endif /* TVMRT_NATIVE_RUNTIME_DLR_MODEL_H_ */
