/*
 * dlr.h: DLR 1.10's C API (dlr.cc, dlr_tvm.cc, dlr_relayvm.cc) over the graph executor and
 * the Relay VM. Each function checks its handle (a live model, never freed memory) and its
 * pointers, and refuses by name what tvmrt cannot do (pipelines, custom allocators, CPU
 * affinity) and what DLR's RelayVMModel does not (threads, affinity: "Not Implemented!").
 * Indexes are checked (DLR leaves them unchecked). DLRGetLastError is TVMGetLastError.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlr.h"
#include "dlr_model.h"

static int create(DLRModelHandle* handle, const dlr_parts* parts, int dev_type, int dev_id) {
  DLDevice dev;
  dlr_model* m;
  dev.device_type = (DLDeviceType)dev_type;
  dev.device_id = dev_id;
  if (dlr_model_create(parts, dev, &m) != 0) return -1;
  *handle = m;
  return 0;
}

static int create_from_paths(DLRModelHandle* handle, const dlr_paths* p, const char* backend,
                             int dev_type, int dev_id) {
  dlr_parts parts;
  char *graph = NULL, *params = NULL, *meta = NULL;
  size_t meta_len = 0;
  int status = -1;
  memset(&parts, 0, sizeof(parts));
  if (p->metadata && dlr_read_file(p->metadata, "metadata file", DLR_META, &meta, &meta_len) != 0)
    return -1;
  parts.meta = meta;
  parts.meta_len = meta_len;
  parts.meta_where = p->metadata;
  if (strcmp(backend, "relayvm") == 0) {
    if (!p->model_lib || !p->relay_executable || !p->metadata) {
      status = tvmrt_fail("DLRError",
                          "Invalid RelayVM model artifact. Must have .so, .ro, and .meta files.");
    } else if (dlr_read_file(p->relay_executable, "Relay VM code", DLR_CODE, &graph,
                             &parts.code_len) == 0) {
      parts.code = graph;
      parts.lib_path = p->model_lib;
      status = create(handle, &parts, dev_type, dev_id);
    }
  } else if (p->model_lib && strlen(p->model_lib) > 9 &&
             strcmp(p->model_lib + strlen(p->model_lib) - 9, ".tensorrt") == 0) {
    status = tvmrt_fail("DLRError",
                        "%s is a TensorRT engine: This model requires DLR "
                        "release-1.1.0 to run.",
                        p->model_lib);
  } else if (!p->model_json || !p->model_lib || !p->params) {
    status = tvmrt_fail("DLRError",
                        "Invalid TVM model artifact. Must have .so, .json, and .params files.");
  } else if (dlr_read_file(p->model_json, "graph file", DLR_GRAPH, &graph, &parts.graph_len) == 0 &&
             dlr_read_file(p->params, "params file", DLR_PARAMS, &params, &parts.params_len) == 0) {
    parts.graph = graph;
    parts.params = params;
    parts.lib_path = p->model_lib;
    status = create(handle, &parts, dev_type, dev_id);
  }
  free(graph);
  free(params);
  free(meta);
  return status;
}

DLR_DLL int CreateDLRModel(DLRModelHandle* handle, const char* model_path, int dev_type,
                           int dev_id) {
  dlr_list files;
  dlr_paths paths;
  const char* backend = NULL;
  int status;
  CHECK_PTR(handle, "handle");
  CHECK_PTR(model_path, "model_path");
  tvmrt_init();
  if (dlr_find_files(model_path, &files) != 0) return -1;
  if (dlr_backend(&files, model_path, &backend) != 0 || dlr_pick(&files, &paths) != 0) {
    dlr_list_free(&files);
    return -1;
  }
  dlr_list_free(&files);
  status = create_from_paths(handle, &paths, backend, dev_type, dev_id);
  dlr_paths_free(&paths);
  return status;
}

/* an element's text or bytes: from its path (read into *owned) or from memory; a later
   element of the same type replaces an earlier one, as in DLR */
