/*
 * dlr.h's inputs, outputs and output names (dlr_tvm.cc's TVMModel): an input index counts
 * the graph's inputs less the weights, a name may be any graph input (weights too, as
 * DLR's set_input); SetDLRInput checks only the element count (DLR's words: "Mismatch
 * found in input data size. Value read: N, Expected: M") and reads the input's dtype;
 * copies go through the executor's own set_input / get_output, so a DLTensor of another
 * dtype, shape or device is refused with the runtime's error. Output names come from
 * compiled.meta (Model.Outputs[i].name).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlr.h"
#include "dlr_model.h"

static int check_index(int index, size_t count, const char* what, const char* fn) {
  if (index < 0 || (size_t)index >= count) {
    return tvmrt_fail("DLRError", "%s: %s index %d is out of range: the model has %zu %ss", fn,
                      what, index, count, what);
  }
  return 0;
}

static DLTensor* input_entry(const dlr_model* m, size_t graph_index) {
  return &m->ge->entries[tvmrt_ge_input_eid(m->ge, graph_index)];
}

static DLTensor* output_entry(const dlr_model* m, int index) {
  return &m->ge->entries[tvmrt_ge_output_eid(m->ge, (size_t)index)];
}

/* a graph input (weights included) by name, or -1 with DLR's error */
static int graph_input(const dlr_model* m, const char* name) {
  int idx = tvmrt_ge_input_index(m->ge, name);
  if (idx < 0) tvmrt_fail("DLRError", "%.300s is not a valid input name.", name);
  return idx;
}

static int64_t element_count(const DLTensor* t) {
  int64_t n = 1;
  int d;
  for (d = 0; d < t->ndim; ++d) {
    if (t->shape[d] < 0) return -1;
    n *= t->shape[d];
  }
  return n;
}

/* the product of a caller's shape: -1 with an error for a bad one */
static int count_of(const int64_t* shape, int dim, const char* fn, int64_t* out) {
  int d;
  *out = 1;
  if (dim < 0 || dim > RT_MAX_NDIM) {
    return tvmrt_fail("InvalidArgumentError", "%s: dim is %d, expected 0 to %d", fn, dim,
                      RT_MAX_NDIM);
  }
  if (dim > 0 && shape == NULL) return tvmrt_fail("InvalidArgumentError", "%s: shape is NULL", fn);
  for (d = 0; d < dim; ++d) {
    if (shape[d] < 0) {
      return tvmrt_fail("InvalidArgumentError", "%s: shape[%d] is %lld, expected a size >= 0", fn,
                        d, (long long)shape[d]);
    }
    if (shape[d] != 0 && *out > INT64_MAX / shape[d]) {
      return tvmrt_fail("InvalidArgumentError", "%s: the shape's element count overflows int64",
                        fn);
    }
    *out *= shape[d];
  }
  return 0;
}

static int size_mismatch(int64_t read, int64_t expected) {
  return tvmrt_fail("DLRError",
                    "Mismatch found in input data size. Value read: %lld, Expected: %lld",
                    (long long)read, (long long)expected);
}

/* the executor's `fn` with (index, tensor) */
static int call2(dlr_model* m, const char* fn, int index, DLTensor* t) {
  TVMValue args[2];
  int codes[2] = {kTVMArgInt, kTVMDLTensorHandle};
  args[0].v_int64 = index;
  args[1].v_handle = t;
  return dlr_model_call(m, fn, args, codes, 2);
}

/* the entry's layout over the caller's memory */
static DLTensor over(const DLTensor* entry, void* data) {
  DLTensor t = *entry;
  t.data = data;
  t.byte_offset = 0;
  t.strides = NULL;
  t.device.device_type = kDLCPU;
  t.device.device_id = 0;
  return t;
}

DLR_DLL int GetDLRNumInputs(DLRModelHandle* handle, int* num_inputs) {
  MODEL(m);
  CHECK_PTR(num_inputs, "num_inputs");
  *num_inputs = (int)m->num_inputs;
  return 0;
}

DLR_DLL int GetDLRNumWeights(DLRModelHandle* handle, int* num_weights) {
  MODEL(m);
  CHECK_PTR(num_weights, "num_weights");
  *num_weights = (int)m->num_weights;
  return 0;
}

DLR_DLL int GetDLRInputName(DLRModelHandle* handle, int index, const char** input_name) {
  MODEL(m);
  CHECK_PTR(input_name, "input_name");
  if (check_index(index, m->num_inputs, "input", __func__) != 0) return -1;
  *input_name = m->ge->g.nodes[m->ge->g.arg_nodes[m->inputs[index]]].name;
  return 0;
}

