/*
 * The graph of a graph-executor JSON, read and checked (graph.c): every index the
 * executor follows is in range once tvmrt_graph_parse succeeds.
 */
#ifndef TVMRT_NATIVE_RUNTIME_GRAPH_H_
#define TVMRT_NATIVE_RUNTIME_GRAPH_H_

#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "rt.h"

typedef struct {
  uint32_t nid, index;
} tvmrt_entry_ref;

typedef struct {
  int is_op; /* "tvm_op" (1) or "null" (0) */
  char* name;
  char* func_name; /* tvm_op only */
  uint32_t num_outputs;
  int flatten_data;
  tvmrt_entry_ref* inputs;
  size_t num_inputs;
} tvmrt_node;

typedef struct {
  tvmrt_node* nodes;
  size_t num_nodes;
  uint32_t* arg_nodes;
  size_t num_args;
  uint32_t* row_ptr; /* num_nodes + 1 */
  tvmrt_entry_ref* heads;
  size_t num_heads;
  size_t num_entries;
  DLDataType* dtypes; /* per entry */
  int32_t* ndims;
  int64_t* shapes; /* per entry: RT_MAX_NDIM slots */
  int64_t* storage_ids;
  size_t num_storage;    /* max storage id + 1 */
  int32_t* device_types; /* per entry: its device_index (NULL: the graph gives none) */
} tvmrt_graph;

int tvmrt_graph_parse(const char* json, size_t len, tvmrt_graph* out);
void tvmrt_graph_free(tvmrt_graph* g);
/* graph_attrs.c: the attrs tables into g (dtypes, ndims, shapes, storage_ids, num_storage) */
int tvmrt_graph_read_attrs(const tvmrt_json* attrs, tvmrt_graph* g);
/* the error for item i of `where` that is not an integer >= 0 */
int tvmrt_graph_not_index(const char* where, size_t i, const tvmrt_json* v);
/* graph_checks.c: every node id and entry id in range, input names unique, every null node
   in arg_nodes (tvmrt_graph_parse calls it); the storage plan (no input's pool written by a
   kernel or shared with another input, no two live entries in one pool) */
int tvmrt_graph_check_refs(tvmrt_graph* g);
int tvmrt_graph_check_plan(const tvmrt_graph* g);

static inline uint32_t tvmrt_graph_eid(const tvmrt_graph* g, uint32_t nid, uint32_t index) {
  return g->row_ptr[nid] + index;
}

#endif /* TVMRT_NATIVE_RUNTIME_GRAPH_H_ */
