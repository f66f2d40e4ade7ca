/*
 * Arrays on the CPU and on the devices of the backend table (devices.c): TVMArrayAlloc/Free/
 * CopyFromBytes/CopyToBytes/CopyFromTo, raw device memory, dtype strings and byte sizes
 * (streams: streams.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

int tvmrt_dtype_bytes(DLDataType t, int64_t count, size_t* out) {
  uint64_t per = ((uint64_t)t.bits * (uint64_t)(t.lanes ? t.lanes : 1) + 7) / 8;
  if (count < 0 || (per != 0 && (uint64_t)count > SIZE_MAX / per)) return -1;
  *out = (size_t)(per * (uint64_t)count);
  return 0;
}

int tvmrt_tensor_nbytes(const DLTensor* t, size_t* out) {
  int64_t count = 1;
  int i;
  if (t->ndim < 0 || t->ndim > RT_MAX_NDIM) return -1;
  for (i = 0; i < t->ndim; ++i) {
    int64_t d = t->shape[i];
    if (d < 0 || (d != 0 && count > INT64_MAX / d)) return -1;
    count *= d;
  }
  return tvmrt_dtype_bytes(t->dtype, count, out);
}

static void array_destroy(tvmrt_object* obj) {
  tvmrt_ndarray* a = (tvmrt_ndarray*)((char*)obj - offsetof(tvmrt_ndarray, hdr));
  const tvmrt_device_backend* backend = tvmrt_device_backend_of(a->dl.device.device_type);
  if (a->alloc != NULL && backend != NULL) {
    backend->free(a->dl.device.device_id, a->alloc); /* an error here has no caller */
  } else {
    free(a->alloc);
  }
  if (a->uncharge != NULL) a->uncharge(a->charged_to, a->charged);
  tvmrt_release(a->owner);
  a->hdr.magic = 0;
  free(a);
}

static tvmrt_ndarray* array_new(const int64_t* shape, int ndim, DLDataType dtype) {
  tvmrt_ndarray* a;
  if (ndim < 0 || ndim > RT_MAX_NDIM) {
    tvmrt_fail("ArrayError", "ndim %d is out of range; expected 0 to %d", ndim, RT_MAX_NDIM);
    return NULL;
  }
  a = (tvmrt_ndarray*)calloc(1, sizeof(tvmrt_ndarray));
  if (a == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate an array header");
    return NULL;
  }
  if (tvmrt_object_init(&a->hdr, RT_MAGIC_ARRAY, array_destroy) != 0) {
    free(a);
    return NULL;
  }
  if (ndim > 0) memcpy(a->shape, shape, (size_t)ndim * sizeof(int64_t));
  a->dl.shape = a->shape;
  a->dl.ndim = ndim;
  a->dl.dtype = dtype;
  a->dl.device.device_type = kDLCPU;
  a->dl.device.device_id = 0;
  return a;
}

tvmrt_ndarray* tvmrt_ndarray_empty_on(const int64_t* shape, int ndim, DLDataType dtype,
                                      DLDevice dev) {
  tvmrt_ndarray* a = array_new(shape, ndim, dtype);
  const tvmrt_device_backend* backend = tvmrt_device_backend_of(dev.device_type);
  size_t nbytes;
  if (a == NULL) return NULL;
  if (tvmrt_tensor_nbytes(&a->dl, &nbytes) != 0) {
    tvmrt_release(&a->hdr);
    tvmrt_fail("ArrayError", "array shape has a negative or too large dimension");
    return NULL;
  }
  if (backend != NULL) {
    a->dl.device = dev; /* the destroy frees with the backend */
    if (backend->alloc(dev.device_id, nbytes, &a->alloc) != 0) {
      tvmrt_release(&a->hdr);
      return NULL;
    }
    a->dl.data = a->alloc;
    return a;
  }
  a->alloc = aligned_alloc(RT_ALIGN, (nbytes + RT_ALIGN - 1) / RT_ALIGN * RT_ALIGN + RT_ALIGN);
  if (a->alloc == NULL) {
    tvmrt_release(&a->hdr);
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate %zu bytes for an array", nbytes);
    return NULL;
  }
  a->dl.data = a->alloc;
  return a;
}

tvmrt_ndarray* tvmrt_ndarray_empty(const int64_t* shape, int ndim, DLDataType dtype) {
  DLDevice cpu = {kDLCPU, 0};
  return tvmrt_ndarray_empty_on(shape, ndim, dtype, cpu);
}

