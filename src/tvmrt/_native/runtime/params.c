/*
 * The tensor record (SaveDLTensor) and the params blob (save_param_dict), read with the
 * bounded reader (reader.c).
 */
#include <stdlib.h>
#include <string.h>

#include "rt.h"

#define NDARRAY_MAGIC 0xDD5E40F096B4A13FULL

static int32_t le32(const uint8_t* b) {
  return (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                   (uint32_t)b[3] << 24);
}

static int read_tensor(tvmrt_reader* r, tvmrt_ndarray** out, int view) {
  uint64_t magic, reserved, nbytes;
  uint8_t head[16];
  int64_t shape[RT_MAX_NDIM];
  DLDataType t;
  int32_t ndim, i;
  size_t expect;
  tvmrt_ndarray* a;
  *out = NULL;
  if (tvmrt_read_u64(r, &magic, "tensor magic") != 0 ||
      tvmrt_read_u64(r, &reserved, "reserved") != 0) {
    return -1;
  }
  if (magic != NDARRAY_MAGIC) {
    return tvmrt_fail("ParamsFormatError",
                      "%s: Invalid DLTensor file format: magic is %#llx, "
                      "expected %#llx",
                      r->what, (unsigned long long)magic, NDARRAY_MAGIC);
  }
  if (tvmrt_read_bytes(r, head, 16, "tensor header") != 0) return -1;
  if (le32(head) != kDLCPU) {
    return tvmrt_fail("ParamsFormatError",
                      "%s: Invalid DLTensor device: can only save as CPU tensor (device type %d)",
                      r->what, le32(head));
  }
  ndim = le32(head + 8);
  if (ndim < 0 || ndim > RT_MAX_NDIM) {
    return tvmrt_fail("ParamsFormatError", "%s: tensor has ndim %d, expected 0 to %d", r->what,
                      ndim, RT_MAX_NDIM);
  }
  t.code = head[12];
  t.bits = head[13];
  t.lanes = (uint16_t)(head[14] | head[15] << 8);
  for (i = 0; i < ndim; ++i) {
    uint64_t d;
    if (tvmrt_read_u64(r, &d, "tensor shape") != 0) return -1;
    if ((int64_t)d < 0) {
      return tvmrt_fail("ParamsFormatError", "%s: tensor has shape[%d] = %lld, expected >= 0",
                        r->what, i, (long long)d);
    }
    shape[i] = (int64_t)d;
  }
  if (tvmrt_read_u64(r, &nbytes, "tensor byte size") != 0) return -1;
  {
    DLTensor probe;
    memset(&probe, 0, sizeof(probe));
    probe.ndim = ndim;
    probe.shape = shape;
    probe.dtype = t;
    probe.dtype.lanes = 1; /* TVM's data_byte_size ignores lanes */
    if (t.bits == 0 || tvmrt_tensor_nbytes(&probe, &expect) != 0 || expect != nbytes) {
      return tvmrt_fail("ParamsFormatError",
                        "%s: Invalid DLTensor file format: data size %llu does not match the "
                        "shape and dtype (%d bits)",
                        r->what, (unsigned long long)nbytes, t.bits);
    }
  }
  if (nbytes > r->size - r->off) return tvmrt_read_short(r, "tensor data", (size_t)nbytes);
  if (view) { /* the blob's bytes themselves, for a caller that copies them while it lives */
    DLTensor in_blob;
    memset(&in_blob, 0, sizeof(in_blob));
    in_blob.data = (void*)(r->data + r->off);
    in_blob.device.device_type = kDLCPU;
    in_blob.ndim = ndim;
    in_blob.shape = shape;
    in_blob.dtype = t;
    a = tvmrt_ndarray_view(&in_blob, NULL);
    if (a == NULL) return -1;
  } else {
    a = tvmrt_ndarray_empty(shape, ndim, t);
    if (a == NULL) return -1;
    memcpy(a->dl.data, r->data + r->off, (size_t)nbytes);
  }
  r->off += (size_t)nbytes;
  *out = a;
  return 0;
}

int tvmrt_read_tensor(tvmrt_reader* r, tvmrt_ndarray** out) { return read_tensor(r, out, 0); }

