/*
 * dlr.h's inputs (dlr_tvm.cc's TVMModel; outputs: dlr_out.c): an input index counts
 * the graph's inputs less the weights, a name may be any graph input (weights too, as
 * DLR's set_input); SetDLRInput checks only the element count (DLR's words: "Mismatch
 * found in input data size. Value read: N, Expected: M") and reads the input's dtype;
 * copies go through the executor's own set_input / get_output, so a DLTensor of another
 * dtype, shape or device is refused with the runtime's error. A Relay VM model answers
 * from dlr_vm.c, as DLR's RelayVMModel: main's parameters, the meta's dtypes and shapes,
 * no weights, no zero-copy input; SetDLRInput takes any shape (no count check, as DLR).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlr.h"
#include "dlr_model.h"

static DLTensor* input_entry(const dlr_model* m, size_t graph_index) {
  return &m->ge->entries[tvmrt_ge_input_eid(m->ge, graph_index)];
}

/* a graph input (weights included) by name, or -1 with DLR's error */
static int graph_input(const dlr_model* m, const char* name) {
  int idx = tvmrt_ge_input_index(m->ge, name);
  if (idx < 0) tvmrt_fail("DLRError", "%.300s is not a valid input name.", name);
  return idx;
}

int64_t dlr_count_dims(const int64_t* shape, int ndim) {
  int64_t n = 1;
  int d;
  for (d = 0; d < ndim; ++d) {
    if (shape[d] < 0) return -1;
    if (shape[d] != 0 && n > INT64_MAX / shape[d]) return -1; /* never wraps (meta checked) */
    n *= shape[d];
  }
  return n;
}

static int64_t element_count(const DLTensor* t) { return dlr_count_dims(t->shape, t->ndim); }

/* a Relay VM model's input or output: its name, type, shape and rank */
#define VM_INPUT(m, index)                                                                         \
  const char *vm_name, *vm_type;                                                                   \
  const int64_t* vm_shape;                                                                         \
  int vm_dim;                                                                                      \
  if (dlr_vm_input(m->vm, index, __func__, &vm_name, &vm_type, &vm_shape, &vm_dim) != 0) return -1
#define NOT_FOR_VM(m, why)                                                                         \
  if (m->vm != NULL) return tvmrt_fail("DLRError", "%s: %s", __func__, why)

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
int dlr_call2(dlr_model* m, const char* fn, int index, DLTensor* t) {
  TVMValue args[2];
  int codes[2] = {kTVMArgInt, kTVMDLTensorHandle};
  args[0].v_int64 = index;
  args[1].v_handle = t;
  return dlr_model_call(m, fn, args, codes, 2);
}

int dlr_check_tensor(const DLTensor* t, const char* fn) {
  size_t bytes;
  if (t->ndim < 0 || t->ndim > RT_MAX_NDIM || (t->ndim > 0 && t->shape == NULL) ||
      tvmrt_tensor_nbytes(t, &bytes) != 0) {
    return tvmrt_fail("InvalidArgumentError", "%s: the tensor has no valid shape (ndim %d)", fn,
                      t->ndim);
  }
  if (bytes > 0 && t->data == NULL) {
    return tvmrt_fail("InvalidArgumentError", "%s: the tensor's data is NULL", fn);
  }
  return 0;
}

/* the entry's layout over the caller's memory */
DLTensor dlr_over(const DLTensor* entry, void* data) {
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
  *num_inputs = (int)(m->vm ? dlr_vm_num_inputs(m->vm) : m->num_inputs);
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
  if (m->vm) {
    VM_INPUT(m, index);
    *input_name = vm_name;
    return 0;
  }
  if (dlr_check_index(index, m->num_inputs, "input", __func__) != 0) return -1;
  *input_name = m->ge->g.nodes[m->ge->g.arg_nodes[m->inputs[index]]].name;
  return 0;
}

DLR_DLL int GetDLRInputType(DLRModelHandle* handle, int index, const char** input_type) {
  MODEL(m);
  CHECK_PTR(input_type, "input_type");
  if (m->vm) {
    VM_INPUT(m, index);
    *input_type = vm_type;
    return 0;
  }
  if (dlr_check_index(index, m->num_inputs, "input", __func__) != 0) return -1;
  *input_type = m->input_types[index];
  return 0;
}