static int elem_bytes(const DLRModelElem* el, const char* what, dlr_file_kind kind, int text,
                      char** owned, const char** data, size_t* len) {
  free(*owned);
  *owned = NULL;
  if (el->path != NULL) {
    if (dlr_read_file(el->path, what, kind, owned, len) != 0) return -1;
    *data = *owned;
    return 0;
  }
  if (el->data == NULL || (!text && el->data_size == 0)) {
    return tvmrt_fail("DLRError", "Invalid TVM model element %s", what);
  }
  *data = (const char*)el->data;
  *len = text ? strlen(*data) : el->data_size;
  return 0;
}

DLR_DLL int CreateDLRModelFromModelElem(DLRModelHandle* handle, const DLRModelElem* model_elems,
                                        size_t model_elems_size, int dev_type, int dev_id) {
  dlr_parts parts;
  char* owned[4] = {NULL, NULL, NULL, NULL};
  size_t i;
  int status = 0, vm = 0;
  CHECK_PTR(handle, "handle");
  CHECK_PTR(model_elems, "model_elems");
  tvmrt_init();
  memset(&parts, 0, sizeof(parts));
  parts.meta_where = "NEO_METADATA";
  for (i = 0; i < model_elems_size && status == 0; ++i) {
    const DLRModelElem* el = &model_elems[i];
    switch (el->type) {
      case TVM_GRAPH:
        status =
            elem_bytes(el, "TVM_GRAPH", DLR_GRAPH, 1, &owned[0], &parts.graph, &parts.graph_len);
        break;
      case TVM_PARAMS:
        status = elem_bytes(el, "TVM_PARAMS", DLR_PARAMS, 0, &owned[1], &parts.params,
                            &parts.params_len);
        break;
      case NEO_METADATA:
        if (el->path != NULL || el->data != NULL) {
          status =
              elem_bytes(el, "NEO_METADATA", DLR_META, 1, &owned[2], &parts.meta, &parts.meta_len);
        }
        break;
      case TVM_LIB:
        if (el->path == NULL) {
          status = tvmrt_fail("DLRError",
                              "Invalid TVM model element TVM_LIB. TVM_LIB must be a file path.");
        }
        parts.lib_path = el->path;
        break;
      case RELAY_EXEC:
        vm = 1;
        status = elem_bytes(el, "RELAY_EXEC", DLR_CODE, 0, &owned[3], &parts.code, &parts.code_len);
        break;
      case HEXAGON_LIB:
        status = tvmrt_fail("DLRError",
                            "model element %zu is HEXAGON_LIB (DLR's hexagon "
                            "backend); tvmrt's DLR runs TVM models only",
                            i);
        break;
      default:
        status = tvmrt_fail("InvalidArgumentError",
                            "model element %zu has type %d, expected a DLRModelElemType (0 to 5)",
                            i, (int)el->type);
    }
  }
  if (status == 0 && vm && (parts.lib_path == NULL || parts.meta == NULL)) {
    status = tvmrt_fail(
        "DLRError",
        "Invalid RelayVM model. Must have RELAY_EXEC, TVM_LIB and NEO_METADATA elements");
  } else if (status == 0 && vm) {
    status = create(handle, &parts, dev_type, dev_id);
  } else if (status == 0 && (parts.graph == NULL || parts.params == NULL || !parts.lib_path)) {
    status = tvmrt_fail("DLRError",
                        "Invalid TVM model. Must have TVM_GRAPH, TVM_PARAMS and TVM_LIB elements");
  } else if (status == 0) {
    status = create(handle, &parts, dev_type, dev_id);
  }
  for (i = 0; i < 4; ++i) free(owned[i]);
  return status;
}

DLR_DLL int CreateDLRPipeline(DLRModelHandle* handle, int num_models, const char** model_paths,
                              int dev_type, int dev_id) {
  return tvmrt_fail("UnsupportedError",
                    "CreateDLRPipeline: tvmrt's DLR runs one model per handle, not DLR's "
                    "pipelines; create the %d models with CreateDLRModel and pass each one's "
                    "outputs to the next",
                    num_models);
}

