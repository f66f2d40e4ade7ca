/*
 * The attrs tables of a graph JSON (dltype, shape, storage_id, device_index, storage_scope),
 * each checked row by row with the Python runtime's words (runtime/graph_executor/
 * graph_attrs.py); libtvmrt_runtime places every entry on one device (the CPU or a CUDA
 * GPU) in global memory.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"

#define MAX_STORAGE_ID (1 << 24)

/* the Python runtime's as_int words: "expected an integer[ >= 0], got ..." */
int tvmrt_graph_not_index(const char* where, size_t i, const tvmrt_json* v) {
  if (v->type == RT_JSON_NUMBER && v->is_int && v->i < 0) {
    return tvmrt_fail("GraphFormatError", "graph JSON: %s[%zu]: expected an integer >= 0, got %lld",
                      where, i, (long long)v->i);
  }
  return tvmrt_fail("GraphFormatError", "graph JSON: %s[%zu]: expected an integer", where, i);
}

/* attrs[key] = [tag, data] with the expected tag and one item per entry */
static const tvmrt_json* entry_attr(const tvmrt_json* attrs, const char* key, const char* tag,
                                    size_t n, int required) {
  const tvmrt_json* v = tvmrt_json_get(attrs, key);
  if (v == NULL) {
    if (required) {
      tvmrt_fail("GraphFormatError", "graph JSON: attrs: missing required table '%s'", key);
    }
    return NULL;
  }
  if (v->type != RT_JSON_ARRAY || v->count != 2 || v->items[0].type != RT_JSON_STRING ||
      strcmp(v->items[0].str, tag) != 0 || v->items[1].type != RT_JSON_ARRAY) {
    tvmrt_fail("GraphFormatError", "graph JSON: attrs['%s']: expected ['%s', [...]]", key, tag);
    return NULL;
  }
  if (v->items[1].count != n) {
    tvmrt_fail("GraphFormatError",
               "graph JSON: attrs['%s']: has %zu items but the graph has %zu entries", key,
               v->items[1].count, n);
    return NULL;
  }
  return &v->items[1];
}

