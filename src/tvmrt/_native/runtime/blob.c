/*
 * Binary formats, read with a bounded reader (no read past the given size, counts checked
 * against the bytes left): the tensor record (SaveDLTensor), the params blob
 * (save_param_dict) and the module blob `__tvm_dev_mblob` (PackImportsToBytes).
 */
#include <stdlib.h>
#include <string.h>

#include "rt.h"

#define NDARRAY_MAGIC 0xDD5E40F096B4A13FULL
#define NDARRAY_LIST_MAGIC 0xF7E58D4F05049CB7ULL
#define MAX_BLOB_MODULES 4096

static int short_read(tvmrt_reader* r, const char* field, size_t need) {
  return tvmrt_fail("ParamsFormatError",
                 "%s: truncated: %s needs %zu bytes but only %zu remain at byte offset %zu",
                 r->what, field, need, r->size - r->off, r->off);
}

int tvmrt_read_bytes(tvmrt_reader* r, void* out, size_t n, const char* field) {
  if (n > r->size - r->off) return short_read(r, field, n);
  memcpy(out, r->data + r->off, n);
  r->off += n;
  return 0;
}

int tvmrt_read_u64(tvmrt_reader* r, uint64_t* out, const char* field) {
  uint8_t b[8];
  int i;
  if (tvmrt_read_bytes(r, b, 8, field) != 0) return -1;
  *out = 0;
  for (i = 7; i >= 0; --i) *out = (*out << 8) | b[i]; /* little-endian */
  return 0;
}

int tvmrt_read_count(tvmrt_reader* r, uint64_t* out, size_t min_item, const char* field) {
  if (tvmrt_read_u64(r, out, field) != 0) return -1;
  if (min_item > 0 && *out > (r->size - r->off) / min_item) {
    return tvmrt_fail("ParamsFormatError",
                   "%s: %s is %llu, more than the %zu bytes left can hold at byte offset %zu",
                   r->what, field, (unsigned long long)*out, r->size - r->off, r->off - 8);
  }
  return 0;
}

int tvmrt_read_str(tvmrt_reader* r, char** out, size_t* len, const char* field) {
  uint64_t n;
  char* s;
  *out = NULL;
  if (tvmrt_read_u64(r, &n, field) != 0) return -1;
  if (n > r->size - r->off) return short_read(r, field, (size_t)(n > SIZE_MAX ? SIZE_MAX : n));
  s = (char*)malloc((size_t)n + 1);
  if (s == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate %s", field);
  memcpy(s, r->data + r->off, (size_t)n);
  s[n] = '\0';
  r->off += (size_t)n;
  *out = s;
  if (len != NULL) *len = (size_t)n;
  return 0;
}

static int32_t le32(const uint8_t* b) {
  return (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                   (uint32_t)b[3] << 24);
}

int tvmrt_read_tensor(tvmrt_reader* r, tvmrt_ndarray** out) {
  uint64_t magic, reserved, nbytes;
  uint8_t head[16];
  int64_t shape[RT_MAX_NDIM];
  DLDataType t;
  int32_t ndim, i;
  size_t expect;
  tvmrt_ndarray* a;
  *out = NULL;
  if (tvmrt_read_u64(r, &magic, "tensor magic") != 0 || tvmrt_read_u64(r, &reserved, "reserved") != 0) {
    return -1;
  }
  if (magic != NDARRAY_MAGIC) {
    return tvmrt_fail("ParamsFormatError", "%s: Invalid DLTensor file format: magic is %#llx, "
                   "expected %#llx", r->what, (unsigned long long)magic, NDARRAY_MAGIC);
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
                     "shape and dtype (%d bits)", r->what, (unsigned long long)nbytes, t.bits);
    }
  }
  if (nbytes > r->size - r->off) return short_read(r, "tensor data", (size_t)nbytes);
  a = tvmrt_ndarray_empty(shape, ndim, t);
  if (a == NULL) return -1;
  memcpy(a->dl.data, r->data + r->off, (size_t)nbytes);
  r->off += (size_t)nbytes;
  *out = a;
  return 0;
}

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