DLR_DLL int DeleteDLRModel(DLRModelHandle* handle) {
  CHECK_PTR(handle, "handle");
  if (*handle == NULL) return 0; /* as DLR: deleting nothing */
  {
    MODEL(m);
    *handle = NULL;
    tvmrt_release(&m->hdr);
  }
  return 0;
}

DLR_DLL int RunDLRModel(DLRModelHandle* handle) {
  MODEL(m);
  if (m->vm) return dlr_vm_run(m->vm);
  return dlr_model_call(m, "run", NULL, NULL, 0);
}

DLR_DLL const char* DLRGetLastError(void) { return tvmrt_peek_last_error(); }

DLR_DLL int GetDLRBackend(DLRModelHandle* handle, const char** name) {
  MODEL(m);
  CHECK_PTR(name, "name");
  *name = m->vm ? "relayvm" : "tvm";
  return 0;
}

DLR_DLL int GetDLRVersion(const char** out) {
  CHECK_PTR(out, "out");
  *out = "1.10.0";
  return 0;
}

DLR_DLL int SetDLRNumThreads(DLRModelHandle* handle, int threads) {
  MODEL(m);
  if (m->vm) return tvmrt_fail("DLRError", "SetDLRNumThreads: Not Implemented! (RelayVM model)");
  if (threads <= 0) return 0; /* as DLR: nothing changes */
  return tvmrt_set_num_threads(threads) < 0 ? -1 : 0;
}

DLR_DLL int UseDLRCPUAffinity(DLRModelHandle* handle, int use) {
  MODEL(m);
  if (m->vm) return tvmrt_fail("DLRError", "UseDLRCPUAffinity: Not Implemented! (RelayVM model)");
  if (use == 0) return 0;
  return tvmrt_fail("UnsupportedError",
                    "UseDLRCPUAffinity: tvmrt's thread pool does not pin its threads to CPUs "
                    "(TVM_BIND_THREADS); pin the process instead (taskset, sched_setaffinity)");
}

static int refuse_allocator(const char* fn, int set) {
  if (!set) return 0;
  return tvmrt_fail("UnsupportedError",
                    "%s: tvmrt's runtime allocates arrays and workspaces itself (64-byte "
                    "aligned); custom allocators are not supported",
                    fn);
}

DLR_DLL int SetDLRCustomAllocatorMalloc(DLRMallocFunctionPtr custom_malloc_fn) {
  return refuse_allocator(__func__, custom_malloc_fn != NULL);
}

DLR_DLL int SetDLRCustomAllocatorFree(DLRFreeFunctionPtr custom_free_fn) {
  return refuse_allocator(__func__, custom_free_fn != NULL);
}

DLR_DLL int SetDLRCustomAllocatorMemalign(DLRMemalignFunctionPtr custom_memalign_fn) {
  return refuse_allocator(__func__, custom_memalign_fn != NULL);
}

DLR_DLL int GetDLRDeviceType(const char* model_path) {
  dlr_list files;
  size_t i;
  char *text = NULL, *problem = NULL;
  size_t len = 0;
  tvmrt_json* meta = NULL;
  int device = -1;
  CHECK_PTR(model_path, "model_path");
  if (dlr_find_files(model_path, &files) != 0) return -1;
  for (i = 0; i < files.count; ++i) {
    size_t n = strlen(files.names[i]);
    if (n >= 5 && strcmp(files.names[i] + n - 5, ".meta") == 0) break;
  }
  if (i == files.count) {
    tvmrt_fail("DLRError", "No metadata file was found!");
  } else if (dlr_read_file(files.names[i], "metadata file", DLR_META, &text, &len) == 0 &&
             dlr_meta_parse(text, len, files.names[i], &meta, &problem) == 0) {
    if (meta == NULL) {
      tvmrt_fail("DLRError", "No metadata file was found! (%s)", problem);
    } else if ((device = dlr_meta_device(meta)) == 0) {
      device = tvmrt_fail("DLRError", "TargetDeviceType was not found in metadata!");
    }
  }
  tvmrt_json_free(meta);
  free(problem);
  free(text);
  dlr_list_free(&files);
  return device;
}
