/*
 * A Neo model's files as DLR 1.10 finds them (dlr_common.cc; tvmrt/dlr/_files.py is the
 * Python twin): by suffix, in the folders and files of a colon-separated model_path; the
 * backend; files read whole through files.c (regular files only, each kind's size bound
 * checked before reading: a FIFO named compiled.so never blocks);
 * compiled.meta's device check, with DLR's message.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dlr_model.h"

#define LIBDLR "libdlr.so"

static int ends_with(const char* s, const char* suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

static const char* base_name(const char* path) {
  const char* slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

static int oom(const char* what) {
  return tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate %s", what);
}

static int list_push(dlr_list* list, const char* folder, const char* name) {
  char** grown = (char**)realloc(list->names, (list->count + 1) * sizeof(char*));
  size_t len = (folder ? strlen(folder) + 1 : 0) + strlen(name) + 1;
  char* path;
  if (grown == NULL) return oom("the model's file list");
  list->names = grown;
  if ((path = (char*)malloc(len)) == NULL) return oom("the model's file list");
  if (folder) {
    snprintf(path, len, "%s/%s", folder, name);
  } else {
    snprintf(path, len, "%s", name);
  }
  list->names[list->count++] = path;
  return 0;
}

static int by_name(const void* a, const void* b) {
  return strcmp(*(char* const*)a, *(char* const*)b);
}

/* whether path names a folder (stat and fstat are not used: their symbols would raise
   the wheel's glibc floor to 2.33, see glibc_floor.h) */
static int is_folder(const char* path) {
  DIR* dir = opendir(path);
  if (dir == NULL) return 0;
  closedir(dir);
  return 1;
}

static int list_folder(const char* folder, dlr_list* out) {
  DIR* dir = opendir(folder);
  struct dirent* ent;
  size_t first = out->count;
  if (dir == NULL) {
    return tvmrt_fail("DLRError", "cannot list the model folder '%s': %s", folder, strerror(errno));
  }
  while ((ent = readdir(dir)) != NULL) {
    const char* path;
    if (ent->d_type == DT_DIR) continue;
    if (list_push(out, folder, ent->d_name) != 0) {
      closedir(dir);
      return -1;
    }
    path = out->names[out->count - 1];
    if ((ent->d_type == DT_LNK || ent->d_type == DT_UNKNOWN) && is_folder(path)) {
      free(out->names[--out->count]); /* a link to a folder is a folder, not a model file */
    }
  }
  closedir(dir);
  if (out->count > first) qsort(out->names + first, out->count - first, sizeof(char*), by_name);
  return 0;
}

int dlr_find_files(const char* model_path, dlr_list* out) {
  const char* part = model_path;
  out->names = NULL;
  out->count = 0;
  while (1) {
    const char* end = strchr(part, ':');
    size_t len = end ? (size_t)(end - part) : strlen(part);
    if (len > 0) {
      char* path = (char*)malloc(len + 1);
      int status;
      if (path == NULL) return oom("the model path");
      memcpy(path, part, len);
      path[len] = '\0';
      if (access(path, F_OK) != 0) {
        status = tvmrt_fail("InvalidArgumentError", "model_path %s doesn't exist", path);
      } else if (is_folder(path)) {
        status = list_folder(path, out);
      } else {
        status = list_push(out, NULL, path);
      }
      free(path);
      if (status != 0) {
        dlr_list_free(out);
        return -1;
      }
    }
    if (end == NULL) return 0;
    part = end + 1;
  }
}

void dlr_list_free(dlr_list* list) {
  size_t i;
  for (i = 0; i < list->count; ++i) free(list->names[i]);
  free(list->names);
  list->names = NULL;
  list->count = 0;
}

int dlr_backend(const dlr_list* files, const char* model_path, const char** backend) {
  size_t i;
  int lib = 0;
  for (i = 0; i < files->count; ++i) {
    const char* name = files->names[i];
    if (ends_with(name, ".params")) {
      *backend = "tvm";
      return 0;
    }
    if (ends_with(name, ".ro")) {
      *backend = "relayvm";
      return 0;
    }
    if (ends_with(name, "saved_model.pb") || ends_with(name, "saved_model.pbtxt")) {
      return tvmrt_fail("DLRError",
                        "'%s' is a TensorFlow 2 SavedModel (DLR's tensorflow backend); tvmrt's "
                        "DLR runs TVM models (graph and Relay VM) only",
                        model_path);
    }
    if (ends_with(name, "_hexagon_model.so")) {
      return tvmrt_fail("DLRError",
                        "'%s' is a Hexagon model (DLR's hexagon backend); tvmrt's DLR runs TVM "
                        "models (graph and Relay VM) only",
                        model_path);
    }
    if (!ends_with(name, LIBDLR) && ends_with(name, ".so")) lib = 1;
  }
  if (lib) {
    return tvmrt_fail("DLRError",
                      "'%s' holds a library but no .params or .ro: DLR takes it for a Treelite "
                      "(decision tree) model, which is not TVM; tvmrt's DLR runs TVM models (a "
                      ".so with a graph .json and .params, or a Relay VM .ro with a .meta)",
                      model_path);
  }
  return tvmrt_fail("DLRError", "Unable to determine backend from path: '%s'.", model_path);
}

