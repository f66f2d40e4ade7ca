/*
 * A DLR model of the Relay VM backend (dlr_relayvm.cc's RelayVMModel; tvmrt/dlr/_backends.py's
 * RelayVMBackend): code.ro loaded by runtime.Load_Executable over the kernels' library, a
 * VirtualMachine initialised with DLR's allocator (pooled; naive when the meta's
 * Model.RelayVMAllocator or $DLR_RELAYVM_ALLOCATOR says "naive"). The inputs are main's
 * parameters, their dtypes and shapes the meta's Model.Inputs; the outputs the meta's
 * Model.Outputs (names, dtypes; shapes until a run, the results' after). SetDLRInput makes
 * an array of the caller's shape in the meta's dtype (no element count check, as DLR); a
 * run passes every input to main and keeps its results.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlr_model.h"

typedef struct {
  const char* name; /* borrowed: the executable's parameter name, or the meta's string */
  const char* type; /* the meta's dtype string */
  int64_t shape[RT_MAX_NDIM];
  int dim;
  tvmrt_ndarray* value; /* the input set, or the last run's output; NULL if none */
} vm_slot;

struct dlr_vm {
  tvmrt_module* exe;     /* the VMExecutable */
  tvmrt_module* machine; /* the VirtualMachine */
  vm_slot* inputs;
  size_t num_inputs;
  vm_slot* outputs;
  size_t num_outputs;
  int ran;
};

static void slots_free(vm_slot* s, size_t n) {
  size_t i;
  for (i = 0; s != NULL && i < n; ++i) {
    if (s[i].value) tvmrt_release(&s[i].value->hdr);
  }
  free(s);
}

void dlr_vm_free(dlr_vm* vm) {
  if (vm == NULL) return;
  slots_free(vm->inputs, vm->num_inputs);
  slots_free(vm->outputs, vm->num_outputs);
  if (vm->machine) tvmrt_release(&vm->machine->hdr);
  if (vm->exe) tvmrt_release(&vm->exe->hdr);
  free(vm);
}

static int call(tvmrt_module* mod, const char* fn, TVMValue* args, int* codes, int n, TVMValue* ret,
                int* ret_code) {
  tvmrt_func* f = tvmrt_module_get(mod, fn, 0);
  int status;
  if (f == NULL) return tvmrt_fail("FunctionNotFoundError", "the %s has no %s", mod->type_key, fn);
  *ret_code = kTVMNullptr;
  status = tvmrt_func_call(f, args, codes, n, ret, ret_code);
  tvmrt_release(&f->hdr);
  return status;
}

/* Model.<list>, an array, or NULL */
static const tvmrt_json* meta_list(const tvmrt_json* meta, const char* list) {
  const tvmrt_json* model = tvmrt_json_get(meta, "Model");
  const tvmrt_json* l = model && model->type == RT_JSON_OBJECT ? tvmrt_json_get(model, list) : NULL;
  return l && l->type == RT_JSON_ARRAY ? l : NULL;
}

/* item's dtype and shape (a non-number is -1, as DLR), or -1 with `problem` in *why */
static int meta_slot(const tvmrt_json* item, vm_slot* s, const char** why) {
  const tvmrt_json *type, *shape;
  DLDataType dtype;
  int64_t bytes;
  size_t d;
  type = item->type == RT_JSON_OBJECT ? tvmrt_json_get(item, "dtype") : NULL;
  shape = item->type == RT_JSON_OBJECT ? tvmrt_json_get(item, "shape") : NULL;
  if (type == NULL || type->type != RT_JSON_STRING) return *why = "no dtype string", -1;
  if (shape == NULL || shape->type != RT_JSON_ARRAY) return *why = "no shape list", -1;
  if (shape->count > RT_MAX_NDIM) return *why = "a shape of more than 32 dimensions", -1;
  s->type = type->str;
  if (tvmrt_parse_dtype(s->type, &dtype) != 0) {
    tvmrt_clear_last_error();
    return *why = "a dtype that is not a data type", -1;
  }
  bytes = (int64_t)((dtype.bits + 7) / 8) * dtype.lanes; /* as DataType.itemsize */
  s->dim = (int)shape->count;
  for (d = 0; d < shape->count; ++d) {
    const tvmrt_json* v = &shape->items[d];
    s->shape[d] = v->type == RT_JSON_NUMBER && v->is_int && v->i >= 0 ? v->i : -1;
    if (v->type == RT_JSON_NUMBER && !v->is_int && v->d >= 1e18) { /* 19 digits or more */
      return *why = "a shape whose size in bytes overflows int64", -1;
    }
    /* the known sizes must not overflow int64 in bytes: callers size copies by them */
    if (s->shape[d] > 0 && bytes > INT64_MAX / s->shape[d]) {
      return *why = "a shape whose size in bytes overflows int64", -1;
    }
    if (s->shape[d] >= 0) bytes *= s->shape[d];
  }
  return 0;
}

