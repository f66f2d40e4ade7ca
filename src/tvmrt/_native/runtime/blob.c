/*
 * The module blob `__tvm_dev_mblob` (PackImportsToBytes), read with the bounded reader
 * (reader.c): "_lib" (the library itself) and "_import_tree" entries are the blob's
 * structure; every other entry is a module whose type key picks its loader in k_loaders
 * (adding a module type is one loader function and one table line).
 */
#include <stdlib.h>
#include <string.h>

#include "relax.h"
#include "rt.h"
#include "vm.h"

#define MAX_BLOB_MODULES 4096

/* ---------------------------------------------------------------------------------- */
/* the loaders of blob entries, by type key (TVM's runtime.module.loadbinary_<key>)     */

static const struct {
  const char* type_key;
  tvmrt_module* (*load)(tvmrt_reader* r); /* a new module, or NULL with an error set */
} k_loaders[] = {
    {"GraphExecutorFactory", tvmrt_graph_factory_load},
    {"GraphRuntimeFactory", tvmrt_graph_factory_load}, /* its name before TVM 0.8 */
    {"VMExecutable", tvmrt_vm_exec_load_blob},         /* a Relay VM executable (vm_exec.c) */
    {"AotExecutorFactory", tvmrt_aot_factory_load},
    {"metadata_module", tvmrt_aot_metadata_load},
    {"cuda", tvmrt_cuda_module_load},
    {"opencl", tvmrt_opencl_module_load},
    {"relax.Executable", tvmrt_rx_exec_load_blob_019}, /* a Relax VM executable (relax_exec.c) */
    {"relax.VMExecutable", tvmrt_rx_exec_load_blob},
};
#define NUM_LOADERS (sizeof(k_loaders) / sizeof(k_loaders[0]))

tvmrt_blob_loader_fn tvmrt_blob_loader(const char* key) {
  size_t i;
  for (i = 0; i < NUM_LOADERS; ++i) {
    if (strcmp(k_loaders[i].type_key, key) == 0) return k_loaders[i].load;
  }
  return NULL;
}

static tvmrt_module* load_entry(const char* key, tvmrt_reader* r) {
  tvmrt_blob_loader_fn load = tvmrt_blob_loader(key);
  if (load != NULL) return load(r);
  tvmrt_fail("ModuleLoadError",
             "Binary was created using {%.100s} but a loader of that name is not registered. "
             "libtvmrt_runtime loads GraphExecutorFactory (and GraphRuntimeFactory), "
             "AotExecutorFactory, metadata_module, VMExecutable (the Relay VM), "
             "relax.Executable and relax.VMExecutable (the Relax VM), cuda and opencl modules.",
             key);
  return NULL;
}

/* ---------------------------------------------------------------------------------- */
/* the module blob                                                                     */

/* Wire the import tree (CSR); children must come after their parent (TVM writes the tree
   depth first), which also rules out cycles. */
static int apply_tree(tvmrt_module** mods, uint64_t n, const uint64_t* row, uint64_t nrow,
                      const uint64_t* child, uint64_t nchild) {
  uint64_t i, k;
  if (nrow != n + 1 || row[0] != 0 || row[n] != nchild) {
    return tvmrt_fail("ModuleLoadError",
                      "module blob: the import tree has %llu row pointers "
                      "for %llu modules and %llu children",
                      (unsigned long long)nrow, (unsigned long long)n, (unsigned long long)nchild);
  }
  for (i = 0; i < n; ++i) { /* all of row_ptr first: then every row[i + 1] <= nchild */
    if (row[i] > row[i + 1]) {
      return tvmrt_fail("ModuleLoadError",
                        "module blob: the import tree's row_ptr decreases at "
                        "%llu",
                        (unsigned long long)i);
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

tvmrt_module* tvmrt_process_blob(const uint8_t* blob, size_t limit, tvmrt_module* lib,
                                 int container) {
  tvmrt_reader r = {blob, 8, 0, "module blob", container, "ModuleLoadError"};
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
      if (has_lib) { /* the library is one module: twice, the tree could import it into itself */
        tvmrt_fail("ModuleLoadError", "module blob: the blob holds more than one '_lib' entry");
        free(key);
        goto done;
      }
      has_lib = 1;
      tvmrt_retain(&lib->hdr);
      mods[nmods++] = lib;
    } else if (strcmp(key, "_import_tree") == 0) {
      if (has_tree || tvmrt_read_u64_vec(&r, &row, &nrow, "import tree row_ptr") != 0 ||
          tvmrt_read_u64_vec(&r, &child, &nchild, "import tree children") != 0) {
        if (has_tree) tvmrt_fail("ModuleLoadError", "module blob has two import trees");
        free(key);
        goto done;
      }
      has_tree = 1;
    } else {
      mods[nmods] = load_entry(key, &r);
      if (mods[nmods] == NULL) {
        free(key);
        goto done;
      }
      nmods++;
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
