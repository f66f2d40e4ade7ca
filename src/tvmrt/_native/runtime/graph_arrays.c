/*
 * The graph executor's inputs and arrays, with the Python runtime's checks and words
 * (runtime/graph_executor/checks.py, executor.py): input keys, shape and dtype texts, whether
 * an array can stand in for an entry without a copy (check_external), and params copied in
 * (load_params, a factory's embedded params).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_executor.h"

void tvmrt_ge_shape_text(const DLTensor* t, char* buf, size_t n) {
  size_t off = 0;
  int d;
  off += (size_t)snprintf(buf, n, "(");
  for (d = 0; d < t->ndim && off < n; ++d) {
    off += (size_t)snprintf(buf + off, n - off, d + 1 == t->ndim && d == 0 ? "%lld," : "%lld%s",
                            (long long)t->shape[d], d + 1 == t->ndim ? "" : ", ");
  }
  if (off < n) snprintf(buf + off, n - off, ")");
}

int tvmrt_ge_same_layout(const DLTensor* a, const DLTensor* b) {
  int d;
  if (a->ndim != b->ndim || a->dtype.code != b->dtype.code || a->dtype.bits != b->dtype.bits ||
      a->dtype.lanes != b->dtype.lanes) {
    return 0;
  }
  for (d = 0; d < a->ndim; ++d) {
    if (a->shape[d] != b->shape[d]) return 0;
  }
  return 1;
}

int tvmrt_ge_input_index(const graph_executor* ge, const char* name) {
  size_t i;
  int found = -1;
  for (i = 0; i < ge->g.num_args; ++i) {
    if (strcmp(ge->g.nodes[ge->g.arg_nodes[i]].name, name) == 0) found = (int)i;
  }
  return found;
}

uint32_t tvmrt_ge_input_eid(const graph_executor* ge, size_t index) {
  return tvmrt_graph_eid(&ge->g, ge->g.arg_nodes[index], 0);
}

uint32_t tvmrt_ge_output_eid(const graph_executor* ge, size_t index) {
  return tvmrt_graph_eid(&ge->g, ge->g.heads[index].nid, ge->g.heads[index].index);
}

static void device_text(DLDevice d, char* buf, size_t n) {
  static const char* names[] = {NULL,     "cpu",       "cuda",    "cuda_host",    "opencl",
                                NULL,     NULL,        "vulkan",  "metal",        "vpi",
                                "rocm",   "rocm_host", "ext_dev", "cuda_managed", "oneapi",
                                "webgpu", "hexagon"};
  const char* name = d.device_type >= 0 && d.device_type <= 16 ? names[d.device_type] : NULL;
  if (name != NULL) {
    snprintf(buf, n, "%s(%d)", name, d.device_id);
  } else {
    snprintf(buf, n, "device(%d, %d)", (int)d.device_type, d.device_id);
  }
}

int tvmrt_ge_external_problem(const DLTensor* want, const DLTensor* ext, const char* label) {
  char data_at[32];
  if (ext == NULL) return tvmrt_fail("ArgumentTypeError", "%s: expected an array", label);
  if (!tvmrt_ge_same_layout(ext, want)) {
    char ws[256], wd[64], gs[256], gd[64];
    tvmrt_ge_shape_text(want, ws, sizeof(ws));
    tvmrt_ge_shape_text(ext, gs, sizeof(gs));
    tvmrt_dtype_text(want->dtype, wd, sizeof(wd));
    tvmrt_dtype_text(ext->dtype, gd, sizeof(gd));
    return tvmrt_fail("ArrayError", "%s: expected shape %s and dtype %s, got shape %s and dtype %s",
                      label, ws, wd, gs, gd);
  }
  if (ext->device.device_type != want->device.device_type ||
      ext->device.device_id != want->device.device_id) {
    char w[48], g[48];
    device_text(want->device, w, sizeof(w));
    device_text(ext->device, g, sizeof(g));
    return tvmrt_fail("ArrayError", "%s: expected an array on %s, got one on %s", label, w, g);
  }
  if (!tvmrt_is_compact(ext)) {
    return tvmrt_fail("ArrayError",
                      "%s: the array is not contiguous (kernels need dense row-major data)", label);
  }
  snprintf(data_at, sizeof(data_at), "%#llx",
           (unsigned long long)(uintptr_t)((char*)ext->data + ext->byte_offset));
  if ((uintptr_t)((char*)ext->data + ext->byte_offset) % RT_ALIGN != 0) {
    return tvmrt_fail(
        "ArrayError",
        "%s: data at %s is not %d-byte aligned, which compiled kernels require; "
        "use set_input (it copies) or allocate with tvmrt.runtime.empty (TVMArrayAlloc "
        "from C)",
        label, data_at, RT_ALIGN);
  }
  return 0;
}

int tvmrt_ge_writable_input(const graph_executor* ge, size_t idx) {
  if (!ge->read_only[idx]) return 0;
  return tvmrt_fail("ArrayError",
                    "input '%.200s' is bound to read-only memory (set_input_zero_copy); bind "
                    "writable memory to copy into it",
                    ge->g.nodes[ge->g.arg_nodes[idx]].name);
}

int tvmrt_graph_set_params(tvmrt_module* executor, const tvmrt_params* params, int embedded) {
  graph_executor* ge = (graph_executor*)executor->impl;
  size_t i;
  for (i = 0; i < params->count; ++i) {
    int idx = tvmrt_ge_input_index(ge, params->names[i]);
    const DLTensor* src;
    DLTensor* dst;
    size_t have, want;
    if (idx < 0) continue; /* unknown names are ignored, as TVM */
    /* as TVM: load_params names its params (get_input_info leaves them out); a factory's
       embedded ones are set as inputs */
    if (!embedded) ge->is_param[idx] = 1;
    if (tvmrt_ge_writable_input(ge, (size_t)idx) != 0) return -1;
    src = &params->arrays[i]->dl;
    dst = &ge->entries[tvmrt_ge_input_eid(ge, (size_t)idx)];
    /* the Python runtime's rules: load_params wants the input's shape and dtype; a
       factory's embedded param may have another shape of the same dtype and byte count
       (TVM copies it) */
    if (!tvmrt_ge_same_layout(src, dst) &&
        (!embedded || src->dtype.code != dst->dtype.code || src->dtype.bits != dst->dtype.bits ||
         src->dtype.lanes != dst->dtype.lanes || tvmrt_tensor_nbytes(src, &have) != 0 ||
         tvmrt_tensor_nbytes(dst, &want) != 0 || have != want)) {
      char ss[256], sd[64], ws[256], wd[64];
      tvmrt_ge_shape_text(src, ss, sizeof(ss));
      tvmrt_dtype_text(src->dtype, sd, sizeof(sd));
      tvmrt_ge_shape_text(dst, ws, sizeof(ws));
      tvmrt_dtype_text(dst->dtype, wd, sizeof(wd));
      if (embedded) {
        return tvmrt_fail("ArrayError",
                          "param '%.200s' embedded in the factory does not fit the graph's input "
                          "'%.200s': expected shape %s and dtype %s, got shape %s and dtype %s",
                          params->names[i], params->names[i], ws, wd, ss, sd);
      }
      return tvmrt_fail("ArrayError",
                        "param '%.200s' has shape %s and dtype %s, but the graph's input has "
                        "shape %s and dtype %s",
                        params->names[i], ss, sd, ws, wd);
    }
    if (tvmrt_copy_tensor(src, dst) != 0) {
      char msg[512];
      snprintf(msg, sizeof(msg), "%s", tvmrt_peek_last_error());
      return tvmrt_fail("ArrayError", "param '%.200s': %s", params->names[i], msg);
    }
  }
  return 0;
}
