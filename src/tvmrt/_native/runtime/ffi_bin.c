/*
 * The module tree of a single-file tvm-ffi build (TVM >= 0.22): `__tvm_ffi__library_bin`,
 * read with the bounded reader as the Python runtime's loaders/ffi.py parse_library_bin:
 *
 *   u64 nbytes | vec<u64> indptr | vec<u64> children | (str kind [str payload])*
 *
 * one entry per module, "_lib" (the library itself) without a payload; every other
 * payload is length-prefixed and goes to the kind's blob loader (blob.c's table), which
 * must read all of it. A kind without a loader (e.g. relax.VMExecutable) is skipped, as in
 * the Python runtime; the root is module 0, or the library when module 0 was skipped.
 */
#include <stdlib.h>
#include <string.h>

#include "rt.h"

#define MAX_MODULES 4096

static int check_tree(const uint64_t* indptr, uint64_t nptr, const uint64_t* children,
                      uint64_t nchild) {
  uint64_t i, k, n = nptr - 1;
  if (nptr < 2 || nptr - 1 > MAX_MODULES || indptr[0] != 0 || indptr[n] != nchild) {
    return tvmrt_fail("ModuleLoadError",
                      "__tvm_ffi__library_bin: invalid import tree (%llu row pointers for %llu "
                      "children; at most %d modules)",
                      (unsigned long long)nptr, (unsigned long long)nchild, MAX_MODULES);
  }
  for (i = 0; i < n; ++i) {
    if (indptr[i] > indptr[i + 1]) {
      return tvmrt_fail("ModuleLoadError",
                        "__tvm_ffi__library_bin: the import tree's indptr decreases at %llu",
                        (unsigned long long)i);
    }
  }
  for (i = 0; i < n; ++i) { /* children after their parent (TVM writes depth first) */
    for (k = indptr[i]; k < indptr[i + 1]; ++k) {
      if (children[k] <= i || children[k] >= n) {
        return tvmrt_fail("ModuleLoadError", "__tvm_ffi__library_bin: module %llu imports %llu",
                          (unsigned long long)i, (unsigned long long)children[k]);
      }
    }
  }
  return 0;
}

/* module i's entry: the library, a loaded module, or NULL (skipped, *skipped set) */
static int read_entry(tvmrt_reader* r, tvmrt_module* lib, tvmrt_module** out, int* libs) {
  char* kind = NULL;
  uint64_t len;
  tvmrt_reader sub;
  tvmrt_blob_loader_fn load;
  int status = -1;
  *out = NULL;
  if (tvmrt_read_str(r, &kind, NULL, "module kind") != 0) return -1;
  if (strcmp(kind, "_lib") == 0) {
    ++*libs;
    tvmrt_retain(&lib->hdr);
    *out = lib;
    free(kind);
    return 0;
  }
  if (tvmrt_read_u64(r, &len, "module payload size") != 0) goto done;
  if (len > r->size - r->off) {
    tvmrt_read_short(r, "module payload", (size_t)len);
    goto done;
  }
  sub.data = r->data + r->off;
  sub.size = (size_t)len;
  sub.off = 0;
  sub.what = "__tvm_ffi__library_bin module";
  sub.container = RT_BLOB_FFI;
  sub.error = r->error;
  r->off += (size_t)len;
  load = tvmrt_blob_loader(kind);
  if (load == NULL) { /* skipped, as the Python runtime skips it */
    status = 0;
    goto done;
  }
  *out = load(&sub);
  if (*out == NULL) goto done;
  if (sub.off != sub.size) {
    tvmrt_fail("ModuleLoadError",
               "__tvm_ffi__library_bin: %zu bytes are left over after the %.100s module",
               sub.size - sub.off, kind);
    goto done;
  }
  status = 0;
done:
  free(kind);
  return status;
}

tvmrt_module* tvmrt_ffi_library_bin(const uint8_t* data, size_t limit, tvmrt_module* lib) {
  tvmrt_reader r = {data, limit, 0, "__tvm_ffi__library_bin", RT_BLOB_FFI, "ModuleLoadError"};
  uint64_t nbytes, nptr = 0, nchild = 0, n = 0, i, k;
  uint64_t *indptr = NULL, *children = NULL;
  tvmrt_module** mods = NULL;
  tvmrt_module* root = NULL;
  int libs = 0;
  if (tvmrt_read_u64(&r, &nbytes, "library binary size") != 0) return NULL;
  if (nbytes > limit - r.off) {
    tvmrt_fail("ModuleLoadError", "__tvm_ffi__library_bin claims %llu bytes, its symbol holds %zu",
               (unsigned long long)nbytes, limit - r.off);
    return NULL;
  }
  r.data = data + 8;
  r.size = (size_t)nbytes;
  r.off = 0;
  if (tvmrt_read_u64_vec(&r, &indptr, &nptr, "import tree indptr") != 0 ||
      tvmrt_read_u64_vec(&r, &children, &nchild, "import tree children") != 0 ||
      check_tree(indptr, nptr, children, nchild) != 0) {
    goto done;
  }
  n = nptr - 1;
  mods = (tvmrt_module**)calloc((size_t)n, sizeof(tvmrt_module*));
  if (mods == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate the module list");
    goto done;
  }
  for (i = 0; i < n; ++i) {
    if (read_entry(&r, lib, &mods[i], &libs) != 0) goto done;
  }
  if (libs != 1) {
    tvmrt_fail("ModuleLoadError", "__tvm_ffi__library_bin: expected one '_lib' module, found %d",
               libs);
    goto done;
  }
  if (r.off != r.size) {
    tvmrt_fail("ModuleLoadError", "__tvm_ffi__library_bin: %zu bytes are left over",
               r.size - r.off);
    goto done;
  }
  for (i = 0; i < n; ++i) {
    for (k = indptr[i]; k < indptr[i + 1]; ++k) {
      tvmrt_module* child = mods[children[k]];
      if (mods[i] == NULL || child == NULL || child == mods[i]) continue;
      if (tvmrt_module_import(mods[i], child) != 0) goto done;
    }
  }
  root = mods[0] != NULL ? mods[0] : lib;
  tvmrt_retain(&root->hdr);
done:
  for (i = 0; mods != NULL && i < n; ++i) {
    if (mods[i] != NULL) tvmrt_release(&mods[i]->hdr);
  }
  free(mods);
  free(indptr);
  free(children);
  return root;
}
