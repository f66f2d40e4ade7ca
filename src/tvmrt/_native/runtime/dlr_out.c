/*
 * dlr.h's outputs and output names (dlr_tvm.cc's TVMModel, dlr_relayvm.cc's RelayVMModel):
 * a graph model's through the executor's get_output, a Relay VM model's from its last run
 * (shapes: the meta's until then). Output names come from compiled.meta
 * (Model.Outputs[i].name).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlr.h"
#include "dlr_model.h"

static DLTensor* output_entry(const dlr_model* m, int index) {
  return &m->ge->entries[tvmrt_ge_output_eid(m->ge, (size_t)index)];
}

static int64_t element_count(const DLTensor* t) { return dlr_count_dims(t->shape, t->ndim); }

/* a Relay VM model's output: its type, shape and rank */
#define VM_OUTPUT(m, index)                                                                        \
  const char* vm_type;                                                                             \
  const int64_t* vm_shape;                                                                         \
  int vm_dim;                                                                                      \
  if (dlr_vm_output(m->vm, index, __func__, &vm_type, &vm_shape, &vm_dim) != 0) return -1

#define OUTPUT(m, index)                                                                           \
  if (dlr_check_index(index, m->ge->g.num_heads, "output", __func__) != 0) return -1

static size_t output_count(const dlr_model* m) {
  return m->vm ? dlr_vm_num_outputs(m->vm) : m->ge->g.num_heads;
}

/* the output a Relay VM model's last run gave, or NULL with an error */
#define VM_VALUE(t, m, index)                                                                      \
  const DLTensor* t = NULL;                                                                        \
  tvmrt_ndarray* t##_array = NULL;                                                                 \
  if (m->vm != NULL) {                                                                             \
    if ((t##_array = dlr_vm_output_value(m->vm, index, __func__)) == NULL) return -1;              \
    t = &t##_array->dl;                                                                            \
  }

DLR_DLL int GetDLRNumOutputs(DLRModelHandle* handle, int* num_outputs) {
  MODEL(m);
  CHECK_PTR(num_outputs, "num_outputs");
  *num_outputs = (int)output_count(m);
  return 0;
}

DLR_DLL int GetDLROutputShape(DLRModelHandle* handle, int index, int64_t* shape) {
  const DLTensor* t;
  MODEL(m);
  CHECK_PTR(shape, "shape");
  if (m->vm) {
    VM_OUTPUT(m, index);
    if (vm_dim > 0) memcpy(shape, vm_shape, sizeof(int64_t) * (size_t)vm_dim);
    return 0;
  }
  OUTPUT(m, index);
  t = output_entry(m, index);
  if (t->ndim > 0) memcpy(shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
  return 0;
}

DLR_DLL int GetDLROutputSizeDim(DLRModelHandle* handle, int index, int64_t* size, int* dim) {
  MODEL(m);
  CHECK_PTR(size, "size");
  CHECK_PTR(dim, "dim");
  if (m->vm) {
    VM_OUTPUT(m, index);
    *size = dlr_count_dims(vm_shape, vm_dim);
    *dim = vm_dim;
    return 0;
  }
  OUTPUT(m, index);
  *size = element_count(output_entry(m, index));
  *dim = output_entry(m, index)->ndim;
  return 0;
}

DLR_DLL int GetDLROutputType(DLRModelHandle* handle, int index, const char** output_type) {
  MODEL(m);
  CHECK_PTR(output_type, "output_type");
  if (m->vm) {
    VM_OUTPUT(m, index);
    *output_type = vm_type;
    return 0;
  }
  OUTPUT(m, index);
  *output_type = m->output_types[index];
  return 0;
}

DLR_DLL int GetDLROutput(DLRModelHandle* handle, int index, void* out) {
  DLTensor dst;
  MODEL(m);
  CHECK_PTR(out, "out");
  {
    VM_VALUE(t, m, index);
    if (t != NULL) {
      dst = dlr_over(t, out);
      return tvmrt_copy_tensor(t, &dst);
    }
  }
  OUTPUT(m, index);
  dst = dlr_over(output_entry(m, index), out);
  return dlr_call2(m, "get_output", index, &dst);
}

DLR_DLL int GetDLROutputPtr(DLRModelHandle* handle, int index, const void** out) {
  MODEL(m);
  CHECK_PTR(out, "out");
  VM_VALUE(t, m, index);
  if (t == NULL) {
    OUTPUT(m, index);
    t = output_entry(m, index);
  }
  *out = (const char*)t->data + t->byte_offset;
  return 0;
}

DLR_DLL int GetDLROutputTensor(DLRModelHandle* handle, int index, void* tensor) {
  MODEL(m);
  CHECK_PTR(tensor, "tensor");
  {
    VM_VALUE(t, m, index);
    if (t != NULL) {
      if (dlr_check_tensor((DLTensor*)tensor, __func__) != 0) return -1;
      return tvmrt_copy_tensor(t, (DLTensor*)tensor);
    }
  }
  OUTPUT(m, index);
  return dlr_call2(m, "get_output", index, (DLTensor*)tensor);
}

/* a DLManagedTensor viewing an output; it keeps the executor (and so its memory) alive */
typedef struct {
  DLManagedTensor managed;
  int64_t shape[RT_MAX_NDIM];
  tvmrt_object* owner;
} dlr_managed;

static void managed_delete(DLManagedTensor* self) {
  dlr_managed* v = (dlr_managed*)self->manager_ctx;
  tvmrt_release(v->owner);
  free(v);
}

DLR_DLL int GetDLROutputManagedTensorPtr(DLRModelHandle* handle, int index, const void** tensor) {
  dlr_managed* v;
  MODEL(m);
  CHECK_PTR(tensor, "tensor");
  VM_VALUE(t, m, index);
  if (t == NULL) {
    OUTPUT(m, index);
    t = output_entry(m, index);
  }
  if ((v = (dlr_managed*)calloc(1, sizeof(dlr_managed))) == NULL) {
    return tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate a DLManagedTensor");
  }
  v->managed.dl_tensor = *t;
  if (t->ndim > 0) memcpy(v->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
  v->managed.dl_tensor.shape = v->shape;
  v->managed.dl_tensor.strides = NULL;
  v->managed.manager_ctx = v;
  v->managed.deleter = managed_delete;
  v->owner = t_array ? &t_array->hdr : &m->executor->hdr; /* the array, or the executor */
  tvmrt_retain(v->owner);
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
  for (i = 0; i < output_count(m); ++i) {
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