tvmrt_ndarray* tvmrt_ndarray_view(const DLTensor* dl, tvmrt_object* owner) {
  tvmrt_ndarray* a = array_new(dl->shape, dl->ndim, dl->dtype);
  if (a == NULL) return NULL;
  a->dl.data = dl->data;
  a->dl.byte_offset = dl->byte_offset;
  a->dl.device = dl->device;
  a->owner = owner;
  tvmrt_retain(owner);
  return a;
}

tvmrt_ndarray* tvmrt_ndarray_from_handle(void* handle) {
  tvmrt_ndarray* a = (tvmrt_ndarray*)handle;
  if (a == NULL || !tvmrt_object_live(&a->hdr, RT_MAGIC_ARRAY)) {
    tvmrt_fail("ArgumentTypeError",
               "expected an array handle from TVMArrayAlloc, got %p (not a live array: freed "
               "already?)",
               handle);
    return NULL;
  }
  return a;
}

TVM_DLL int TVMArrayAlloc(const tvm_index_t* shape, int ndim, int dtype_code, int dtype_bits,
                          int dtype_lanes, int device_type, int device_id, TVMArrayHandle* out) {
  DLDataType t;
  DLDevice dev;
  tvmrt_ndarray* a;
  if (out == NULL || (ndim > 0 && shape == NULL)) {
    return tvmrt_fail("InvalidArgumentError", "TVMArrayAlloc: shape and out are required");
  }
  if (tvmrt_device_ready(device_type, device_id, "TVMArrayAlloc") != 0) return -1;
  if (dtype_code < 0 || dtype_code > 255 || dtype_bits <= 0 || dtype_bits > 255 ||
      dtype_lanes <= 0 || dtype_lanes > 65535) {
    return tvmrt_fail("DataTypeError", "TVMArrayAlloc: invalid dtype (code %d, bits %d, lanes %d)",
                      dtype_code, dtype_bits, dtype_lanes);
  }
  t.code = (uint8_t)dtype_code;
  t.bits = (uint8_t)dtype_bits;
  t.lanes = (uint16_t)dtype_lanes;
  dev.device_type = (DLDeviceType)device_type;
  dev.device_id = device_id;
  a = tvmrt_ndarray_empty_on(shape, ndim, t, dev);
  if (a == NULL) return -1;
  a->dl.device = dev;
  *out = &a->dl;
  return 0;
}

TVM_DLL int TVMArrayFree(TVMArrayHandle handle) {
  tvmrt_ndarray* a;
  if (handle == NULL) return 0;
  a = tvmrt_ndarray_from_handle(handle);
  if (a == NULL) return -1;
  tvmrt_release(&a->hdr);
  return 0;
}

static int bytes_copy(TVMArrayHandle handle, void* data, size_t nbytes, int to_array) {
  size_t have;
  const tvmrt_device_backend* backend;
  const char* what = to_array ? "TVMArrayCopyFromBytes" : "TVMArrayCopyToBytes";
  if (handle == NULL || (data == NULL && nbytes != 0)) {
    return tvmrt_fail("InvalidArgumentError", "%s: array and data are required", what);
  }
  if (tvmrt_device_ready(handle->device.device_type, handle->device.device_id, what) != 0)
    return -1;
  if (tvmrt_tensor_nbytes(handle, &have) != 0)
    return tvmrt_fail("ArrayError", "%s: bad shape", what);
  if (have != nbytes) {
    return tvmrt_fail("ArrayError", "%s: data size and array size mismatch (%zu vs %zu bytes)",
                      what, nbytes, have);
  }
  if (!tvmrt_is_compact(handle)) { /* TVM's words */
    return tvmrt_fail("ArrayError", "%s: only support contiguous array for now", what);
  }
  if (nbytes == 0) return 0;
  if ((backend = tvmrt_device_backend_of(handle->device.device_type)) != NULL) {
    DLDevice cpu = {kDLCPU, 0};
    size_t at = (size_t)handle->byte_offset;
    return to_array ? backend->copy(handle->data, at, handle->device, data, 0, cpu, nbytes)
                    : backend->copy(data, 0, cpu, handle->data, at, handle->device, nbytes);
  }
  if (to_array) {
    memcpy((char*)handle->data + handle->byte_offset, data, nbytes);
  } else {
    memcpy(data, (const char*)handle->data + handle->byte_offset, nbytes);
  }
  return 0;
}