static int take(char** slot, const char* kind, const char* name) {
  if (*slot != NULL)
    return tvmrt_fail("DLRError", "Found multiple %s files: %s %s", kind, *slot, name);
  if ((*slot = strdup(name)) == NULL) return oom("a file name");
  return 0;
}

int dlr_pick(const dlr_list* files, dlr_paths* out) {
  static const char* const auxiliary[] = {"model-shapes.json", "hyperparams.json", "version.json"};
  size_t i;
  memset(out, 0, sizeof(*out));
  for (i = 0; i < files->count; ++i) {
    const char* name = files->names[i];
    const char* base = base_name(name);
    int status = 0;
    if (ends_with(name, ".json") && strcmp(base, auxiliary[0]) != 0 &&
        strcmp(base, auxiliary[1]) != 0 && strcmp(base, auxiliary[2]) != 0) {
      status = take(&out->model_json, "*.json", name);
    } else if ((!ends_with(name, LIBDLR) && ends_with(name, ".so")) ||
               ends_with(name, ".tensorrt")) {
      status = take(&out->model_lib, "model lib", name);
    } else if (ends_with(name, ".params")) {
      status = take(&out->params, "*.params", name);
    } else if (ends_with(name, ".meta")) {
      status = take(&out->metadata, "*.meta", name);
    } else if (ends_with(name, ".ro")) {
      status = take(&out->relay_executable, "*.ro", name);
    }
    if (status != 0) {
      dlr_paths_free(out);
      return -1;
    }
  }
  return 0;
}

void dlr_paths_free(dlr_paths* p) {
  free(p->model_json);
  free(p->model_lib);
  free(p->params);
  free(p->metadata);
  free(p->relay_executable);
  memset(p, 0, sizeof(*p));
}

/* what each kind of file may hold (files.c checks it before reading) */
static const struct {
  uint64_t limit;
  const tvmrt_file_magic* magic; /* NULL: none */
} kinds[] = {
    [DLR_META] = {RT_MAX_META_BYTES, NULL},
    [DLR_GRAPH] = {RT_MAX_GRAPH_JSON_BYTES, NULL},
    [DLR_PARAMS] = {RT_MAX_PARAMS_BYTES, &tvmrt_params_file_magic},
    [DLR_CODE] = {RT_MAX_CODE_BYTES, &tvmrt_vm_code_file_magic},
};

int dlr_regular_file(const char* path, const char* role) {
  return tvmrt_check_regular(path, "DLRError", role, RT_MAX_LIBRARY_BYTES);
}

int dlr_read_file(const char* path, const char* role, dlr_file_kind kind, char** data,
                  size_t* size) {
  return tvmrt_read_regular(path, "DLRError", role, kinds[kind].limit, kinds[kind].magic, data,
                            size);
}

int dlr_meta_parse(const char* text, size_t len, const char* where, tvmrt_json** meta,
                   char** problem) {
  char buf[600];
  *meta = NULL;
  *problem = NULL;
  if (tvmrt_json_parse(text, len, meta) == 0) {
    if ((*meta)->type == RT_JSON_OBJECT) return 0;
    tvmrt_json_free(*meta);
    *meta = NULL;
    snprintf(buf, sizeof(buf), "%s is not a JSON object", where);
  } else {
    const char* why = tvmrt_peek_last_error();
    const char* detail = strstr(why, "valid JSON: "); /* json.c speaks of graph JSON */
    snprintf(buf, sizeof(buf), "%s is not valid JSON (%s)", where, detail ? detail + 12 : why);
    tvmrt_clear_last_error();
  }
  if ((*problem = strdup(buf)) == NULL) return oom("a message");
  return 0;
}

int dlr_meta_device(const tvmrt_json* meta) {
  const tvmrt_json* req = meta ? tvmrt_json_get(meta, "Requirements") : NULL;
  const tvmrt_json* type =
      req && req->type == RT_JSON_OBJECT ? tvmrt_json_get(req, "TargetDeviceType") : NULL;
  if (type == NULL || type->type != RT_JSON_STRING) return 0;
  if (strcmp(type->str, "cpu") == 0) return kDLCPU;
  if (strcmp(type->str, "gpu") == 0) return kDLCUDA;
  if (strcmp(type->str, "opencl") == 0) return kDLOpenCL;
  return kDLExtDev; /* as DLR: any other name */
}

static const char* device_name(int device_type) {
  switch (device_type) {
    case kDLCPU: return "cpu";
    case kDLCUDA: return "gpu";
    case kDLOpenCL: return "opencl";
    default: return "";
  }
}

int dlr_check_device(const tvmrt_json* meta, int dev_type) {
  int required = dlr_meta_device(meta);
  if (required != 0 && required != dev_type) {
    return tvmrt_fail("DLRError",
                      "Compiled model requires device type \"%s\" but user gave \"%s\".",
                      device_name(required), device_name(dev_type));
  }
  return 0;
}

int dlr_check_index(int index, size_t count, const char* what, const char* fn) {
  if (index < 0 || (size_t)index >= count) {
    return tvmrt_fail("DLRError", "%s: %s index %d is out of range: the model has %zu %ss", fn,
                      what, index, count, what);
  }
  return 0;
}
