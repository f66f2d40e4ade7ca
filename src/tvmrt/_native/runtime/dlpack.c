/*
 * DLPack interop (TVMArrayFromDLPack, TVMArrayToDLPack, TVMDLManagedTensorCallDeleter), an
 * array's type index (TVMArrayGetTypeIndex) and scoped raw memory
 * (TVMDeviceAllocDataSpaceWithScope), with TVM v0.19's semantics (src/runtime/ndarray.cc,
 * c_runtime_api.cc):
 *   - FromDLPack takes the tensor over on success (its deleter runs once, when the last
 *     reference to the array goes); on a refusal the caller keeps it. The tensor must be on
 *     the CPU, compact and its data 64-byte aligned (TVM's checks and words);
 *   - ToDLPack gives a new DLManagedTensor that keeps the array alive until its deleter runs.
 */
#include <stdlib.h>
#include <string.h>

#include "rt.h"

enum { RT_MAGIC_DLPACK = 0x444c5031 };

/* what keeps a foreign tensor alive while arrays view it */
typedef struct {
  tvmrt_object hdr;
  DLManagedTensor* tensor;
} dlpack_owner;

static void dlpack_owner_destroy(tvmrt_object* obj) {
  dlpack_owner* o = (dlpack_owner*)obj;
  if (o->tensor != NULL && o->tensor->deleter != NULL) o->tensor->deleter(o->tensor);
  o->hdr.magic = 0;
  free(o);
}

static int check_foreign(const DLTensor* t) {
  size_t nbytes;
  if (t->device.device_type != kDLCPU) {
    return tvmrt_fail("DeviceUnavailableError",
                      "TVMArrayFromDLPack: the tensor is on device type %d; the C runtime runs on "
                      "the cpu (device type 1)",
                      (int)t->device.device_type);
  }
  if (t->ndim < 0 || t->ndim > RT_MAX_NDIM || (t->ndim > 0 && t->shape == NULL)) {
    return tvmrt_fail("ArrayError",
                      "TVMArrayFromDLPack: ndim %d (or its shape) is out of range; expected 0 to "
                      "%d dimensions",
                      t->ndim, RT_MAX_NDIM);
  }
  if (tvmrt_tensor_nbytes(t, &nbytes) != 0) {
    return tvmrt_fail("ArrayError",
                      "TVMArrayFromDLPack: the tensor's shape has a negative or too large "
                      "dimension");
  }
  if (nbytes != 0 && t->data == NULL) {
    return tvmrt_fail("ArrayError", "TVMArrayFromDLPack: the tensor has no data");
  }
  if (!tvmrt_is_compact(t)) { /* TVM's words */
    return tvmrt_fail("ArrayError", "TVMArrayFromDLPack: DLManagedTensor must be contiguous.");
  }
  if (((uintptr_t)t->data + t->byte_offset) % RT_ALIGN != 0) {
    return tvmrt_fail("ArrayError",
                      "TVMArrayFromDLPack: Data in DLManagedTensor is not aligned as required by "
                      "NDArray (%d bytes; its data + byte_offset is %p + %llu)",
                      RT_ALIGN, t->data, (unsigned long long)t->byte_offset);
  }
  return 0;
}

