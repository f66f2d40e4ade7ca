/*
 * A DLR model (a Relay VM one: dlr_vm.c) of the TVM backend (dlr_tvm.cc's TVMModel;
 * tvmrt/dlr/_backends.py's TVMBackend): the meta's device check, the graph executor over the
 * kernels' library, the params loaded, the weights (the params' names, in the order DLR 1.10 lists
 * them: that of TVM's Map it reads the params into, see map_order.c), and the inputs: the graph's
 * inputs less the weights, in graph order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlr_model.h"

static void model_destroy(tvmrt_object* obj) {
  dlr_model* m = (dlr_model*)obj;
  size_t i;
  dlr_vm_free(m->vm);
  if (m->executor) tvmrt_release(&m->executor->hdr);
  tvmrt_json_free(m->meta);
  free(m->meta_problem);
  for (i = 0; i < m->num_weights; ++i) free(m->weights[i]);
  free(m->weights);
  free(m->sorted_weights);
  free(m->inputs);
  free(m->input_types);
  free(m->output_types);
  free(m);
}

static int by_name(const void* a, const void* b) {
  return strcmp(*(char* const*)a, *(char* const*)b);
}

static int is_weight(const dlr_model* m, const char* name) {
  return bsearch(&name, m->sorted_weights, m->num_weights, sizeof(char*), by_name) != NULL;
}

/* the weights in TVM's Map order (a name given twice listed once, at its first place, as Map::Set
   keeps it), and a sorted copy to look them up in */
static int order_weights(dlr_model* m) {
  size_t n = m->num_weights, kept = 0, i;
  size_t* order = (size_t*)malloc((n ? n : 1) * sizeof(size_t));
  char** ordered = (char**)calloc(n ? n : 1, sizeof(char*));
  m->sorted_weights = (char**)malloc((n ? n : 1) * sizeof(char*));
  if (order == NULL || ordered == NULL || m->sorted_weights == NULL ||
      tvmrt_map_order((const char* const*)m->weights, n, order, &kept) != 0) {
    free(order);
    free(ordered);
    return tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate the order of %zu weights", n);
  }
  for (i = 0; i < kept; ++i) {
    ordered[i] = m->weights[order[i]];
    m->weights[order[i]] = NULL;
  }
  for (i = 0; i < n; ++i) free(m->weights[i]); /* the repeated names */
  free(order);
  free(m->weights);
  m->weights = ordered;
  m->num_weights = kept;
  memcpy(m->sorted_weights, ordered, kept * sizeof(char*));
  qsort(m->sorted_weights, kept, sizeof(char*), by_name);
  return 0;
}

/* the params: parsed, copied into the executor, their names kept as the weights */
static int load_params(dlr_model* m, const dlr_parts* parts) {
  tvmrt_params params;
  if (tvmrt_params_parse((const uint8_t*)parts->params, parts->params_len, RT_PARAMS_VIEWS,
                         &params) != 0) {
    return -1;
  }
  if (tvmrt_graph_set_params(m->executor, &params, 0) != 0) {
    tvmrt_params_free(&params);
    return -1;
  }
  m->weights = params.names; /* taken over: the arrays are released, the names kept */
  m->num_weights = params.count;
  params.names = NULL;
  tvmrt_params_free(&params);
  return order_weights(m);
}

static int describe(dlr_model* m) {
  const graph_executor* ge = m->ge;
  size_t i;
  m->inputs = (uint32_t*)calloc(ge->g.num_args + 1, sizeof(uint32_t));
  m->input_types = (char (*)[40])calloc(ge->g.num_args + 1, sizeof(*m->input_types));
  m->output_types = (char (*)[40])calloc(ge->g.num_heads + 1, sizeof(*m->output_types));
  if (m->inputs == NULL || m->input_types == NULL || m->output_types == NULL) {
    return tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate the model's input tables");
  }
  for (i = 0; i < ge->g.num_args; ++i) {
    if (is_weight(m, ge->g.nodes[ge->g.arg_nodes[i]].name)) continue;
    tvmrt_dtype_text(ge->entries[tvmrt_ge_input_eid(ge, i)].dtype, m->input_types[m->num_inputs],
                     sizeof(*m->input_types));
    m->inputs[m->num_inputs++] = (uint32_t)i;
  }
  for (i = 0; i < ge->g.num_heads; ++i) {
    tvmrt_dtype_text(ge->entries[tvmrt_ge_output_eid(ge, i)].dtype, m->output_types[i],
                     sizeof(*m->output_types));
  }
  return 0;
}

