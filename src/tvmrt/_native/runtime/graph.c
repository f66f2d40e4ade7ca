/*
 * Graph JSON -> tvmrt_graph, with TVM v0.19's schema (nodes, arg_nodes, node_row_ptr, heads,
 * attrs) and the cross-checks TVM leaves out (every node id, entry id and attribute length
 * is checked, so a bad graph is an error, never an out-of-bounds read).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"
#include "json.h"

static int bad(const char* where, const char* msg) {
  return tvmrt_fail("GraphFormatError", "graph JSON, %s: %s", where, msg);
}

static int as_u32(const tvmrt_json* v, uint32_t* out) {
  if (v == NULL || v->type != RT_JSON_NUMBER || !v->is_int || v->i < 0 || v->i > UINT32_MAX) {
    return -1;
  }
  *out = (uint32_t)v->i;
  return 0;
}

static int read_u32_list(const tvmrt_json* v, const char* where, uint32_t** out, size_t* n) {
  size_t i;
  if (v->type != RT_JSON_ARRAY) {
    return tvmrt_fail("GraphFormatError", "graph JSON: %s: expected a JSON array", where);
  }
  *out = (uint32_t*)malloc((v->count ? v->count : 1) * sizeof(uint32_t));
  if (*out == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate %s", where);
  *n = v->count;
  for (i = 0; i < v->count; ++i) {
    if (as_u32(&v->items[i], &(*out)[i]) != 0) return tvmrt_graph_not_index(where, i, &v->items[i]);
  }
  return 0;
}

static int read_ref(const tvmrt_json* v, tvmrt_entry_ref* out, const char* where) {
  if (v == NULL || v->type != RT_JSON_ARRAY || v->count < 2 || v->count > 3 ||
      as_u32(&v->items[0], &out->nid) != 0 || as_u32(&v->items[1], &out->index) != 0) {
    return tvmrt_fail("GraphFormatError",
                      "graph JSON: %s: expected [node_id, index] or [node_id, index, version]",
                      where);
  }
  return 0;
}

static const char* attr_str(const tvmrt_json* attrs, const char* key) {
  const tvmrt_json* v = tvmrt_json_get(attrs, key);
  return v != NULL && v->type == RT_JSON_STRING ? v->str : NULL;
}

/* a decimal integer >= 0 (what the Python runtime's int() of the text accepts, less its
   spaces, sign and underscores) */
static int decimal(const char* s) {
  size_t i;
  for (i = 0; s[i] != '\0'; ++i) {
    if (s[i] < '0' || s[i] > '9') return 0;
  }
  return i > 0 && i < 10;
}

/* the Python runtime's _parse_op_int words */
static int op_int(const char* text, const char* key, const char* where) {
  if (decimal(text)) return 0;
  return tvmrt_fail("GraphFormatError",
                    "graph JSON: %s: attrs['%s'] must be a decimal integer string, got '%.40s'",
                    where, key, text);
}

static int check_attr_strings(const tvmrt_json* attrs, size_t nid, const char* name) {
  size_t i;
  if (attrs->type != RT_JSON_OBJECT) {
    return tvmrt_fail("GraphFormatError",
                      "graph JSON: nodes[%zu] ('%.100s'): 'attrs' must be an "
                      "object",
                      nid, name);
  }
  for (i = 0; i < attrs->count; ++i) {
    if (attrs->items[i].type != RT_JSON_STRING) {
      return tvmrt_fail("GraphFormatError",
                        "graph JSON: nodes[%zu] ('%.100s'): attrs['%.100s'] must be a string", nid,
                        name, attrs->keys[i]);
    }
  }
  return 0;
}

#define OP_ATTRS "['func_name', 'num_inputs', 'num_outputs', 'flatten_data']"

