/*
 * Runs Relax VM executables (model.so of relax.build / tvm.compile, any TVM 0.16-0.27 era)
 * through libtvmrt_runtime's C API, as TVM's C++ deployment does, and writes every output
 * for tests/native/test_c_relax.py to compare bit for bit with TVM's goldens.
 *
 *   run_relax MODES SPEC OUT_DIR
 *
 * SPEC, one item a line: `model PATH` loads PATH (kept loaded to the end, so that runs of
 * several models interleave in one process; a path loaded before is reused); `run NAME`
 * starts a run of `main` on the current model, followed by one `tensor CODE BITS NDIM
 * DIMS... FILE` line per parameter (FILE: raw bytes); `end`. MODES, comma-separated, say how
 * each run calls `main` (every mode writes OUT_DIR/NAME-MODE_K.bin and .txt per leaf of the
 * result, depth first, and NAME-MODE.json, its structure):
 *
 *   call       vm["main"](inputs...) with NDArray handles (kTVMNDArrayHandle)
 *   dltensor   the same with DLTensor pointers (kTVMDLTensorHandle)
 *   stateful   set_input("main", inputs...), invoke_stateful("main"), then the result read
 *              back with get_output_arity / get_output("main", index...)
 *   saved      save_function("main", "saved", 1, inputs...), then vm["saved"]() (and a
 *              second one saved with include_return=0 must return None)
 *   closure    invoke_closure(vm["main"], inputs...)
 *
 * If TVMModLoadFromFile or vm_initialization refuses a model, its error is printed
 * ("TVMModLoadFromFile failed: ...", "vm_initialization failed: ...") and the program exits
 * 3; if main fails in mode `call` ("NAME: main failed: ..."), it exits 4; either after
 * freeing everything (so that leak checks still hold).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tvm/runtime/c_runtime_api.h>
#include "relax_io.h"

#define MAX_PARAMS 64
#define MAX_MODELS 8
#define STRUCTURE_CAP 4096

typedef struct {
  char path[4096];
  rx_model m;
} loaded;

static loaded g_models[MAX_MODELS];
static int g_num_models;

static void free_models(void) {
  int i;
  for (i = 0; i < g_num_models; ++i) rx_free(&g_models[i].m);
  g_num_models = 0;
}

/* the VM of PATH (loaded now, or before); NULL when vm_initialization refused it */
static rx_model* model(const char* path) {
  int i;
  for (i = 0; i < g_num_models; ++i) {
    if (strcmp(g_models[i].path, path) == 0) return &g_models[i].m;
  }
  if (g_num_models == MAX_MODELS) exit(2);
  snprintf(g_models[g_num_models].path, sizeof(g_models[0].path), "%.4000s", path);
  if (rx_load(path, &g_models[g_num_models].m) != 0) return NULL;
  return &g_models[g_num_models++].m;
}

/* the stateful path: main's saved output at index path idx[0..depth) written like rx_walk */
static void walk_output(rx_model* m, const rx_readers* r, int64_t* idx, int depth, const char* dir,
                        const char* name, int* k, char* structure) {
  TVMValue a[16], ret;
  int c[16], rc, i;
  int64_t arity, j;
  if (depth + 2 > 16) exit(3);
  a[0].v_str = "main";
  c[0] = kTVMStr;
  for (i = 0; i < depth; ++i) a[i + 1].v_int64 = idx[i], c[i + 1] = kDLInt;
  rx_call(m->vm, "get_output_arity", a, c, depth + 1, &ret, &rc);
  arity = ret.v_int64;
  if (arity < 0) { /* a leaf */
    rx_call(m->vm, "get_output", a, c, depth + 1, &ret, &rc);
    rx_walk(r, ret, rc, dir, name, k, structure, STRUCTURE_CAP);
    return;
  }
  rx_append(structure, STRUCTURE_CAP, "[");
  for (j = 0; j < arity; ++j) {
    if (j) rx_append(structure, STRUCTURE_CAP, ", ");
    idx[depth] = j;
    walk_output(m, r, idx, depth + 1, dir, name, k, structure);
  }
  rx_append(structure, STRUCTURE_CAP, "]");
}

