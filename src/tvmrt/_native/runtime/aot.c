/*
 * TVM's AOT executor (v0.19 aot_executor.cc, aot_executor_factory.cc) over a Relay AOT
 * build: its blob holds an "AotExecutorFactory" (params, model name) importing a
 * "metadata_module" importing the kernel library, whose `get_c_metadata` names the inputs
 * and outputs (aot_meta.c) and whose `<model>___tvm_main__` runs the model on them.
 * `lib["default"](dev)` (or the global `tvm.aot_executor.create(lib, dev[, model])`) gives
 * an executor owning one array per input and output, with TVM's packed functions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

typedef struct {
  tvmrt_aot_meta meta;
  tvmrt_module* lib;
  tvmrt_func* entry;
  tvmrt_ndarray** arrays; /* inputs, then outputs */
  TVMValue* args;
  int* codes;
  int busy;
} aot_exec;

static aot_exec* exec_of(void* self) { return (aot_exec*)((tvmrt_module*)self)->impl; }

/* "['a', 'b']": the input names, as the Python runtime lists them (at most ~1 KB) */
static void input_list(const aot_exec* e, char* out, size_t cap) {
  size_t i, used = 1;
  out[0] = '[';
  out[1] = '\0';
  for (i = 0; i < e->meta.num_inputs && used + 8 < cap; ++i) {
    int w = snprintf(out + used, cap - used, "%s'%.200s'", i ? ", " : "", e->meta.tensors[i].name);
    if (w < 0 || (size_t)w >= cap - used) break;
    used += (size_t)w;
  }
  snprintf(out + used, cap - used, "]");
}

/* a key that is not an index (nor, for an input, a name), in the Python runtime's words */
static int key_type_error(TVMValue v, int code, int outputs) {
  char value[300];
  tvmrt_py_value_words(v, code, value, sizeof(value));
  return tvmrt_fail(
      "ArgumentTypeError", "%s, got %s",
      outputs ? "output index must be an integer" : "input key must be a name or an index", value);
}

static int index_arg(aot_exec* e, TVMValue* args, int* codes, int n, int outputs, size_t* out) {
  size_t count = outputs ? e->meta.num_outputs : e->meta.num_inputs, i;
  char names[1024];
  if (n < 1) return tvmrt_fail("InvalidArgumentError", "expected an index or a name");
  if (codes[0] == kTVMStr && !outputs) {
    for (i = 0; i < count; ++i) {
      if (strcmp(e->meta.tensors[i].name, args[0].v_str) == 0) {
        *out = i;
        return 0;
      }
    }
    input_list(e, names, sizeof(names));
    return tvmrt_fail("InputNotFoundError",
                      "Check failed: (false) is false: Invalid input name. (no input '%.200s'; "
                      "inputs are %s)",
                      args[0].v_str, names);
  }
  if (codes[0] != kDLInt) return key_type_error(args[0], codes[0], outputs);
  if (args[0].v_int64 < 0 || (uint64_t)args[0].v_int64 >= count) {
    if (!outputs) {
      return tvmrt_fail("InputNotFoundError", "input index %lld is out of range (%zu)",
                        (long long)args[0].v_int64, count);
    }
    return tvmrt_fail("InputNotFoundError", "output index %lld is out of range (%zu outputs)",
                      (long long)args[0].v_int64, count);
  }
  *out = (size_t)args[0].v_int64;
  return 0;
}

static int return_array(tvmrt_ndarray* a, TVMValue* ret, int* rc) {
  tvmrt_retain(&a->hdr); /* the caller's to free (TVMArrayFree) */
  ret->v_handle = &a->dl;
  *rc = kTVMNDArrayHandle;
  return 0;
}

static int f_set_input(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  aot_exec* e = exec_of(self);
  size_t i = 0;
  (void)ret, (void)rc;
  if (index_arg(e, args, codes, n, 0, &i) != 0) return -1;
  if (n != 2 || (codes[1] != kTVMDLTensorHandle && codes[1] != kTVMNDArrayHandle)) {
    return tvmrt_fail("ArgumentTypeError", "set_input takes (index or name, array)");
  }
  return tvmrt_copy_tensor((const DLTensor*)args[1].v_handle, &e->arrays[i]->dl);
}

static int f_get_input(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  aot_exec* e = exec_of(self);
  size_t i = 0;
  if (index_arg(e, args, codes, n, 0, &i) != 0) return -1;
  return return_array(e->arrays[i], ret, rc);
}