/* main's parameters, described by Model.Inputs */
static int describe_inputs(dlr_vm* vm, const tvmrt_json* meta) {
  const tvmrt_json* list = meta_list(meta, "Inputs");
  TVMValue args[2], ret;
  int codes[2] = {kTVMStr, kDLInt}, rc;
  size_t i;
  args[0].v_str = "main";
  if (call(vm->exe, "get_function_arity", args, codes, 1, &ret, &rc) != 0) return -1;
  if (ret.v_int64 < 0) {
    return tvmrt_fail("DLRError", "the Relay VM executable has no function 'main' (DLR's entry)");
  }
  vm->num_inputs = (size_t)ret.v_int64;
  if ((vm->inputs = (vm_slot*)calloc(vm->num_inputs + 1, sizeof(vm_slot))) == NULL) {
    return tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate the model's inputs");
  }
  for (i = 0; i < vm->num_inputs; ++i) {
    const char* why = "missing";
    args[1].v_int64 = (int64_t)i;
    if (call(vm->exe, "get_function_param_name", args, codes, 2, &ret, &rc) != 0) return -1;
    vm->inputs[i].name = ret.v_str; /* lives as long as the executable */
    if (list == NULL || i >= list->count || meta_slot(&list->items[i], &vm->inputs[i], &why)) {
      return tvmrt_fail("DLRError",
                        "Invalid or missing input metadata: Model.Inputs[%zu] (main's parameter "
                        "'%.200s'): %s",
                        i, vm->inputs[i].name, list == NULL ? "no Model.Inputs list" : why);
    }
  }
  return 0;
}

static int describe_outputs(dlr_vm* vm, const tvmrt_json* meta) {
  const tvmrt_json* list = meta_list(meta, "Outputs");
  size_t i;
  if (list == NULL) return tvmrt_fail("DLRError", "No output metadata found.");
  vm->num_outputs = list->count;
  if ((vm->outputs = (vm_slot*)calloc(vm->num_outputs + 1, sizeof(vm_slot))) == NULL) {
    return tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate the model's outputs");
  }
  for (i = 0; i < list->count; ++i) {
    const tvmrt_json* name =
        list->items[i].type == RT_JSON_OBJECT ? tvmrt_json_get(&list->items[i], "name") : NULL;
    const char* why = "no name string";
    if (name == NULL || name->type != RT_JSON_STRING ||
        meta_slot(&list->items[i], &vm->outputs[i], &why) != 0) {
      return tvmrt_fail("DLRError", "No output metadata found. (Model.Outputs[%zu]: %s)", i, why);
    }
    vm->outputs[i].name = name->str;
  }
  return 0;
}

static int allocator_type(const tvmrt_json* meta) {
  const tvmrt_json* model = tvmrt_json_get(meta, "Model");
  const tvmrt_json* a =
      model && model->type == RT_JSON_OBJECT ? tvmrt_json_get(model, "RelayVMAllocator") : NULL;
  const char* env = getenv("DLR_RELAYVM_ALLOCATOR");
  if ((a && a->type == RT_JSON_STRING && strcmp(a->str, "naive") == 0) ||
      (env && strcmp(env, "naive") == 0)) {
    return 1; /* kNaive */
  }
  return 2; /* kPooled, DLR's default */
}