TVM_DLL int TVMArrayCopyFromBytes(TVMArrayHandle handle, void* data, size_t nbytes) {
  return bytes_copy(handle, data, nbytes, 1);
}

TVM_DLL int TVMArrayCopyToBytes(TVMArrayHandle handle, void* data, size_t nbytes) {
  return bytes_copy(handle, data, nbytes, 0);
}

int tvmrt_is_compact(const DLTensor* t) {
  int64_t expect = 1;
  int d;
  if (t->strides == NULL) return 1;
  for (d = t->ndim - 1; d >= 0; --d) { /* as TVM's IsContiguous: dims of 1 take any stride */
    if (t->shape[d] == 1) continue;
    if (t->strides[d] != expect) return 0;
    expect *= t->shape[d];
  }
  return 1;
}

static int64_t stride_of(const DLTensor* t, int d, const int64_t* compact) {
  return t->strides != NULL ? t->strides[d] : compact[d];
}

/* element by element, following each side's strides (a permuted DLPack view, a slice) */
static int copy_strided(const DLTensor* from, DLTensor* to) {
  int64_t idx[RT_MAX_NDIM], fc[RT_MAX_NDIM], tc[RT_MAX_NDIM], count = 1, k, step = 1;
  unsigned bits = (unsigned)from->dtype.bits * from->dtype.lanes;
  size_t elem = bits / 8;
  int d;
  if (from->ndim != to->ndim || bits % 8 != 0 ||
      bits != (unsigned)to->dtype.bits * to->dtype.lanes) {
    return tvmrt_fail("ArrayError",
                      "TVMArrayCopyFromTo: arrays with strides must have one shape and whole-byte "
                      "elements");
  }
  for (d = from->ndim - 1; d >= 0; --d) {
    if (from->shape[d] != to->shape[d]) {
      return tvmrt_fail("ArrayError",
                        "TVMArrayCopyFromTo: arrays with strides must have one shape");
    }
    fc[d] = tc[d] = step;
    step *= from->shape[d];
    idx[d] = 0;
    count *= from->shape[d];
  }
  for (k = 0; k < count; ++k) {
    int64_t fo = 0, too = 0;
    for (d = 0; d < from->ndim; ++d) {
      fo += idx[d] * stride_of(from, d, fc);
      too += idx[d] * stride_of(to, d, tc);
    }
    memmove((char*)to->data + to->byte_offset + too * (int64_t)elem,
            (const char*)from->data + from->byte_offset + fo * (int64_t)elem, elem);
    for (d = from->ndim - 1; d >= 0 && ++idx[d] == from->shape[d]; --d) idx[d] = 0;
  }
  return 0;
}

int tvmrt_copy_tensor(const DLTensor* from, DLTensor* to) {
  const tvmrt_device_backend *src, *dst;
  size_t a, b;
  if (from == NULL || to == NULL) {
    return tvmrt_fail("InvalidArgumentError", "TVMArrayCopyFromTo: both arrays are required");
  }
  if (tvmrt_device_ready(from->device.device_type, from->device.device_id, "TVMArrayCopyFromTo") !=
          0 ||
      tvmrt_device_ready(to->device.device_type, to->device.device_id, "TVMArrayCopyFromTo") != 0) {
    return -1;
  }
  if (tvmrt_tensor_nbytes(from, &a) != 0 || tvmrt_tensor_nbytes(to, &b) != 0) {
    return tvmrt_fail("ArrayError", "TVMArrayCopyFromTo: an array has a bad shape");
  }
  if (a != b) {
    return tvmrt_fail("ArrayError",
                      "TVMArrayCopyFromTo: The size in bytes must exactly match (%zu vs %zu)", a,
                      b);
  }
  src = tvmrt_device_backend_of(from->device.device_type);
  dst = tvmrt_device_backend_of(to->device.device_type);
  if (a != 0 && (src != NULL || dst != NULL)) {
    const tvmrt_device_backend* backend = dst != NULL ? dst : src;
    if (src != NULL && dst != NULL && src != dst) {
      return tvmrt_fail("ArrayError",
                        "TVMArrayCopyFromTo: a copy from %s to %s goes through the "
                        "host (copy to a cpu array first)",
                        src->name, dst->name);
    }
    if (!tvmrt_is_compact(from) || !tvmrt_is_compact(to)) {
      return tvmrt_fail("ArrayError",
                        "TVMArrayCopyFromTo: a copy to or from %s needs compact "
                        "arrays (no strides)",
                        backend->name);
    }
    return backend->copy(to->data, (size_t)to->byte_offset, to->device, from->data,
                         (size_t)from->byte_offset, from->device, a);
  }
  if (a != 0 && (!tvmrt_is_compact(from) || !tvmrt_is_compact(to))) return copy_strided(from, to);
  if (a != 0) {
    memmove((char*)to->data + to->byte_offset, (const char*)from->data + from->byte_offset, a);
  }
  return 0;
}