static int f_get_output(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  aot_exec* e = exec_of(self);
  size_t i = 0;
  if (index_arg(e, args, codes, n, 1, &i) != 0) return -1;
  i += e->meta.num_inputs;
  if (n == 2) {
    if (codes[1] != kTVMDLTensorHandle && codes[1] != kTVMNDArrayHandle) {
      return tvmrt_fail("ArgumentTypeError", "get_output takes (index[, out array])");
    }
    return tvmrt_copy_tensor(&e->arrays[i]->dl, (DLTensor*)args[1].v_handle);
  }
  return return_array(e->arrays[i], ret, rc);
}

static int f_count(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc,
                   size_t count) {
  (void)self, (void)args, (void)codes;
  if (n != 0) return tvmrt_fail("InvalidArgumentError", "takes no arguments");
  ret->v_int64 = (int64_t)count;
  *rc = kDLInt;
  return 0;
}

static int f_num_inputs(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  return f_count(self, args, codes, n, ret, rc, exec_of(self)->meta.num_inputs);
}

static int f_num_outputs(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  return f_count(self, args, codes, n, ret, rc, exec_of(self)->meta.num_outputs);
}

static int f_input_index(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  size_t i = 0;
  if (n != 1 || codes[0] != kTVMStr) { /* TVM's words */
    return tvmrt_fail("ArgumentTypeError", "Input key is not a string");
  }
  if (index_arg(exec_of(self), args, codes, n, 0, &i) != 0) return -1;
  ret->v_int64 = (int64_t)i;
  *rc = kDLInt;
  return 0;
}

static int f_name(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc,
                  int outputs) {
  aot_exec* e = exec_of(self);
  size_t i = 0;
  if (n != 1 || codes[0] != kDLInt) return tvmrt_fail("ArgumentTypeError", "expected an index");
  if (index_arg(e, args, codes, n, outputs, &i) != 0) return -1;
  ret->v_str = e->meta.tensors[outputs ? e->meta.num_inputs + i : i].name;
  *rc = kTVMStr;
  return 0;
}

static int f_input_name(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  return f_name(self, args, codes, n, ret, rc, 0);
}

static int f_output_name(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  return f_name(self, args, codes, n, ret, rc, 1);
}

static int f_model_name(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  (void)args, (void)codes;
  if (n != 0) return tvmrt_fail("InvalidArgumentError", "get_model_name takes no arguments");
  ret->v_str = exec_of(self)->meta.mod_name;
  *rc = kTVMStr;
  return 0;
}

