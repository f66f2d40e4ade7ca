/*
 * The metadata of a Relay AOT build (TVM 0.10 to 0.20, C++ runtime interface): the
 * `TVMMetadata` struct its `get_c_metadata` returns (tvm/runtime/metadata_types.h, version
 * 1), checked and copied into memory of the runtime's own, with the Python runtime's checks
 * and words (runtime/executor/_aot.py). The struct lives in the library; its counts, ranks,
 * shapes, dtypes and names are all checked before they are used.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

#define META_VERSION 1
#define MAX_TENSORS (1 << 16)
#define MAX_TENSOR_BYTES (1ULL << 48)

/* TVM's layout (metadata_types.h) */
typedef struct {
  const char* name;
  const int64_t* shape;
  int64_t num_shape;
  DLDataType dtype;
} meta_tensor_info;

typedef struct {
  int64_t version;
  const meta_tensor_info* inputs;
  int64_t num_inputs;
  const meta_tensor_info* outputs;
  int64_t num_outputs;
  const meta_tensor_info* workspace_pools;
  int64_t num_workspace_pools;
  const void* constant_pools;
  int64_t num_constant_pools;
  const char* mod_name;
} meta_struct;

/* (a function: on 32-bit machines a size_t is never this big, and a comparison says so) */
static int too_big(uint64_t nbytes) { return nbytes >= MAX_TENSOR_BYTES; }

static int copy_name(const char* name, char** out, const char* what, int64_t i) {
  size_t n;
  if (name == NULL) name = "";
  n = strnlen(name, RT_MAX_NAME);
  if (n == RT_MAX_NAME) {
    return tvmrt_fail("ModuleLoadError",
                      "AOT metadata: the name of %s %lld is longer than %d bytes", what,
                      (long long)i, RT_MAX_NAME - 1);
  }
  *out = (char*)malloc(n + 1);
  if (*out == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot copy AOT metadata");
  memcpy(*out, name, n + 1);
  return 0;
}

static int read_tensor(const meta_tensor_info* info, const char* what, int64_t i,
                       tvmrt_aot_tensor* out) {
  DLTensor t;
  size_t nbytes;
  int d;
  DLDataType dt = info->dtype;
  if (info->num_shape < 0 || info->num_shape > RT_MAX_NDIM ||
      (info->num_shape > 0 && info->shape == NULL)) {
    return tvmrt_fail("ModuleLoadError", "AOT metadata: %s %lld has rank %lld (expected 0 to %d)",
                      what, (long long)i, (long long)info->num_shape, RT_MAX_NDIM);
  }
  out->ndim = (int)info->num_shape;
  for (d = 0; d < out->ndim; ++d) {
    out->shape[d] = info->shape[d];
    if (out->shape[d] < 0) {
      return tvmrt_fail("ModuleLoadError",
                        "AOT metadata: %s %lld has a negative dimension %lld (axis %d)", what,
                        (long long)i, (long long)out->shape[d], d);
    }
  }
  if ((dt.code != kDLInt && dt.code != kDLUInt && dt.code != kDLFloat && dt.code != kDLBfloat) ||
      dt.bits == 0 || dt.lanes == 0) {
    return tvmrt_fail("ModuleLoadError",
                      "AOT metadata: %s %lld has dtype (code %d, bits %d, lanes %d); expected an "
                      "int, uint, float or bfloat type",
                      what, (long long)i, dt.code, dt.bits, dt.lanes);
  }
  out->dtype = dt;
  memset(&t, 0, sizeof(t));
  t.ndim = out->ndim;
  t.shape = out->shape;
  t.dtype = dt;
  if (tvmrt_tensor_nbytes(&t, &nbytes) != 0 || too_big(nbytes)) {
    return tvmrt_fail("ModuleLoadError", "AOT metadata: %s %lld needs 2^48 bytes or more", what,
                      (long long)i);
  }
  return copy_name(info->name, &out->name, what, i);
}

static int read_list(const meta_tensor_info* list, int64_t count, const char* what,
                     tvmrt_aot_tensor* out) {
  int64_t i;
  for (i = 0; i < count; ++i) {
    if (read_tensor(&list[i], what, i, &out[i]) != 0) return -1;
  }
  return 0;
}

static int check_count(int64_t count, const void* list, const char* what) {
  if (count < 0 || count > MAX_TENSORS || (count > 0 && list == NULL)) {
    return tvmrt_fail("ModuleLoadError", "AOT metadata: %lld %s is out of range (0 to %d)",
                      (long long)count, what, MAX_TENSORS);
  }
  return 0;
}

int tvmrt_aot_read_metadata(const void* address, tvmrt_aot_meta* out) {
  const meta_struct* m = (const meta_struct*)address;
  size_t n;
  memset(out, 0, sizeof(*out));
  if (m == NULL) return tvmrt_fail("ModuleLoadError", "AOT metadata: get_c_metadata returned NULL");
  if (m->version != META_VERSION) {
    return tvmrt_fail("ModuleLoadError",
                      "AOT metadata version %lld is not supported (tvmrt reads version %d, TVM "
                      "0.10 to 0.20)",
                      (long long)m->version, META_VERSION);
  }
  if (m->num_workspace_pools != 0) {
    return tvmrt_fail("ModuleLoadError",
                      "the AOT model was built with unified static memory planning (workspace "
                      "pools); tvmrt runs AOT builds without USMP only");
  }
  if (check_count(m->num_inputs, m->inputs, "inputs") != 0 ||
      check_count(m->num_outputs, m->outputs, "outputs") != 0) {
    return -1;
  }
  n = (size_t)(m->num_inputs + m->num_outputs);
  out->tensors = (tvmrt_aot_tensor*)calloc(n ? n : 1, sizeof(tvmrt_aot_tensor));
  if (out->tensors == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot copy AOT metadata");
  out->num_inputs = (size_t)m->num_inputs;
  out->num_outputs = (size_t)m->num_outputs;
  if (read_list(m->inputs, m->num_inputs, "input", out->tensors) != 0 ||
      read_list(m->outputs, m->num_outputs, "output", out->tensors + out->num_inputs) != 0 ||
      copy_name(m->mod_name != NULL ? m->mod_name : "default", &out->mod_name, "model", 0) != 0) {
    tvmrt_aot_meta_free(out);
    return -1;
  }
  return 0;
}

void tvmrt_aot_meta_free(tvmrt_aot_meta* m) {
  size_t i;
  if (m->tensors != NULL) {
    for (i = 0; i < m->num_inputs + m->num_outputs; ++i) free(m->tensors[i].name);
  }
  free(m->tensors);
  free(m->mod_name);
  memset(m, 0, sizeof(*m));
}