static int refuse_data_transform(const tvmrt_json* meta, const char* where) {
  if (meta != NULL && tvmrt_json_get(meta, "DataTransform") != NULL) {
    return tvmrt_fail("UnsupportedError",
                      "'%s' describes DataTransform (an AutoML model taking JSON input); "
                      "tvmrt's DLR does not run the data transforms",
                      where);
  }
  return 0;
}

int dlr_model_create(const dlr_parts* parts, DLDevice dev, dlr_model** out) {
  dlr_model* m = (dlr_model*)calloc(1, sizeof(dlr_model));
  tvmrt_module* lib;
  if (m == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate a DLR model");
  if (tvmrt_object_init(&m->hdr, DLR_MAGIC, model_destroy) != 0) {
    free(m);
    return -1;
  }
  if (parts->meta != NULL && dlr_meta_parse(parts->meta, parts->meta_len, parts->meta_where,
                                            &m->meta, &m->meta_problem) != 0) {
    goto fail;
  }
  if (dlr_check_device(m->meta, dev.device_type) != 0 ||
      refuse_data_transform(m->meta, parts->meta_where)) {
    goto fail;
  }
  if (parts->code != NULL) {
    if (dlr_vm_create(m, parts, dev) != 0) goto fail;
    *out = m;
    return 0;
  }
  if (dlr_regular_file(parts->lib_path, "the model library") != 0) goto fail;
  if ((lib = tvmrt_load_dso(parts->lib_path)) == NULL) goto fail;
  m->executor = tvmrt_graph_executor_create(parts->graph, parts->graph_len, lib, &dev, 1);
  tvmrt_release(&lib->hdr);
  if (m->executor == NULL) goto fail;
  m->ge = (graph_executor*)m->executor->impl;
  if (load_params(m, parts) != 0 || describe(m) != 0) goto fail;
  *out = m;
  return 0;
fail:
  tvmrt_release(&m->hdr);
  return -1;
}

dlr_model* dlr_model_of(void** handle, const char* fn) {
  if (handle == NULL || *handle == NULL) {
    tvmrt_fail("InvalidArgumentError", "%s: model is nullptr, create it first", fn);
    return NULL;
  }
  if (!tvmrt_object_live(*handle, DLR_MAGIC)) {
    tvmrt_fail("ArgumentTypeError", "%s: %p is not a live DLR model (deleted already?)", fn,
               *handle);
    return NULL;
  }
  return (dlr_model*)*handle;
}

int dlr_model_call(dlr_model* m, const char* fn, TVMValue* args, int* codes, int n) {
  tvmrt_func* f = tvmrt_module_get(m->executor, fn, 0);
  TVMValue ret;
  int ret_code = kTVMNullptr, status;
  if (f == NULL) return tvmrt_fail("FunctionNotFoundError", "the graph executor has no %s", fn);
  status = tvmrt_func_call(f, args, codes, n, &ret, &ret_code);
  tvmrt_release(&f->hdr);
  return status;
}

int dlr_model_output_name(const dlr_model* m, int index, const char** name) {
  const tvmrt_json *model, *outputs, *item, *value;
  if (m->meta == NULL) {
    if (m->meta_problem) {
      return tvmrt_fail("DLRError", "No metadata file was found! (%s)", m->meta_problem);
    }
    return tvmrt_fail("DLRError", "No metadata file was found!");
  }
  model = tvmrt_json_get(m->meta, "Model");
  outputs = model && model->type == RT_JSON_OBJECT ? tvmrt_json_get(model, "Outputs") : NULL;
  item = outputs && outputs->type == RT_JSON_ARRAY && index >= 0 && (size_t)index < outputs->count
             ? &outputs->items[index]
             : NULL;
  value = item && item->type == RT_JSON_OBJECT ? tvmrt_json_get(item, "name") : NULL;
  if (value == NULL) {
    return tvmrt_fail("DLRError", "Output node with index %d was not found in metadata file!",
                      index);
  }
  if (value->type != RT_JSON_STRING) {
    return tvmrt_fail("DLRError", "Model.Outputs[%d].name in the metadata file is not a string",
                      index);
  }
  *name = value->str;
  return 0;
}