static int f_run(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  aot_exec* e = exec_of(self);
  int status, expected = 0;
  TVMValue r;
  int r_code = kTVMNullptr;
  (void)args, (void)codes, (void)ret, (void)rc;
  if (n != 0) return tvmrt_fail("InvalidArgumentError", "run takes no arguments");
  if (!__atomic_compare_exchange_n(&e->busy, &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
    return tvmrt_fail("TVMError", "this AOT executor is already running in another thread");
  }
  tvmrt_clear_last_error();
  status = tvmrt_func_call(e->entry, e->args, e->codes,
                           (int)(e->meta.num_inputs + e->meta.num_outputs), &r, &r_code);
  __atomic_store_n(&e->busy, 0, __ATOMIC_RELEASE);
  if (status != 0) {
    char msg[1024];
    snprintf(msg, sizeof(msg), "%s", tvmrt_peek_last_error());
    return tvmrt_fail("KernelError", "%s___tvm_main__ failed: %s", e->meta.mod_name, msg);
  }
  return 0;
}

static int f_not_implemented(void* self, TVMValue* args, int* codes, int n, TVMValue* ret,
                             int* rc) {
  (void)self, (void)args, (void)codes, (void)n, (void)ret, (void)rc;
  return tvmrt_fail("InternalError", "Check failed: (false) is false: not implemented");
}

static const struct {
  const char* name;
  tvmrt_fn fn;
} k_exec_funcs[] = {
    {"set_input", f_set_input},
    {"get_input", f_get_input},
    {"get_output", f_get_output},
    {"get_num_inputs", f_num_inputs},
    {"get_num_outputs", f_num_outputs},
    {"get_input_index", f_input_index},
    {"get_input_name", f_input_name},
    {"run", f_run},
    {"set_input_zero_copy", f_not_implemented},
    {"set_output_zero_copy", f_not_implemented},
    {"get_output_name", f_output_name}, /* tvmrt's, as the Python runtime */
    {"get_model_name", f_model_name},
};

static tvmrt_func* exec_lookup(tvmrt_module* mod, const char* name) {
  size_t i = 0;
  for (i = 0; i < sizeof(k_exec_funcs) / sizeof(k_exec_funcs[0]); ++i) {
    if (strcmp(k_exec_funcs[i].name, name) == 0) {
      return tvmrt_func_new(k_exec_funcs[i].fn, mod, &mod->hdr);
    }
  }
  return NULL;
}

static void exec_free(aot_exec* e) {
  size_t i, n = e->meta.num_inputs + e->meta.num_outputs;
  for (i = 0; e->arrays != NULL && i < n; ++i) {
    if (e->arrays[i] != NULL) tvmrt_release(&e->arrays[i]->hdr);
  }
  free(e->arrays);
  free(e->args);
  free(e->codes);
  if (e->entry != NULL) tvmrt_release(&e->entry->hdr);
  if (e->lib != NULL) tvmrt_release(&e->lib->hdr);
  tvmrt_aot_meta_free(&e->meta);
  free(e);
}

static void exec_finalize(tvmrt_module* mod) { exec_free((aot_exec*)mod->impl); }

/* the metadata the library's get_c_metadata returns */
static int read_metadata(tvmrt_module* lib, tvmrt_aot_meta* meta) {
  tvmrt_func* get = tvmrt_module_get(lib, "get_c_metadata", 1);
  TVMValue ret;
  int code = kTVMNullptr, status;
  if (get == NULL) {
    return tvmrt_fail("ModuleLoadError",
                      "the AOT library has no get_c_metadata function (not an AOT build of the "
                      "C++ runtime interface)");
  }
  status = tvmrt_func_call(get, NULL, NULL, 0, &ret, &code);
  tvmrt_release(&get->hdr);
  if (status != 0) return -1;
  if (code != kTVMOpaqueHandle && code != kTVMNullptr) {
    return tvmrt_fail("ModuleLoadError", "AOT metadata: get_c_metadata returned type code %d",
                      code);
  }
  return tvmrt_aot_read_metadata(code == kTVMNullptr ? NULL : ret.v_handle, meta);
}

static int exec_init(aot_exec* e) {
  char entry[RT_MAX_NAME + 32];
  size_t i, n = e->meta.num_inputs + e->meta.num_outputs;
  snprintf(entry, sizeof(entry), "%s___tvm_main__", e->meta.mod_name);
  e->entry = tvmrt_module_get(e->lib, entry, 1);
  if (e->entry == NULL) {
    return tvmrt_fail("ModuleLoadError", "the AOT library has no entry function '%.200s'", entry);
  }
  e->arrays = (tvmrt_ndarray**)calloc(n ? n : 1, sizeof(tvmrt_ndarray*));
  e->args = (TVMValue*)calloc(n ? n : 1, sizeof(TVMValue));
  e->codes = (int*)calloc(n ? n : 1, sizeof(int));
  if (e->arrays == NULL || e->args == NULL || e->codes == NULL) {
    return tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate an AOT executor");
  }
  for (i = 0; i < n; ++i) {
    const tvmrt_aot_tensor* t = &e->meta.tensors[i];
    e->arrays[i] = tvmrt_ndarray_empty(t->shape, t->ndim, t->dtype);
    if (e->arrays[i] == NULL) return -1;
    e->args[i].v_handle = &e->arrays[i]->dl;
    e->codes[i] = kTVMDLTensorHandle;
  }
  return 0;
}

tvmrt_module* tvmrt_aot_executor_create(tvmrt_module* lib, DLDevice dev) {
  aot_exec* e;
  tvmrt_module* mod;
  if (dev.device_type != kDLCPU || dev.device_id != 0) { /* TVM's words */
    tvmrt_fail("InternalError",
               "the AOT executor runs on cpu(0) only (as in TVM), got device type %d, id %d",
               (int)dev.device_type, (int)dev.device_id);
    return NULL;
  }
  e = (aot_exec*)calloc(1, sizeof(aot_exec));
  if (e == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate an AOT executor");
    return NULL;
  }
  e->lib = lib;
  tvmrt_retain(&lib->hdr);
  if (read_metadata(lib, &e->meta) != 0 || exec_init(e) != 0 ||
      (mod = tvmrt_module_new("AotExecutor", e)) == NULL) {
    exec_free(e);
    return NULL;
  }
  mod->lookup = exec_lookup;
  mod->finalize = exec_finalize;
  return mod;
}

/* copy the factory's params into the executor's inputs of those names (others skipped) */
int tvmrt_aot_set_params(tvmrt_module* exec, const tvmrt_params* params) {
  aot_exec* e = (aot_exec*)exec->impl;
  size_t p, i;
  for (p = 0; p < params->count; ++p) {
    for (i = 0; i < e->meta.num_inputs; ++i) {
      if (strcmp(e->meta.tensors[i].name, params->names[p]) != 0) continue;
      if (tvmrt_copy_tensor(&params->arrays[p]->dl, &e->arrays[i]->dl) != 0) {
        char msg[512];
        snprintf(msg, sizeof(msg), "%s", tvmrt_peek_last_error());
        return tvmrt_fail("ArrayError", "param '%.200s': %s", params->names[p], msg);
      }
    }
  }
  return 0;
}