/* the executable over the library, the VirtualMachine, init as DLR calls it */
static int load(dlr_vm* vm, const dlr_parts* parts, const tvmrt_json* meta, DLDevice dev) {
  tvmrt_func* load_exe = tvmrt_registry_get("runtime.Load_Executable");
  tvmrt_module* lib;
  TVMByteArray bytes;
  TVMValue args[6], ret;
  int codes[6] = {kTVMBytes, kTVMModuleHandle, kDLInt, kDLInt, kDLInt, kDLInt}, rc = 0, status;
  if (load_exe == NULL) return tvmrt_fail("FunctionNotFoundError", "no runtime.Load_Executable");
  if (dlr_regular_file(parts->lib_path, "the model library") != 0 ||
      (lib = tvmrt_load_dso(parts->lib_path)) == NULL) {
    tvmrt_release(&load_exe->hdr);
    return -1;
  }
  bytes.data = parts->code;
  bytes.size = parts->code_len;
  args[0].v_handle = &bytes;
  args[1].v_handle = lib;
  status = tvmrt_func_call(load_exe, args, codes, 2, &ret, &rc);
  tvmrt_release(&load_exe->hdr);
  tvmrt_release(&lib->hdr); /* the executable imports it */
  if (status != 0) return -1;
  vm->exe = (tvmrt_module*)ret.v_handle;
  if (call(vm->exe, "vm_load_executable", NULL, NULL, 0, &ret, &rc) != 0) return -1;
  vm->machine = (tvmrt_module*)ret.v_handle;
  args[0].v_int64 = dev.device_type;
  args[1].v_int64 = dev.device_id;
  args[2].v_int64 = allocator_type(meta);
  args[3].v_int64 = kDLCPU; /* DLR: another device also initialises the CPU */
  args[4].v_int64 = 0;
  args[5].v_int64 = args[2].v_int64;
  codes[0] = codes[1] = kDLInt;
  return call(vm->machine, "init", args, codes, dev.device_type == kDLCPU ? 3 : 6, &ret, &rc);
}

int dlr_vm_create(dlr_model* m, const dlr_parts* parts, DLDevice dev) {
  dlr_vm* vm;
  if (m->meta == NULL) {
    return tvmrt_fail("DLRError", "%s (the RelayVM model's metadata, which it needs)",
                      m->meta_problem ? m->meta_problem : "no metadata was given");
  }
  if ((vm = (dlr_vm*)calloc(1, sizeof(dlr_vm))) == NULL) {
    return tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate a RelayVM model");
  }
  m->vm = vm;
  if (load(vm, parts, m->meta, dev) != 0 || describe_inputs(vm, m->meta) != 0 ||
      describe_outputs(vm, m->meta) != 0) {
    return -1; /* the model's destroy frees vm */
  }
  return 0;
}

size_t dlr_vm_num_inputs(const dlr_vm* vm) { return vm->num_inputs; }
size_t dlr_vm_num_outputs(const dlr_vm* vm) { return vm->num_outputs; }

int dlr_vm_input(const dlr_vm* vm, int index, const char* fn, const char** name, const char** type,
                 const int64_t** shape, int* dim) {
  if (dlr_check_index(index, vm->num_inputs, "input", fn) != 0) return -1;
  *name = vm->inputs[index].name;
  *type = vm->inputs[index].type;
  *shape = vm->inputs[index].shape;
  *dim = vm->inputs[index].dim;
  return 0;
}

static vm_slot* slot_named(const dlr_vm* vm, const char* name) {
  size_t i;
  for (i = 0; i < vm->num_inputs; ++i) {
    if (strcmp(vm->inputs[i].name, name) == 0) return &vm->inputs[i];
  }
  tvmrt_fail("DLRError", "Invalid input node name! '%.200s' is not a parameter of main", name);
  return NULL;
}

int dlr_vm_input_dtype(const dlr_vm* vm, const char* name, DLDataType* dtype) {
  const vm_slot* s = slot_named(vm, name);
  if (s == NULL) return -1;
  if (tvmrt_parse_dtype(s->type, dtype) != 0) {
    tvmrt_clear_last_error();
    return tvmrt_fail("DLRError", "Unknown input dtype: %.100s (Model.Inputs of the metadata)",
                      s->type);
  }
  return 0;
}

int dlr_vm_set_input(dlr_vm* vm, const char* name, const DLTensor* src) {
  vm_slot* s = slot_named(vm, name);
  tvmrt_ndarray* a;
  if (s == NULL) return -1;
  a = s->value;
  if (a == NULL || a->dl.ndim != src->ndim || a->dl.dtype.code != src->dtype.code ||
      a->dl.dtype.bits != src->dtype.bits || a->dl.dtype.lanes != src->dtype.lanes ||
      (src->ndim > 0 && memcmp(a->dl.shape, src->shape, sizeof(int64_t) * src->ndim) != 0)) {
    if ((a = tvmrt_ndarray_empty(src->shape, src->ndim, src->dtype)) == NULL) return -1;
  } else {
    tvmrt_retain(&a->hdr); /* as DLR: the same buffer when shape and dtype stay */
  }
  if (tvmrt_copy_tensor(src, &a->dl) != 0) {
    tvmrt_release(&a->hdr);
    return -1;
  }
  if (s->value) tvmrt_release(&s->value->hdr);
  s->value = a;
  return 0;
}