/* one node, in the order and words of the Python runtime's graph._parse_node */
static int read_node(const tvmrt_json* v, tvmrt_node* node, size_t nid) {
  const tvmrt_json *op, *name, *inputs, *attrs, *deps;
  const char *fn, *no, *ni, *fl;
  char where[160];
  size_t i;
  static const char* known[] = {"op", "name", "inputs", "attrs", "attr", "control_deps"};
  static const char* required[] = {"op", "name", "inputs"};
  if (v->type != RT_JSON_OBJECT) {
    return tvmrt_fail("GraphFormatError", "graph JSON: nodes[%zu]: expected a JSON object", nid);
  }
  for (i = 0; i < v->count; ++i) {
    size_t k;
    for (k = 0; k < sizeof(known) / sizeof(known[0]); ++k) {
      if (strcmp(v->keys[i], known[k]) == 0) break;
    }
    if (k == sizeof(known) / sizeof(known[0])) {
      return tvmrt_fail("GraphFormatError",
                        "graph JSON: nodes[%zu]: do not support key '%.100s'; node keys are "
                        "['attr', 'attrs', 'control_deps', 'inputs', 'name', 'op']",
                        nid, v->keys[i]);
    }
  }
  for (i = 0; i < 3; ++i) {
    if (tvmrt_json_get(v, required[i]) == NULL) {
      return tvmrt_fail("GraphFormatError", "graph JSON: nodes[%zu]: missing required key '%s'",
                        nid, required[i]);
    }
  }
  op = tvmrt_json_get(v, "op");
  name = tvmrt_json_get(v, "name");
  inputs = tvmrt_json_get(v, "inputs");
  deps = tvmrt_json_get(v, "control_deps");
  attrs = tvmrt_json_get(v, "attrs");
  if (attrs == NULL) attrs = tvmrt_json_get(v, "attr");
  if (name->type != RT_JSON_STRING) {
    return tvmrt_fail("GraphFormatError", "graph JSON: nodes[%zu]: 'name' must be a string", nid);
  }
  if ((node->name = strdup(name->str)) == NULL) return bad("nodes", "out of memory");
  snprintf(where, sizeof(where), "nodes[%zu] ('%.100s')", nid, node->name);
  if (op->type != RT_JSON_STRING ||
      (strcmp(op->str, "tvm_op") != 0 && strcmp(op->str, "null") != 0)) {
    return tvmrt_fail("GraphFormatError",
                      "graph JSON: %s: op must be 'null' or 'tvm_op', got %s%.100s%s", where,
                      op->type == RT_JSON_STRING ? "'" : "",
                      op->type == RT_JSON_STRING ? op->str : "a non-string",
                      op->type == RT_JSON_STRING ? "'" : "");
  }
  node->is_op = strcmp(op->str, "tvm_op") == 0;
  if (inputs->type != RT_JSON_ARRAY) {
    return tvmrt_fail("GraphFormatError", "graph JSON: %s inputs: expected a JSON array", where);
  }
  node->num_inputs = inputs->count;
  node->inputs =
      (tvmrt_entry_ref*)calloc(inputs->count ? inputs->count : 1, sizeof(tvmrt_entry_ref));
  if (node->inputs == NULL) return bad("nodes", "out of memory");
  for (i = 0; i < inputs->count; ++i) {
    char at[200];
    snprintf(at, sizeof(at), "%s inputs[%zu]", where, i);
    if (read_ref(&inputs->items[i], &node->inputs[i], at) != 0) return -1;
  }
  if (deps != NULL && deps->type != RT_JSON_ARRAY) {
    return tvmrt_fail("GraphFormatError", "graph JSON: %s control_deps: expected a JSON array",
                      where);
  }
  node->num_outputs = 1;
  if (attrs == NULL && node->is_op) {
    return tvmrt_fail("GraphFormatError",
                      "graph JSON: %s: a tvm_op node needs 'attrs' with " OP_ATTRS, where);
  }
  if (attrs != NULL && check_attr_strings(attrs, nid, node->name) != 0) return -1;
  if (!node->is_op) {
    if (inputs->count != 0) {
      return tvmrt_fail("GraphFormatError", "graph JSON: %s: a null node takes no inputs", where);
    }
    return 0;
  }
  fn = attr_str(attrs, "func_name");
  no = attr_str(attrs, "num_outputs");
  ni = attr_str(attrs, "num_inputs");
  fl = attr_str(attrs, "flatten_data");
  if (fn == NULL || ni == NULL || no == NULL || fl == NULL) {
    char missing[100] = "";
    const char* keys[4] = {"func_name", "num_inputs", "num_outputs", "flatten_data"};
    const char* vals[4];
    size_t k, off = 0;
    vals[0] = fn;
    vals[1] = ni;
    vals[2] = no;
    vals[3] = fl;
    for (k = 0; k < 4; ++k) {
      if (vals[k] != NULL) continue;
      off += (size_t)snprintf(missing + off, sizeof(missing) - off, "%s'%s'", off ? ", " : "",
                              keys[k]);
    }
    return tvmrt_fail("GraphFormatError",
                      "graph JSON: %s: attrs misses [%s]; a tvm_op needs " OP_ATTRS, where,
                      missing);
  }
  if (*fn == '\0') {
    return tvmrt_fail("GraphFormatError", "graph JSON: %s: attrs['func_name'] is empty", where);
  }
  if (op_int(no, "num_outputs", where) != 0) return -1;
  node->num_outputs = (uint32_t)strtoul(no, NULL, 10);
  if (node->num_outputs < 1 || node->num_outputs > 65536) {
    return tvmrt_fail("GraphFormatError",
                      "graph JSON: %s: attrs['num_outputs'] must be at least 1%s", where,
                      node->num_outputs ? " and at most 65536" : "");
  }
  if (op_int(ni, "num_inputs", where) != 0 || op_int(fl, "flatten_data", where) != 0) return -1;
  node->flatten_data = strtoul(fl, NULL, 10) != 0;
  if ((node->func_name = strdup(fn)) == NULL) return bad("nodes", "out of memory");
  return 0;
}