DLR_DLL int GetDLRWeightName(DLRModelHandle* handle, int index, const char** weight_name) {
  MODEL(m);
  CHECK_PTR(weight_name, "weight_name");
  NOT_FOR_VM(m, "Not Implemented! (a RelayVM model has no weights)");
  if (dlr_check_index(index, m->num_weights, "weight", __func__) != 0) return -1;
  *weight_name = m->weights[index];
  return 0;
}

DLR_DLL int GetDLRInputShape(DLRModelHandle* handle, int index, int64_t* shape) {
  const DLTensor* t;
  MODEL(m);
  CHECK_PTR(shape, "shape");
  if (m->vm) {
    VM_INPUT(m, index);
    if (vm_dim > 0) memcpy(shape, vm_shape, sizeof(int64_t) * (size_t)vm_dim);
    return 0;
  }
  if (dlr_check_index(index, m->num_inputs, "input", __func__) != 0) return -1;
  t = input_entry(m, m->inputs[index]);
  if (t->ndim > 0) memcpy(shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
  return 0;
}

DLR_DLL int GetDLRInputSizeDim(DLRModelHandle* handle, int index, int64_t* size, int* dim) {
  const DLTensor* t;
  MODEL(m);
  CHECK_PTR(size, "size");
  CHECK_PTR(dim, "dim");
  if (m->vm) {
    VM_INPUT(m, index);
    *size = dlr_count_dims(vm_shape, vm_dim);
    *dim = vm_dim;
    return 0;
  }
  if (dlr_check_index(index, m->num_inputs, "input", __func__) != 0) return -1;
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
  if (m->vm) { /* an array of the caller's shape in the meta's dtype, as DLR */
    memset(&src, 0, sizeof(src));
    if (dlr_vm_input_dtype(m->vm, name, &src.dtype) != 0 ||
        count_of(shape, dim, __func__, &read) != 0) {
      return -1;
    }
    CHECK_PTR(input, "input");
    src.data = (void*)input;
    src.device.device_type = kDLCPU;
    src.ndim = dim;
    src.shape = (int64_t*)shape;
    return dlr_vm_set_input(m->vm, name, &src);
  }
  if ((idx = graph_input(m, name)) < 0 || count_of(shape, dim, __func__, &read) != 0) return -1;
  if (read != element_count(input_entry(m, (size_t)idx))) {
    return size_mismatch(read, element_count(input_entry(m, (size_t)idx)));
  }
  CHECK_PTR(input, "input");
  src = dlr_over(input_entry(m, (size_t)idx), (void*)input);
  return dlr_call2(m, "set_input", idx, &src);
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
  if (m->vm) {
    if (dlr_check_tensor(t, __func__) != 0) return -1;
    return dlr_vm_set_input(m->vm, name, t); /* a copy in the tensor's dtype, as DLR */
  }
  if ((idx = graph_input(m, name)) < 0 || count_of(t->shape, t->ndim, __func__, &read) != 0) {
    return -1;
  }
  entry = input_entry(m, (size_t)idx);
  if (read != element_count(entry)) return size_mismatch(read, element_count(entry));
  if (tvmrt_ge_same_layout(t, entry) || t->dtype.code != entry->dtype.code ||
      t->dtype.bits != entry->dtype.bits || t->dtype.lanes != entry->dtype.lanes) {
    return dlr_call2(m, "set_input", idx, t); /* the executor names a dtype mismatch */
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
  return dlr_call2(m, "set_input", idx, &view);
}

DLR_DLL int SetDLRInputTensorZeroCopy(DLRModelHandle* handle, const char* name, void* tensor) {
  int idx;
  MODEL(m);
  CHECK_PTR(name, "name");
  CHECK_PTR(tensor, "tensor");
  NOT_FOR_VM(m, "model is not a TVMModel. Found 'relayvm' but expected 'tvm'");
  if ((idx = graph_input(m, name)) < 0) return -1;
  return dlr_call2(m, "set_input_zero_copy", idx, (DLTensor*)tensor);
}

DLR_DLL int GetDLRInput(DLRModelHandle* handle, const char* name, void* input) {
  DLTensor dst;
  int idx;
  MODEL(m);
  CHECK_PTR(name, "name");
  CHECK_PTR(input, "input");
  if (m->vm) {
    const DLTensor* t = dlr_vm_input_value(m->vm, name);
    if (t == NULL) return -1;
    dst = dlr_over(t, input);
    return tvmrt_copy_tensor(t, &dst);
  }
  if ((idx = graph_input(m, name)) < 0) return -1;
  dst = dlr_over(input_entry(m, (size_t)idx), input);
  return dlr_call2(m, "get_input", idx, &dst);
}