int tvmrt_params_parse(const uint8_t* data, size_t size, int names_only, tvmrt_params* out) {
  tvmrt_reader r = {data, size, 0, "params blob"};
  uint64_t magic, reserved, n, count;
  size_t i;
  memset(out, 0, sizeof(*out));
  if (tvmrt_read_u64(&r, &magic, "list magic") != 0 || tvmrt_read_u64(&r, &reserved, "reserved") != 0) {
    return -1;
  }
  if (magic != NDARRAY_LIST_MAGIC) {
    return tvmrt_fail("ParamsFormatError",
                   "params blob: list magic is 0x%016llx, expected 0x%016llx (not a TVM params "
                   "blob) at byte offset 0", (unsigned long long)magic, NDARRAY_LIST_MAGIC);
  }
  if (tvmrt_read_count(&r, &n, 8, "number of names") != 0) return -1;
  out->names = (char**)calloc(n ? (size_t)n : 1, sizeof(char*));
  if (out->names == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate names");
  out->count = (size_t)n;
  for (i = 0; i < n; ++i) {
    if (tvmrt_read_str(&r, &out->names[i], NULL, "param name") != 0) goto fail;
  }
  if (tvmrt_read_u64(&r, &count, "number of tensors") != 0) goto fail;
  if (count != n) {
    tvmrt_fail("ParamsFormatError",
            "params blob: number of tensors is %llu, expected %llu (one per name) at byte "
            "offset %zu", (unsigned long long)count, (unsigned long long)n, r.off - 8);
    goto fail;
  }
  if (names_only) return 0;
  out->arrays = (tvmrt_ndarray**)calloc(n ? (size_t)n : 1, sizeof(tvmrt_ndarray*));
  if (out->arrays == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate params");
    goto fail;
  }
  for (i = 0; i < n; ++i) {
    if (tvmrt_read_tensor(&r, &out->arrays[i]) != 0) goto fail;
  }
  return 0;
fail:
  tvmrt_params_free(out);
  return -1;
}

/* ---------------------------------------------------------------------------------- */
/* the module blob                                                                     */

static int read_u64_vec(tvmrt_reader* r, uint64_t** out, uint64_t* n, const char* field) {
  uint64_t i;
  *out = NULL;
  if (tvmrt_read_count(r, n, 8, field) != 0) return -1;
  *out = (uint64_t*)malloc((size_t)(*n ? *n : 1) * sizeof(uint64_t));
  if (*out == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate %s", field);
  for (i = 0; i < *n; ++i) {
    if (tvmrt_read_u64(r, &(*out)[i], field) != 0) return -1;
  }
  return 0;
}

/* Wire the import tree (CSR); children must come after their parent (TVM writes the tree
   depth first), which also rules out cycles. */
static int apply_tree(tvmrt_module** mods, uint64_t n, const uint64_t* row, uint64_t nrow,
                      const uint64_t* child, uint64_t nchild) {
  uint64_t i, k;
  if (nrow != n + 1 || row[0] != 0 || row[n] != nchild) {
    return tvmrt_fail("ModuleLoadError", "module blob: the import tree has %llu row pointers "
                   "for %llu modules and %llu children", (unsigned long long)nrow,
                   (unsigned long long)n, (unsigned long long)nchild);
  }
  for (i = 0; i < n; ++i) { /* all of row_ptr first: then every row[i + 1] <= nchild */
    if (row[i] > row[i + 1]) {
      return tvmrt_fail("ModuleLoadError", "module blob: the import tree's row_ptr decreases at "
                     "%llu", (unsigned long long)i);
    }
  }
  for (i = 0; i < n; ++i) {
    for (k = row[i]; k < row[i + 1]; ++k) {
      if (child[k] <= i || child[k] >= n) {
        return tvmrt_fail("ModuleLoadError", "module blob: module %llu imports module %llu",
                       (unsigned long long)i, (unsigned long long)child[k]);
      }
      if (tvmrt_module_import(mods[i], mods[child[k]]) != 0) return -1;
    }
  }
  return 0;
}

tvmrt_module* tvmrt_process_blob(const uint8_t* blob, size_t limit, tvmrt_module* lib) {
  tvmrt_reader r = {blob, 8, 0, "module blob"};
  uint64_t nbytes, n, i, nrow = 0, nchild = 0, nmods = 0;
  uint64_t *row = NULL, *child = NULL;
  tvmrt_module** mods = NULL;
  tvmrt_module* root = NULL;
  int has_lib = 0, has_tree = 0;
  if (limit < 8) {
    tvmrt_fail("ModuleLoadError", "module blob: %zu bytes, too short for its size field", limit);
    return NULL;
  }
  if (tvmrt_read_u64(&r, &nbytes, "blob size") != 0) return NULL;
  if (nbytes > limit - 8) {
    tvmrt_fail("ModuleLoadError", "module blob claims %llu bytes, its symbol holds %zu",
            (unsigned long long)nbytes, limit - 8);
    return NULL;
  }
  r.data = blob + 8;
  r.size = (size_t)nbytes;
  r.off = 0;
  if (tvmrt_read_count(&r, &n, 8, "number of blob entries") != 0) return NULL;
  if (n > MAX_BLOB_MODULES) {
    tvmrt_fail("ModuleLoadError", "module blob has %llu entries (at most %d)",
            (unsigned long long)n, MAX_BLOB_MODULES);
    return NULL;
  }
  mods = (tvmrt_module**)calloc((size_t)n + 1, sizeof(tvmrt_module*));
  if (mods == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate the module list");
    return NULL;
  }
  for (i = 0; i < n; ++i) {
    char* key = NULL;
    if (tvmrt_read_str(&r, &key, NULL, "module type key") != 0) goto done;
    if (strcmp(key, "_lib") == 0) {
      has_lib = 1;
      tvmrt_retain(&lib->hdr);
      mods[nmods++] = lib;
    } else if (strcmp(key, "_import_tree") == 0) {
      if (has_tree || read_u64_vec(&r, &row, &nrow, "import tree row_ptr") != 0 ||
          read_u64_vec(&r, &child, &nchild, "import tree children") != 0) {
        if (has_tree) tvmrt_fail("ModuleLoadError", "module blob has two import trees");
        free(key);
        goto done;
      }
      has_tree = 1;
    } else if (strcmp(key, "GraphExecutorFactory") == 0 ||
               strcmp(key, "GraphRuntimeFactory") == 0) {
      mods[nmods] = tvmrt_graph_factory_load(&r);
      if (mods[nmods] == NULL) {
        free(key);
        goto done;
      }
      nmods++;
    } else {
      tvmrt_fail("ModuleLoadError",
              "Binary was created using {%.100s} but a loader of that name is not registered. "
              "libtvmrt_runtime loads GraphExecutorFactory (and GraphRuntimeFactory) modules "
              "of CPU kernels.", key);
      free(key);
      goto done;
    }
    free(key);
  }
  if (r.off != r.size) {
    tvmrt_fail("ModuleLoadError", "module blob: %zu bytes are left over after the last module",
            r.size - r.off);
    goto done;
  }
  if (has_tree) {
    if (nmods == 0 || apply_tree(mods, nmods, row, nrow, child, nchild) != 0) {
      if (nmods == 0) tvmrt_fail("ModuleLoadError", "module blob: an import tree but no modules");
      goto done;
    }
    root = mods[0];
  } else if (!has_lib) { /* the old format: the library imports every entry */
    for (i = 0; i < nmods; ++i) {
      if (tvmrt_module_import(lib, mods[i]) != 0) goto done;
    }
    root = lib;
  } else {
    root = mods[0];
  }
  tvmrt_retain(&root->hdr);
done:
  for (i = 0; i < nmods; ++i) tvmrt_release(&mods[i]->hdr);
  free(mods);
  free(row);
  free(child);
  return root;
}