int tvmrt_graph_parse(const char* json, size_t len, tvmrt_graph* g) {
  tvmrt_json* doc = NULL;
  const tvmrt_json *nodes, *heads, *metadata;
  size_t i, nrow = 0;
  static const char* keys[] = {"nodes", "arg_nodes", "node_row_ptr", "heads", "attrs", "metadata"};
  memset(g, 0, sizeof(*g));
  if (tvmrt_json_parse(json, len, &doc) != 0) return -1;
  if (doc->type != RT_JSON_OBJECT) {
    tvmrt_json_free(doc);
    return tvmrt_fail("GraphFormatError", "graph JSON: top level: expected an object");
  }
  metadata = tvmrt_json_get(doc, "metadata");
  for (i = 0; i < doc->count && &doc->items[i] != metadata; ++i) {
    size_t k;
    for (k = 0; k < sizeof(keys) / sizeof(keys[0]); ++k) {
      if (strcmp(doc->keys[i], keys[k]) == 0) break;
    }
    if (k == sizeof(keys) / sizeof(keys[0])) {
      tvmrt_fail("GraphFormatError",
                 "graph JSON: top level: key '%.100s' is not supported; keys are ['arg_nodes', "
                 "'attrs', 'heads', 'metadata', 'node_row_ptr', 'nodes']",
                 doc->keys[i]);
      goto fail;
    }
  }
  for (i = 0; i < 5; ++i) { /* node_row_ptr: optional in the Python runtime, needed here */
    static const char* required[] = {"nodes", "arg_nodes", "heads", "attrs", "node_row_ptr"};
    if (tvmrt_json_get(doc, required[i]) == NULL) {
      tvmrt_fail("GraphFormatError", "graph JSON: top level: missing required key '%s'",
                 required[i]);
      goto fail;
    }
  }
  nodes = tvmrt_json_get(doc, "nodes");
  heads = tvmrt_json_get(doc, "heads");
  if (nodes->type != RT_JSON_ARRAY || heads->type != RT_JSON_ARRAY) {
    tvmrt_fail("GraphFormatError", "graph JSON: %s: expected a JSON array",
               nodes->type != RT_JSON_ARRAY ? "nodes" : "heads");
    goto fail;
  }
  if (nodes->count > RT_MAX_NODES) {
    bad("nodes", "too many nodes");
    goto fail;
  }
  g->nodes = (tvmrt_node*)calloc(nodes->count ? nodes->count : 1, sizeof(tvmrt_node));
  if (g->nodes == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate %zu graph nodes", nodes->count);
    goto fail;
  }
  g->num_nodes = nodes->count;
  for (i = 0; i < nodes->count; ++i) {
    if (read_node(&nodes->items[i], &g->nodes[i], i) != 0) goto fail;
  }
  if (read_u32_list(tvmrt_json_get(doc, "arg_nodes"), "arg_nodes", &g->arg_nodes, &g->num_args) ||
      read_u32_list(tvmrt_json_get(doc, "node_row_ptr"), "node_row_ptr", &g->row_ptr, &nrow)) {
    goto fail;
  }
  if (nrow != g->num_nodes + 1) {
    tvmrt_fail("GraphFormatError",
               "graph JSON: node_row_ptr: has %zu items, expected %zu (nodes + 1)", nrow,
               g->num_nodes + 1);
    goto fail;
  }
  g->heads = (tvmrt_entry_ref*)calloc(heads->count ? heads->count : 1, sizeof(tvmrt_entry_ref));
  if (g->heads == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate %zu graph heads", heads->count);
    goto fail;
  }
  g->num_heads = heads->count;
  for (i = 0; i < heads->count; ++i) {
    char at[40];
    snprintf(at, sizeof(at), "heads[%zu]", i);
    if (read_ref(&heads->items[i], &g->heads[i], at) != 0) goto fail;
  }
  if (tvmrt_graph_check_refs(g) != 0 ||
      tvmrt_graph_read_attrs(tvmrt_json_get(doc, "attrs"), g) != 0)
    goto fail;
  tvmrt_json_free(doc);
  return 0;
fail:
  tvmrt_json_free(doc);
  tvmrt_graph_free(g);
  return -1;
}

void tvmrt_graph_free(tvmrt_graph* g) {
  size_t i;
  for (i = 0; i < g->num_nodes; ++i) {
    free(g->nodes[i].name);
    free(g->nodes[i].func_name);
    free(g->nodes[i].inputs);
  }
  free(g->nodes);
  free(g->arg_nodes);
  free(g->row_ptr);
  free(g->heads);
  free(g->dtypes);
  free(g->ndims);
  free(g->shapes);
  free(g->storage_ids);
  free(g->device_types);
  memset(g, 0, sizeof(*g));
}