int tvmrt_graph_read_attrs(const tvmrt_json* attrs, tvmrt_graph* g) {
  const tvmrt_json *dl, *sh, *sid, *dev, *scope;
  size_t i, n = g->num_entries;
  if (attrs->type != RT_JSON_OBJECT) {
    return tvmrt_fail("GraphFormatError", "graph JSON: attrs: expected an object");
  }
  for (i = 0; i < attrs->count; ++i) {
    const char* k = attrs->keys[i];
    const tvmrt_json* v = &attrs->items[i];
    if (strcmp(k, "dltype") == 0 || strcmp(k, "shape") == 0 || strcmp(k, "storage_id") == 0 ||
        strcmp(k, "device_index") == 0 || strcmp(k, "storage_scope") == 0) {
      continue;
    }
    if (v->type != RT_JSON_ARRAY || v->count != 2 || v->items[0].type != RT_JSON_STRING ||
        (strcmp(v->items[0].str, "list_int") != 0 && strcmp(v->items[0].str, "size_t") != 0)) {
      return tvmrt_fail(
          "GraphFormatError",
          "graph JSON: attrs: cannot skip graph attr '%.100s' with type tag %s%.40s%s", k,
          v->type == RT_JSON_ARRAY && v->count > 0 && v->items[0].type == RT_JSON_STRING ? "'" : "",
          v->type == RT_JSON_ARRAY && v->count > 0 && v->items[0].type == RT_JSON_STRING
              ? v->items[0].str
              : "None",
          v->type == RT_JSON_ARRAY && v->count > 0 && v->items[0].type == RT_JSON_STRING ? "'"
                                                                                         : "");
    }
  }
  if ((sh = entry_attr(attrs, "shape", "list_shape", n, 1)) == NULL) return -1;
  if ((dl = entry_attr(attrs, "dltype", "list_str", n, 1)) == NULL) return -1;
  if ((sid = entry_attr(attrs, "storage_id", "list_int", n, 1)) == NULL) return -1;
  dev = entry_attr(attrs, "device_index", "list_int", n, 0);
  if (dev == NULL && tvmrt_json_get(attrs, "device_index") != NULL) return -1;
  scope = entry_attr(attrs, "storage_scope", "list_str", n, 0);
  if (scope == NULL && tvmrt_json_get(attrs, "storage_scope") != NULL) return -1;
  g->dtypes = (DLDataType*)calloc(n ? n : 1, sizeof(DLDataType));
  g->ndims = (int32_t*)calloc(n ? n : 1, sizeof(int32_t));
  g->shapes = (int64_t*)calloc((n ? n : 1) * RT_MAX_NDIM, sizeof(int64_t));
  g->storage_ids = (int64_t*)calloc(n ? n : 1, sizeof(int64_t));
  if (dev != NULL) g->device_types = (int32_t*)calloc(n ? n : 1, sizeof(int32_t));
  if (!g->dtypes || !g->ndims || !g->shapes || !g->storage_ids || (dev && !g->device_types))
    return tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate the attrs tables");
  for (i = 0; i < n; ++i) {
    const tvmrt_json* s = &sh->items[i];
    const tvmrt_json* id = &sid->items[i];
    size_t k;
    if (dl->items[i].type != RT_JSON_STRING || tvmrt_parse_dtype(dl->items[i].str, &g->dtypes[i])) {
      return tvmrt_fail("GraphFormatError",
                        "graph JSON: attrs['dltype'][%zu]: unknown type '%.64s'; expected e.g. "
                        "'float32', 'int8', 'uint1', 'bool', 'bfloat16' or 'float32x4'",
                        i, dl->items[i].type == RT_JSON_STRING ? dl->items[i].str : "?");
    }
    if (s->type != RT_JSON_ARRAY || s->count > RT_MAX_NDIM) {
      return tvmrt_fail("GraphFormatError",
                        s->type != RT_JSON_ARRAY
                            ? "graph JSON: attrs['shape'][%zu]: expected a JSON array"
                            : "graph JSON: attrs['shape'][%zu]: has %zu dims, at most %d",
                        i, s->count, RT_MAX_NDIM);
    }
    g->ndims[i] = (int32_t)s->count;
    for (k = 0; k < s->count; ++k) {
      const tvmrt_json* d = &s->items[k];
      if (d->type != RT_JSON_NUMBER || !d->is_int || d->i < 0) {
        return tvmrt_fail(
            "GraphFormatError",
            d->type == RT_JSON_NUMBER && d->is_int
                ? "graph JSON: attrs['shape'][%zu]: expected an integer >= 0, got %lld"
                : "graph JSON: attrs['shape'][%zu]: expected an integer",
            i, (long long)d->i);
      }
      g->shapes[i * RT_MAX_NDIM + k] = d->i;
    }
    if (id->type != RT_JSON_NUMBER || !id->is_int || id->i < 0) {
      return tvmrt_graph_not_index("attrs['storage_id']", i, id);
    }
    if ((uint64_t)id->i >= 4 * (uint64_t)n + 1024 || id->i >= MAX_STORAGE_ID) {
      return tvmrt_fail("GraphFormatError",
                        "graph JSON: attrs['storage_id']: storage id %lld is implausibly large",
                        (long long)id->i);
    }
    g->storage_ids[i] = id->i;
    if ((size_t)id->i + 1 > g->num_storage) g->num_storage = (size_t)id->i + 1;
    /* a device type >= 1 (the Python plan's check); one the executor was given no device
       of runs on its first device, as TVM's SetupStorage */
    if (dev != NULL && (dev->items[i].type != RT_JSON_NUMBER || !dev->items[i].is_int)) {
      return tvmrt_graph_not_index("attrs['device_index']", i, &dev->items[i]);
    }
    if (dev != NULL && (dev->items[i].i < 1 || dev->items[i].i > INT32_MAX)) {
      return tvmrt_fail("GraphFormatError",
                        "graph JSON: attrs['device_index'][%zu]: expected an integer >= 1, got "
                        "%lld",
                        i, (long long)dev->items[i].i);
    }
    if (dev != NULL) g->device_types[i] = (int32_t)dev->items[i].i;
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
