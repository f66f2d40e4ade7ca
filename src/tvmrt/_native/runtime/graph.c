/*
 * Graph JSON -> tvmrt_graph, with TVM v0.19's schema (nodes, arg_nodes, node_row_ptr, heads,
 * attrs) and the cross-checks TVM leaves out (every node id, entry id and attribute length
 * is checked, so a bad graph is an error, never an out-of-bounds read).
 */
#include <stdlib.h>
#include <string.h>

#include "graph.h"
#include "json.h"

#define MAX_STORAGE_ID (1 << 24)

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
  if (v == NULL || v->type != RT_JSON_ARRAY) return bad(where, "expected an array of integers");
  *out = (uint32_t*)malloc((v->count ? v->count : 1) * sizeof(uint32_t));
  if (*out == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate %s", where);
  *n = v->count;
  for (i = 0; i < v->count; ++i) {
    if (as_u32(&v->items[i], &(*out)[i]) != 0) return bad(where, "expected unsigned integers");
  }
  return 0;
}

static int read_ref(const tvmrt_json* v, tvmrt_entry_ref* out, const char* where) {
  if (v == NULL || v->type != RT_JSON_ARRAY || v->count < 2 || v->count > 3 ||
      as_u32(&v->items[0], &out->nid) != 0 || as_u32(&v->items[1], &out->index) != 0) {
    return bad(where,
               "invalid json format: expected [node_id, index] or [node_id, index, "
               "version]");
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
static int op_int(const char* text, const char* key, size_t nid, const char* name) {
  if (decimal(text)) return 0;
  return tvmrt_fail("GraphFormatError",
                    "graph JSON: nodes[%zu] ('%.100s'): attrs['%s'] must be a decimal integer "
                    "string, got '%.40s'",
                    nid, name, key, text);
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

static int read_node(const tvmrt_json* v, tvmrt_node* node, size_t nid) {
  const tvmrt_json *op, *name, *inputs, *attrs;
  size_t i;
  static const char* known[] = {"op", "name", "inputs", "attrs", "attr", "control_deps"};
  if (v->type != RT_JSON_OBJECT) return bad("nodes", "expected a JSON object");
  for (i = 0; i < v->count; ++i) {
    size_t k;
    for (k = 0; k < sizeof(known) / sizeof(known[0]); ++k) {
      if (strcmp(v->keys[i], known[k]) == 0) break;
    }
    if (k == sizeof(known) / sizeof(known[0])) {
      return tvmrt_fail("GraphFormatError", "graph JSON, node %zu: do not support key %.100s", nid,
                        v->keys[i]);
    }
  }
  op = tvmrt_json_get(v, "op");
  name = tvmrt_json_get(v, "name");
  inputs = tvmrt_json_get(v, "inputs");
  attrs = tvmrt_json_get(v, "attrs");
  if (attrs == NULL) attrs = tvmrt_json_get(v, "attr");
  if (op == NULL || name == NULL || inputs == NULL || op->type != RT_JSON_STRING ||
      name->type != RT_JSON_STRING || inputs->type != RT_JSON_ARRAY) {
    return tvmrt_fail("GraphFormatError",
                      "graph JSON, node %zu: invalid format: needs string 'op', string 'name' "
                      "and array 'inputs'",
                      nid);
  }
  if (tvmrt_json_get(v, "control_deps") != NULL &&
      tvmrt_json_get(v, "control_deps")->type != RT_JSON_ARRAY) {
    return tvmrt_fail("GraphFormatError",
                      "graph JSON: nodes[%zu] ('%.100s') control_deps: expected a JSON array", nid,
                      name->str);
  }
  if (strcmp(op->str, "tvm_op") == 0) {
    node->is_op = 1;
  } else if (strcmp(op->str, "null") != 0) {
    return tvmrt_fail("GraphFormatError",
                      "graph JSON, node %zu: Can only take tvm_op as op, got "
                      "%.100s",
                      nid, op->str);
  }
  if ((node->name = strdup(name->str)) == NULL) return bad("nodes", "out of memory");
  if (attrs != NULL && check_attr_strings(attrs, nid, node->name) != 0) return -1;
  if (attrs != NULL) {
    const char *fn = attr_str(attrs, "func_name"), *no = attr_str(attrs, "num_outputs");
    const char *fl = attr_str(attrs, "flatten_data"), *ni = attr_str(attrs, "num_inputs");
    char* end;
    unsigned long outputs;
    if (attrs->type != RT_JSON_OBJECT || fn == NULL || no == NULL || fl == NULL || ni == NULL) {
      return tvmrt_fail("GraphFormatError",
                        "graph JSON, node %zu (%.100s): invalid format: attrs "
                        "need string func_name, num_inputs, num_outputs and flatten_data",
                        nid, node->name);
    }
    if (*fn == '\0') {
      return tvmrt_fail("GraphFormatError",
                        "graph JSON: nodes[%zu] ('%.100s'): attrs['func_name'] "
                        "is empty",
                        nid, node->name);
    }
    if (op_int(no, "num_outputs", nid, node->name) != 0 ||
        op_int(ni, "num_inputs", nid, node->name) != 0 ||
        op_int(fl, "flatten_data", nid, node->name) != 0) {
      return -1;
    }
    outputs = strtoul(no, &end, 10);
    if (outputs < 1 || outputs > 65536) {
      return tvmrt_fail("GraphFormatError",
                        "graph JSON: nodes[%zu] ('%.100s'): attrs['num_outputs'] must be at "
                        "least 1%s",
                        nid, node->name, outputs ? " and at most 65536" : "");
    }
    node->num_outputs = (uint32_t)outputs;
    node->flatten_data = strtoul(fl, NULL, 10) != 0;
    if ((node->func_name = strdup(fn)) == NULL) return bad("nodes", "out of memory");
  } else if (node->is_op) {
    return tvmrt_fail("GraphFormatError",
                      "graph JSON, node %zu (%.100s): a tvm_op node needs "
                      "attrs",
                      nid, node->name);
  } else {
    node->num_outputs = 1;
  }
  if (!node->is_op && inputs->count != 0) {
    return tvmrt_fail("GraphFormatError", "graph JSON, node %zu: a null node takes no inputs", nid);
  }
  node->num_inputs = inputs->count;
  node->inputs =
      (tvmrt_entry_ref*)calloc(inputs->count ? inputs->count : 1, sizeof(tvmrt_entry_ref));
  if (node->inputs == NULL) return bad("nodes", "out of memory");
  for (i = 0; i < inputs->count; ++i) {
    if (read_ref(&inputs->items[i], &node->inputs[i], "node inputs") != 0) return -1;
  }
  return 0;
}

/* attrs[key] = [tag, data] with the expected tag and one item per entry */
static const tvmrt_json* entry_attr(const tvmrt_json* attrs, const char* key, const char* tag,
                                    size_t n, int required) {
  const tvmrt_json* v = tvmrt_json_get(attrs, key);
  if (v == NULL) {
    if (required)
      tvmrt_fail("GraphFormatError", "graph JSON, attrs: invalid format: missing %s", key);
    return NULL;
  }
  if (v->type != RT_JSON_ARRAY || v->count != 2 || v->items[0].type != RT_JSON_STRING ||
      strcmp(v->items[0].str, tag) != 0 || v->items[1].type != RT_JSON_ARRAY ||
      v->items[1].count != n) {
    tvmrt_fail("GraphFormatError", "graph JSON, attrs: %s must be [\"%s\", [...]] with %zu items",
               key, tag, n);
    return NULL;
  }
  return &v->items[1];
}

static int read_attrs(const tvmrt_json* attrs, tvmrt_graph* g) {
  const tvmrt_json *dl, *sh, *sid, *dev, *scope;
  size_t i, n = g->num_entries;
  if (attrs == NULL || attrs->type != RT_JSON_OBJECT) return bad("attrs", "expected an object");
  for (i = 0; i < attrs->count; ++i) {
    const char* k = attrs->keys[i];
    const tvmrt_json* v = &attrs->items[i];
    if (strcmp(k, "dltype") == 0 || strcmp(k, "shape") == 0 || strcmp(k, "storage_id") == 0 ||
        strcmp(k, "device_index") == 0 || strcmp(k, "storage_scope") == 0) {
      continue;
    }
    if (v->type != RT_JSON_ARRAY || v->count != 2 || v->items[0].type != RT_JSON_STRING ||
        (strcmp(v->items[0].str, "list_int") != 0 && strcmp(v->items[0].str, "size_t") != 0)) {
      return tvmrt_fail("GraphFormatError", "graph JSON, attrs: cannot skip graph attr %.100s", k);
    }
  }
  if ((dl = entry_attr(attrs, "dltype", "list_str", n, 1)) == NULL) return -1;
  if ((sh = entry_attr(attrs, "shape", "list_shape", n, 1)) == NULL) return -1;
  if ((sid = entry_attr(attrs, "storage_id", "list_int", n, 1)) == NULL) return -1;
  dev = entry_attr(attrs, "device_index", "list_int", n, 0);
  if (dev == NULL && tvmrt_json_get(attrs, "device_index") != NULL) return -1;
  scope = entry_attr(attrs, "storage_scope", "list_str", n, 0);
  if (scope == NULL && tvmrt_json_get(attrs, "storage_scope") != NULL) return -1;
  g->dtypes = (DLDataType*)calloc(n ? n : 1, sizeof(DLDataType));
  g->ndims = (int32_t*)calloc(n ? n : 1, sizeof(int32_t));
  g->shapes = (int64_t*)calloc((n ? n : 1) * RT_MAX_NDIM, sizeof(int64_t));
  g->storage_ids = (int64_t*)calloc(n ? n : 1, sizeof(int64_t));
  if (!g->dtypes || !g->ndims || !g->shapes || !g->storage_ids)
    return bad("attrs", "out of memory");
  for (i = 0; i < n; ++i) {
    const tvmrt_json* s = &sh->items[i];
    const tvmrt_json* id = &sid->items[i];
    size_t k;
    if (dl->items[i].type != RT_JSON_STRING || tvmrt_parse_dtype(dl->items[i].str, &g->dtypes[i])) {
      return tvmrt_fail("GraphFormatError", "graph JSON, attrs: dltype[%zu] is not a dtype", i);
    }
    if (s->type != RT_JSON_ARRAY || s->count > RT_MAX_NDIM) {
      return tvmrt_fail("GraphFormatError",
                        "graph JSON, attrs: shape[%zu] must be a list of at "
                        "most %d dims",
                        i, RT_MAX_NDIM);
    }
    g->ndims[i] = (int32_t)s->count;
    for (k = 0; k < s->count; ++k) {
      const tvmrt_json* d = &s->items[k];
      if (d->type != RT_JSON_NUMBER || !d->is_int || d->i < 0) {
        return tvmrt_fail("GraphFormatError", "graph JSON, attrs: shape[%zu] has a bad dim", i);
      }
      g->shapes[i * RT_MAX_NDIM + k] = d->i;
    }
    if (id->type != RT_JSON_NUMBER || !id->is_int || id->i < 0 || id->i >= MAX_STORAGE_ID) {
      return tvmrt_fail("GraphFormatError", "graph JSON, attrs: storage_id[%zu] must be 0 to %d", i,
                        MAX_STORAGE_ID - 1);
    }
    if ((uint64_t)id->i >= 4 * (uint64_t)n + 1024) {
      return tvmrt_fail("GraphFormatError",
                        "graph JSON: attrs['storage_id']: storage id %lld is implausibly large",
                        (long long)id->i);
    }
    g->storage_ids[i] = id->i;
    if ((size_t)id->i + 1 > g->num_storage) g->num_storage = (size_t)id->i + 1;
    if (dev != NULL && (dev->items[i].type != RT_JSON_NUMBER || dev->items[i].i != kDLCPU)) {
      return tvmrt_fail("UnsupportedError",
                        "graph JSON: entry %zu is placed on device type %lld; "
                        "libtvmrt_runtime runs graphs on the CPU (device type 1) only",
                        i, (long long)dev->items[i].i);
    }
    if (scope != NULL &&
        (scope->items[i].type != RT_JSON_STRING ||
         (scope->items[i].str[0] != '\0' && strcmp(scope->items[i].str, "global") != 0))) {
      return tvmrt_fail("UnsupportedError",
                        "graph JSON: entry %zu has a storage scope other than "
                        "global; libtvmrt_runtime supports plain CPU memory only",
                        i);
    }
  }
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
    return bad("top level", "expected an object");
  }
  metadata = tvmrt_json_get(doc, "metadata");
  for (i = 0; i < doc->count && &doc->items[i] != metadata; ++i) {
    size_t k;
    for (k = 0; k < sizeof(keys) / sizeof(keys[0]); ++k) {
      if (strcmp(doc->keys[i], keys[k]) == 0) break;
    }
    if (k == sizeof(keys) / sizeof(keys[0])) {
      tvmrt_fail("GraphFormatError", "graph JSON, top level: key %.100s is not supported",
                 doc->keys[i]);
      goto fail;
    }
  }
  nodes = tvmrt_json_get(doc, "nodes");
  heads = tvmrt_json_get(doc, "heads");
  if (nodes == NULL || heads == NULL || tvmrt_json_get(doc, "arg_nodes") == NULL ||
      tvmrt_json_get(doc, "node_row_ptr") == NULL || tvmrt_json_get(doc, "attrs") == NULL ||
      nodes->type != RT_JSON_ARRAY || heads->type != RT_JSON_ARRAY) {
    bad("top level", "invalid format: needs nodes, arg_nodes, node_row_ptr, heads and attrs");
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
    bad("node_row_ptr", "must have one more item than nodes");
    goto fail;
  }
  g->heads = (tvmrt_entry_ref*)calloc(heads->count ? heads->count : 1, sizeof(tvmrt_entry_ref));
  if (g->heads == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate %zu graph heads", heads->count);
    goto fail;
  }
  g->num_heads = heads->count;
  for (i = 0; i < heads->count; ++i) {
    if (read_ref(&heads->items[i], &g->heads[i], "heads") != 0) goto fail;
  }
  if (tvmrt_graph_check_refs(g) != 0 || read_attrs(tvmrt_json_get(doc, "attrs"), g) != 0) goto fail;
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
  memset(g, 0, sizeof(*g));
}