TVM_DLL int TVMArrayCopyFromTo(TVMArrayHandle from, TVMArrayHandle to, TVMStreamHandle stream) {
  (void)stream;
  return tvmrt_copy_tensor(from, to);
}

TVM_DLL int TVMDeviceAllocDataSpace(DLDevice dev, size_t nbytes, size_t alignment,
                                    DLDataType type_hint, void** out_data) {
  const tvmrt_device_backend* backend = tvmrt_device_backend_of(dev.device_type);
  (void)type_hint;
  if (tvmrt_device_ready(dev.device_type, dev.device_id, "TVMDeviceAllocDataSpace") != 0) return -1;
  if (out_data == NULL) return tvmrt_fail("InvalidArgumentError", "out_data is required");
  if (backend != NULL) return backend->alloc(dev.device_id, nbytes, out_data);
  if (alignment < RT_ALIGN) alignment = RT_ALIGN;
  if ((alignment & (alignment - 1)) != 0 || nbytes > SIZE_MAX - alignment) {
    return tvmrt_fail("InvalidArgumentError", "TVMDeviceAllocDataSpace: bad size or alignment");
  }
  *out_data = aligned_alloc(alignment, (nbytes + alignment - 1) / alignment * alignment);
  if (*out_data == NULL && nbytes != 0) {
    return tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate %zu bytes", nbytes);
  }
  return 0;
}

TVM_DLL int TVMDeviceFreeDataSpace(DLDevice dev, void* ptr) {
  const tvmrt_device_backend* backend = tvmrt_device_backend_of(dev.device_type);
  if (tvmrt_device_ready(dev.device_type, dev.device_id, "TVMDeviceFreeDataSpace") != 0) return -1;
  if (backend != NULL) return backend->free(dev.device_id, ptr);
  free(ptr);
  return 0;
}

TVM_DLL int TVMDeviceCopyDataFromTo(DLTensor* from, DLTensor* to, TVMStreamHandle stream) {
  (void)stream;
  return tvmrt_copy_tensor(from, to);
}

/* TVM's dtype strings: int8..64, uint, float16..64, bool, handle, bfloat16, <base><bits>x<n> */
int tvmrt_parse_dtype(const char* s, DLDataType* out) {
  static const struct {
    const char* base;
    uint8_t code;
    int bits;
  } bases[] = {{"int", kDLInt, 32},
               {"uint", kDLUInt, 32},
               {"float", kDLFloat, 32},
               {"handle", 3, 64},
               {"bfloat", kDLBfloat, 16}};
  size_t i;
  if (strcmp(s, "bool") == 0) {
    out->code = kDLUInt;
    out->bits = 1;
    out->lanes = 1;
    return 0;
  }
  for (i = sizeof(bases) / sizeof(bases[0]); i-- > 0;) {
    size_t n = strlen(bases[i].base);
    const char* p = s + n;
    long bits = bases[i].bits, lanes = 1;
    char* end;
    if (strncmp(s, bases[i].base, n) != 0) continue;
    if (*p >= '0' && *p <= '9') {
      bits = strtol(p, &end, 10);
      p = end;
    }
    if (*p == 'x') {
      lanes = strtol(p + 1, &end, 10);
      if (end == p + 1) break;
      p = end;
    }
    if (*p != '\0' || bits <= 0 || bits > 255 || lanes <= 0 || lanes > 65535) break;
    out->code = bases[i].code;
    out->bits = (uint8_t)bits;
    out->lanes = (uint16_t)lanes;
    return 0;
  }
  return tvmrt_fail("DataTypeError", "unknown type %.64s", s);
}