void tvmrt_params_free(tvmrt_params* p) {
  size_t i;
  for (i = 0; i < p->count; ++i) {
    if (p->names != NULL) free(p->names[i]);
    if (p->arrays != NULL && p->arrays[i] != NULL) tvmrt_release(&p->arrays[i]->hdr);
  }
  free(p->names);
  free(p->arrays);
  memset(p, 0, sizeof(*p));
}

int tvmrt_params_parse(const uint8_t* data, size_t size, int mode, tvmrt_params* out) {
  tvmrt_reader r = {data, size, 0, "params blob", 0, NULL};
  uint64_t magic, reserved, n, count;
  size_t i;
  memset(out, 0, sizeof(*out));
  if (tvmrt_read_u64(&r, &magic, "list magic") != 0 ||
      tvmrt_read_u64(&r, &reserved, "reserved") != 0) {
    return -1;
  }
  if (magic != RT_PARAMS_LIST_MAGIC) {
    return tvmrt_fail("ParamsFormatError",
                      "params blob: list magic is 0x%016llx, expected 0x%016llx (not a TVM params "
                      "blob) at byte offset 0",
                      (unsigned long long)magic, RT_PARAMS_LIST_MAGIC);
  }
  if (tvmrt_read_count(&r, &n, 8, "number of names") != 0) return -1;
  out->names = (char**)calloc(n ? (size_t)n : 1, sizeof(char*));
  if (out->names == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate names");
  out->count = (size_t)n;
  for (i = 0; i < n; ++i) {
    size_t at = r.off, len = 0;
    if (tvmrt_read_str(&r, &out->names[i], &len, "param name") != 0) goto fail;
    if (strlen(out->names[i]) != len) { /* the Python runtime's words */
      tvmrt_fail("ParamsFormatError",
                 "params blob: names[%zu] contains a NUL byte at byte offset %zu", i, at);
      goto fail;
    }
  }
  if (tvmrt_read_u64(&r, &count, "number of tensors") != 0) goto fail;
  if (count != n) {
    tvmrt_fail("ParamsFormatError",
               "params blob: number of tensors is %llu, expected %llu (one per name) at byte "
               "offset %zu",
               (unsigned long long)count, (unsigned long long)n, r.off - 8);
    goto fail;
  }
  if (mode == RT_PARAMS_NAMES) return 0;
  out->arrays = (tvmrt_ndarray**)calloc(n ? (size_t)n : 1, sizeof(tvmrt_ndarray*));
  if (out->arrays == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate params");
    goto fail;
  }
  for (i = 0; i < n; ++i) {
    if (read_tensor(&r, &out->arrays[i], mode == RT_PARAMS_VIEWS) != 0) goto fail;
  }
  return 0;
fail:
  tvmrt_params_free(out);
  return -1;
}

int tvmrt_read_factory_params(tvmrt_reader* r, const char* what, tvmrt_params* out) {
  uint64_t count, nnames, i;
  memset(out, 0, sizeof(*out));
  if (tvmrt_read_u64(r, &count, "number of params") != 0 ||
      tvmrt_read_count(r, &nnames, 8, "number of param names") != 0) {
    return -1;
  }
  if (count != nnames) {
    return tvmrt_fail("ModuleLoadError", "%s %llu params but %llu names", what,
                      (unsigned long long)count, (unsigned long long)nnames);
  }
  out->names = (char**)calloc(nnames ? (size_t)nnames : 1, sizeof(char*));
  out->arrays = (tvmrt_ndarray**)calloc(nnames ? (size_t)nnames : 1, sizeof(tvmrt_ndarray*));
  if (out->names == NULL || out->arrays == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate the factory's params");
    goto fail;
  }
  out->count = (size_t)nnames;
  for (i = 0; i < nnames; ++i) {
    if (tvmrt_read_str(r, &out->names[i], NULL, "param name") != 0) goto fail;
  }
  for (i = 0; i < nnames; ++i) {
    if (tvmrt_read_tensor(r, &out->arrays[i]) != 0) goto fail;
  }
  return 0;
fail:
  tvmrt_params_free(out);
  return -1;
}