const DLTensor* dlr_vm_input_value(const dlr_vm* vm, const char* name) {
  const vm_slot* s = slot_named(vm, name);
  if (s == NULL) return NULL;
  if (s->value == NULL) {
    tvmrt_fail("DLRError", "input %.200s has not been set", name);
    return NULL;
  }
  return &s->value->dl;
}

/* a run's output must be of the meta's dtype: callers size their buffers by it */
static int check_output_type(const vm_slot* s, size_t i) {
  DLDataType want;
  const DLDataType got = s->value->dl.dtype;
  char name[64];
  if (tvmrt_parse_dtype(s->type, &want) == 0 && want.code == got.code && want.bits == got.bits &&
      want.lanes == got.lanes) {
    return 0;
  }
  tvmrt_clear_last_error();
  tvmrt_dtype_text(got, name, sizeof(name));
  return tvmrt_fail("DLRError",
                    "output %zu (%.200s) of the run is %s but the metadata "
                    "(Model.Outputs[%zu].dtype) says %.100s",
                    i, s->name, name, i, s->type);
}

/* the run's outputs: the result's fields (an ADT) or the result, one per meta output */
static int take_outputs(dlr_vm* vm) {
  TVMValue args[1], ret;
  int codes[1] = {kDLInt}, rc;
  size_t i, count;
  if (call(vm->machine, "get_num_outputs", NULL, NULL, 0, &ret, &rc) != 0) return -1;
  count = (size_t)ret.v_int64;
  if (count != vm->num_outputs) {
    return tvmrt_fail("DLRError",
                      "the model gave %zu outputs but its metadata (Model.Outputs) "
                      "describes %zu",
                      count, vm->num_outputs);
  }
  for (i = 0; i < count; ++i) {
    args[0].v_int64 = (int64_t)i;
    if (call(vm->machine, "get_output", args, codes, 1, &ret, &rc) != 0) return -1;
    if (vm->outputs[i].value) tvmrt_release(&vm->outputs[i].value->hdr);
    vm->outputs[i].value = tvmrt_ndarray_from_handle(ret.v_handle); /* a new reference */
    if (check_output_type(&vm->outputs[i], i) != 0) return -1;
  }
  return 0;
}

int dlr_vm_run(dlr_vm* vm) {
  TVMValue* args = (TVMValue*)calloc(vm->num_inputs + 1, sizeof(TVMValue));
  int* codes = (int*)calloc(vm->num_inputs + 1, sizeof(int));
  TVMValue ret;
  int rc, status = -1;
  size_t i;
  if (args == NULL || codes == NULL) {
    free(args);
    free(codes);
    return tvmrt_fail("DeviceOutOfMemoryError", "cannot pass %zu inputs", vm->num_inputs);
  }
  args[0].v_str = "main";
  codes[0] = kTVMStr;
  for (i = 0; i < vm->num_inputs; ++i) {
    if (vm->inputs[i].value == NULL) {
      tvmrt_fail("DLRError", "input %.200s of the RelayVM model is not set (SetDLRInput)",
                 vm->inputs[i].name);
      goto done;
    }
    args[i + 1].v_handle = &vm->inputs[i].value->dl;
    codes[i + 1] = kTVMNDArrayHandle;
  }
  vm->ran = 0;
  if (call(vm->machine, "set_input", args, codes, (int)vm->num_inputs + 1, &ret, &rc) == 0 &&
      call(vm->machine, "invoke_stateful", args, codes, 1, &ret, &rc) == 0 &&
      take_outputs(vm) == 0) {
    vm->ran = 1;
    status = 0;
  }
done:
  free(args);
  free(codes);
  return status;
}

int dlr_vm_output(const dlr_vm* vm, int index, const char* fn, const char** type,
                  const int64_t** shape, int* dim) {
  const vm_slot* s;
  if (dlr_check_index(index, vm->num_outputs, "output", fn) != 0) return -1;
  s = &vm->outputs[index];
  *type = s->type;
  if (vm->ran) {
    *shape = s->value->dl.shape;
    *dim = s->value->dl.ndim;
  } else { /* before a run: the meta's shape, as DLR */
    *shape = s->shape;
    *dim = s->dim;
  }
  return 0;
}

tvmrt_ndarray* dlr_vm_output_value(const dlr_vm* vm, int index, const char* fn) {
  if (dlr_check_index(index, vm->num_outputs, "output", fn) != 0) return NULL;
  if (!vm->ran) {
    tvmrt_fail("DLRError", "%s: the RelayVM model has not run yet: its outputs are unknown", fn);
    return NULL;
  }
  return vm->outputs[index].value;
}