DLR_DLL int GetDLRInputType(DLRModelHandle* handle, int index, const char** input_type) {
  MODEL(m);
  CHECK_PTR(input_type, "input_type");
  if (check_index(index, m->num_inputs, "input", __func__) != 0) return -1;
  *input_type = m->input_types[index];
  return 0;
}

DLR_DLL int GetDLRWeightName(DLRModelHandle* handle, int index, const char** weight_name) {
  MODEL(m);
  CHECK_PTR(weight_name, "weight_name");
  if (check_index(index, m->num_weights, "weight", __func__) != 0) return -1;
  *weight_name = m->weights[index];
  return 0;
}

DLR_DLL int GetDLRInputShape(DLRModelHandle* handle, int index, int64_t* shape) {
  const DLTensor* t;
  MODEL(m);
  CHECK_PTR(shape, "shape");
  if (check_index(index, m->num_inputs, "input", __func__) != 0) return -1;
  t = input_entry(m, m->inputs[index]);
  if (t->ndim > 0) memcpy(shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
  return 0;
}

DLR_DLL int GetDLRInputSizeDim(DLRModelHandle* handle, int index, int64_t* size, int* dim) {
  const DLTensor* t;
  MODEL(m);
  CHECK_PTR(size, "size");
  CHECK_PTR(dim, "dim");
  if (check_index(index, m->num_inputs, "input", __func__) != 0) return -1;
  t = input_entry(m, m->inputs[index]);
  *size = element_count(t);
  *dim = t->ndim;
  return 0;
}

DLR_DLL int SetDLRInput(DLRModelHandle* handle, const char* name, const int64_t* shape,
                        const void* input, int dim) {
  int64_t read;
  int idx;
  DLTensor src;
  MODEL(m);
  CHECK_PTR(name, "name");
  if ((idx = graph_input(m, name)) < 0 || count_of(shape, dim, __func__, &read) != 0) return -1;
  if (read != element_count(input_entry(m, (size_t)idx))) {
    return size_mismatch(read, element_count(input_entry(m, (size_t)idx)));
  }
  CHECK_PTR(input, "input");
  src = over(input_entry(m, (size_t)idx), (void*)input);
  return call2(m, "set_input", idx, &src);
}

DLR_DLL int SetDLRInputTensor(DLRModelHandle* handle, const char* name, void* tensor) {
  DLTensor* t = (DLTensor*)tensor;
  DLTensor view;
  const DLTensor* entry;
  int64_t read;
  int idx;
  MODEL(m);
  CHECK_PTR(name, "name");
  CHECK_PTR(tensor, "tensor");
  if ((idx = graph_input(m, name)) < 0 || count_of(t->shape, t->ndim, __func__, &read) != 0) {
    return -1;
  }
  entry = input_entry(m, (size_t)idx);
  if (read != element_count(entry)) return size_mismatch(read, element_count(entry));
  if (tvmrt_ge_same_layout(t, entry) || t->dtype.code != entry->dtype.code ||
      t->dtype.bits != entry->dtype.bits || t->dtype.lanes != entry->dtype.lanes) {
    return call2(m, "set_input", idx, t); /* the executor names a dtype mismatch */
  }
  if (!tvmrt_is_compact(t)) {
    return tvmrt_fail("ArrayError",
                      "%s: the tensor for '%.200s' has strides and another shape than the "
                      "input's: give it the input's shape, or make it compact",
                      __func__, name);
  }
  view = *t; /* only the element count must match (DLR): the input's shape over its data */
  view.ndim = entry->ndim;
  view.shape = entry->shape;
  return call2(m, "set_input", idx, &view);
}

DLR_DLL int SetDLRInputTensorZeroCopy(DLRModelHandle* handle, const char* name, void* tensor) {
  int idx;
  MODEL(m);
  CHECK_PTR(name, "name");
  CHECK_PTR(tensor, "tensor");
  if ((idx = graph_input(m, name)) < 0) return -1;
  return call2(m, "set_input_zero_copy", idx, (DLTensor*)tensor);
}

DLR_DLL int GetDLRInput(DLRModelHandle* handle, const char* name, void* input) {
  DLTensor dst;
  int idx;
  MODEL(m);
  CHECK_PTR(name, "name");
  CHECK_PTR(input, "input");
  if ((idx = graph_input(m, name)) < 0) return -1;
  dst = over(input_entry(m, (size_t)idx), input);
  return call2(m, "get_input", idx, &dst);
}

/* -- outputs ---------------------------------------------------------------------------- */

#define OUTPUT(m, index)                                                                           \
  if (check_index(index, m->ge->g.num_heads, "output", __func__) != 0) return -1

DLR_DLL int GetDLRNumOutputs(DLRModelHandle* handle, int* num_outputs) {
  MODEL(m);
  CHECK_PTR(num_outputs, "num_outputs");
  *num_outputs = (int)m->ge->g.num_heads;
  return 0;
}

DLR_DLL int GetDLROutputShape(DLRModelHandle* handle, int index, int64_t* shape) {
  const DLTensor* t;
  MODEL(m);
  CHECK_PTR(shape, "shape");
  OUTPUT(m, index);
  t = output_entry(m, index);
  if (t->ndim > 0) memcpy(shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
  return 0;
}

DLR_DLL int GetDLROutputSizeDim(DLRModelHandle* handle, int index, int64_t* size, int* dim) {
  MODEL(m);
  CHECK_PTR(size, "size");
  CHECK_PTR(dim, "dim");
  OUTPUT(m, index);
  *size = element_count(output_entry(m, index));
  *dim = output_entry(m, index)->ndim;
  return 0;
}

DLR_DLL int GetDLROutputType(DLRModelHandle* handle, int index, const char** output_type) {
  MODEL(m);
  CHECK_PTR(output_type, "output_type");
  OUTPUT(m, index);
  *output_type = m->output_types[index];
  return 0;
}

DLR_DLL int GetDLROutput(DLRModelHandle* handle, int index, void* out) {
  DLTensor dst;
  MODEL(m);
  CHECK_PTR(out, "out");
  OUTPUT(m, index);
  dst = over(output_entry(m, index), out);
  return call2(m, "get_output", index, &dst);
}

DLR_DLL int GetDLROutputPtr(DLRModelHandle* handle, int index, const void** out) {
  const DLTensor* t;
  MODEL(m);
  CHECK_PTR(out, "out");
  OUTPUT(m, index);
  t = output_entry(m, index);
  *out = (const char*)t->data + t->byte_offset;
  return 0;
}

DLR_DLL int GetDLROutputTensor(DLRModelHandle* handle, int index, void* tensor) {
  MODEL(m);
  CHECK_PTR(tensor, "tensor");
  OUTPUT(m, index);
  return call2(m, "get_output", index, (DLTensor*)tensor);
}

/* a DLManagedTensor viewing an output; it keeps the executor (and so its memory) alive */
typedef struct {
  DLManagedTensor managed;
  int64_t shape[RT_MAX_NDIM];
  tvmrt_module* owner;
} dlr_managed;

static void managed_delete(DLManagedTensor* self) {
  dlr_managed* v = (dlr_managed*)self->manager_ctx;
  tvmrt_release(&v->owner->hdr);
  free(v);
}

DLR_DLL int GetDLROutputManagedTensorPtr(DLRModelHandle* handle, int index, const void** tensor) {
  dlr_managed* v;
  const DLTensor* t;
  MODEL(m);
  CHECK_PTR(tensor, "tensor");
  OUTPUT(m, index);
  t = output_entry(m, index);
  if ((v = (dlr_managed*)calloc(1, sizeof(dlr_managed))) == NULL) {
    return tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate a DLManagedTensor");
  }
  v->managed.dl_tensor = *t;
  if (t->ndim > 0) memcpy(v->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
  v->managed.dl_tensor.shape = v->shape;
  v->managed.dl_tensor.strides = NULL;
  v->managed.manager_ctx = v;
  v->managed.deleter = managed_delete;
  v->owner = m->executor;
  tvmrt_retain(&m->executor->hdr);
  *tensor = &v->managed;
  return 0;
}

/* -- compiled.meta ---------------------------------------------------------------------- */

DLR_DLL int GetDLRHasMetadata(DLRModelHandle* handle, bool* has_metadata) {
  MODEL(m);
  CHECK_PTR(has_metadata, "has_metadata");
  *has_metadata = m->meta != NULL;
  return 0;
}

DLR_DLL int GetDLROutputName(DLRModelHandle* handle, const int index, const char** name) {
  MODEL(m);
  CHECK_PTR(name, "name");
  return dlr_model_output_name(m, index, name);
}

DLR_DLL int GetDLROutputIndex(DLRModelHandle* handle, const char* name, int* index) {
  size_t i;
  MODEL(m);
  CHECK_PTR(name, "name");
  CHECK_PTR(index, "index");
  for (i = 0; i < m->ge->g.num_heads; ++i) {
    const char* found;
    if (dlr_model_output_name(m, (int)i, &found) != 0) return -1;
    if (strcmp(found, name) == 0) {
      *index = (int)i;
      return 0;
    }
  }
  return tvmrt_fail("DLRError", "Couldn't find index for output node %.300s!", name);
}

DLR_DLL int GetDLROutputByName(DLRModelHandle* handle, const char* name, void* out) {
  int index;
  if (GetDLROutputIndex(handle, name, &index) != 0) return -1;
  return GetDLROutput(handle, index, out);
}