TVM_DLL int TVMArrayFromDLPack(DLManagedTensor* from, TVMArrayHandle* out) {
  dlpack_owner* owner;
  tvmrt_ndarray* a;
  if (from == NULL || out == NULL) {
    return tvmrt_fail("InvalidArgumentError",
                      "TVMArrayFromDLPack: the tensor and out are required");
  }
  if (check_foreign(&from->dl_tensor) != 0) return -1;
  owner = (dlpack_owner*)calloc(1, sizeof(dlpack_owner));
  if (owner == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot hold a DLPack tensor");
  if (tvmrt_object_init(&owner->hdr, RT_MAGIC_DLPACK, dlpack_owner_destroy) != 0) {
    free(owner);
    return -1;
  }
  a = tvmrt_ndarray_view(&from->dl_tensor, &owner->hdr);
  if (a == NULL) { /* owner->tensor is still NULL: the caller keeps the tensor */
    tvmrt_release(&owner->hdr);
    return -1;
  }
  owner->tensor = from;
  tvmrt_release(&owner->hdr); /* the array holds it now */
  *out = &a->dl;
  return 0;
}

/* the DLManagedTensor TVMArrayToDLPack hands out: the array it keeps alive */
static void to_dlpack_deleter(DLManagedTensor* self) {
  tvmrt_ndarray* a = (tvmrt_ndarray*)self->manager_ctx;
  tvmrt_release(&a->hdr);
  free(self);
}

TVM_DLL int TVMArrayToDLPack(TVMArrayHandle from, DLManagedTensor** out) {
  tvmrt_ndarray* a;
  DLManagedTensor* t;
  if (out == NULL) return tvmrt_fail("InvalidArgumentError", "TVMArrayToDLPack: out is required");
  a = tvmrt_ndarray_from_handle(from);
  if (a == NULL) return -1;
  t = (DLManagedTensor*)calloc(1, sizeof(DLManagedTensor));
  if (t == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate a DLManagedTensor");
  t->dl_tensor = a->dl; /* shape points into the array, alive while the tensor is */
  t->manager_ctx = a;
  t->deleter = to_dlpack_deleter;
  tvmrt_retain(&a->hdr);
  *out = t;
  return 0;
}

TVM_DLL void TVMDLManagedTensorCallDeleter(DLManagedTensor* dltensor) {
  /* TVM calls the deleter unchecked; a NULL tensor or deleter is nothing to delete */
  if (dltensor != NULL && dltensor->deleter != NULL) dltensor->deleter(dltensor);
}

TVM_DLL int TVMArrayGetTypeIndex(TVMArrayHandle handle, unsigned* out_tindex) {
  if (out_tindex == NULL) {
    return tvmrt_fail("InvalidArgumentError", "TVMArrayGetTypeIndex: out_tindex is required");
  }
  if (tvmrt_ndarray_from_handle(handle) == NULL) return -1;
  *out_tindex = 2; /* TypeIndex::kRuntimeNDArray */
  return 0;
}

TVM_DLL int TVMDeviceAllocDataSpaceWithScope(DLDevice dev, int ndim, const int64_t* shape,
                                             DLDataType dtype, const char* mem_scope,
                                             void** out_data) {
  DLTensor t;
  size_t nbytes, align = (size_t)(dtype.bits / 8) * dtype.lanes;
  if (mem_scope != NULL && mem_scope[0] != '\0' && strcmp(mem_scope, "global") != 0) {
    return tvmrt_fail("UnsupportedError",
                      "Device does not support allocate data space with specified memory scope: "
                      "%.64s (the cpu has the global scope only)",
                      mem_scope);
  }
  if (ndim < 0 || ndim > RT_MAX_NDIM || (ndim > 0 && shape == NULL)) {
    return tvmrt_fail("ArrayError",
                      "TVMDeviceAllocDataSpaceWithScope: ndim %d (or its shape) is out of range; "
                      "expected 0 to %d dimensions",
                      ndim, RT_MAX_NDIM);
  }
  memset(&t, 0, sizeof(t));
  t.ndim = ndim;
  t.shape = (int64_t*)shape;
  t.dtype = dtype;
  if (tvmrt_tensor_nbytes(&t, &nbytes) != 0) {
    return tvmrt_fail("ArrayError",
                      "TVMDeviceAllocDataSpaceWithScope: the shape has a negative or too large "
                      "dimension");
  }
  /* TVM's GetDataAlignment: the element's bytes, at least kAllocAlignment */
  return TVMDeviceAllocDataSpace(dev, nbytes, align < RT_ALIGN ? RT_ALIGN : align, dtype, out_data);
}