static int run_mode(rx_model* m, const rx_readers* r, const char* mode, const char* run,
                    TVMValue* in, int nin, const char* dir) {
  TVMValue args[MAX_PARAMS + 4], ret;
  int codes[MAX_PARAMS + 4], code, i, k = 0;
  char name[512], structure[STRUCTURE_CAP] = "";
  TVMFunctionHandle f;
  snprintf(name, sizeof(name), "%s-%s", run, mode);
  if (strcmp(mode, "call") == 0 || strcmp(mode, "dltensor") == 0) {
    int as = strcmp(mode, "call") == 0 ? kTVMNDArrayHandle : kTVMDLTensorHandle;
    for (i = 0; i < nin; ++i) args[i] = in[i], codes[i] = as;
    f = get(m->vm, "main");
    if (TVMFuncCall(f, args, codes, nin, &ret, &code) != 0) {
      printf("%s: main failed: %s\n", name, TVMGetLastError());
      CHECK(TVMFuncFree(f));
      return -1;
    }
    CHECK(TVMFuncFree(f));
    rx_walk(r, ret, code, dir, name, &k, structure, sizeof(structure));
  } else if (strcmp(mode, "stateful") == 0) {
    int64_t idx[16];
    args[0].v_str = "main";
    codes[0] = kTVMStr;
    for (i = 0; i < nin; ++i) args[i + 1] = in[i], codes[i + 1] = kTVMNDArrayHandle;
    rx_call(m->vm, "set_input", args, codes, nin + 1, &ret, &code);
    rx_call(m->vm, "invoke_stateful", args, codes, 1, &ret, &code);
    walk_output(m, r, idx, 0, dir, name, &k, structure);
  } else if (strcmp(mode, "saved") == 0) {
    args[0].v_str = "main";
    args[1].v_str = "saved";
    args[2].v_int64 = 1; /* include_return */
    codes[0] = codes[1] = kTVMStr;
    codes[2] = kDLInt;
    for (i = 0; i < nin; ++i) args[i + 3] = in[i], codes[i + 3] = kTVMNDArrayHandle;
    rx_call(m->vm, "save_function", args, codes, nin + 3, &ret, &code);
    args[1].v_str = "saved_no_return";
    args[2].v_int64 = 0;
    rx_call(m->vm, "save_function", args, codes, nin + 3, &ret, &code);
    rx_call(m->vm, "saved_no_return", NULL, NULL, 0, &ret, &code);
    if (code != kTVMNullptr) {
      fprintf(stderr, "%s: a function saved with include_return=0 returned type code %d\n", name,
              code);
      exit(5);
    }
    rx_call(m->vm, "saved", NULL, NULL, 0, &ret, &code);
    rx_walk(r, ret, code, dir, name, &k, structure, sizeof(structure));
  } else if (strcmp(mode, "closure") == 0) {
    f = get(m->vm, "main");
    args[0].v_handle = f;
    codes[0] = kTVMPackedFuncHandle;
    for (i = 0; i < nin; ++i) args[i + 1] = in[i], codes[i + 1] = kTVMNDArrayHandle;
    rx_call(m->vm, "invoke_closure", args, codes, nin + 1, &ret, &code);
    CHECK(TVMFuncFree(f));
    rx_walk(r, ret, code, dir, name, &k, structure, sizeof(structure));
  } else {
    fprintf(stderr, "unknown mode %s\n", mode);
    exit(2);
  }
  rx_write_structure(dir, name, structure);
  return 0;
}

int main(int argc, char** argv) {
  TVMValue in[MAX_PARAMS];
  int nin = 0, i, status = 0;
  char line[8192], name[256] = "", modes[256];
  size_t spec_n;
  char *spec, *cursor;
  rx_model* current = NULL;
  rx_readers readers;
  if (argc != 4) {
    fprintf(stderr, "usage: run_relax MODES SPEC OUT_DIR\n");
    return 2;
  }
  rx_readers_get(&readers);
  spec = read_file(argv[2], &spec_n);
  for (cursor = spec; *cursor != '\0';) {
    char* end = strchr(cursor, '\n');
    size_t len = end != NULL ? (size_t)(end - cursor) : strlen(cursor);
    if (len >= sizeof(line)) return 2;
    memcpy(line, cursor, len);
    line[len] = '\0';
    cursor += len + (end != NULL);
    if (strncmp(line, "run ", 4) == 0 || strcmp(line, "end") == 0 ||
        strncmp(line, "model ", 6) == 0) {
      if (name[0] != '\0') { /* the run before this line */
        char* mode;
        snprintf(modes, sizeof(modes), "%s", argv[1]);
        for (mode = strtok(modes, ","); mode != NULL && status == 0; mode = strtok(NULL, ","))
          if (run_mode(current, &readers, mode, name, in, nin, argv[3]) != 0) status = 4;
      }
      for (i = 0; i < nin; ++i) CHECK(TVMArrayFree(in[i].v_handle));
      nin = 0;
      name[0] = '\0';
      if (status != 0) break;
      if (strncmp(line, "run ", 4) == 0) {
        if (current == NULL) return 2;
        snprintf(name, sizeof(name), "%.200s", line + 4);
      } else if (strncmp(line, "model ", 6) == 0) {
        current = model(line + 6);
        if (current == NULL) {
          status = 3;
          break;
        }
      } else {
        break;
      }
    } else if (strncmp(line, "tensor ", 7) == 0) {
      if (nin == MAX_PARAMS) return 2;
      in[nin++].v_handle = rx_read_tensor(line);
    }
  }
  free(spec);
  rx_readers_free(&readers);
  free_models();
  if (status == 0) printf("ok\n");
  return status;
}
