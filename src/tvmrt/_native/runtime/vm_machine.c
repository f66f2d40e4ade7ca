/*
 * The `VirtualMachine` module (TVM's runtime::vm::VirtualMachine, src/runtime/vm/vm.cc) and
 * its packed functions:
 *   init(dev_type, dev_id, alloc_type, ...)   one triple per device; CPU only; 1 naive, 2 pooled
 *   set_input(func_name, inputs...)           every input, in parameter order
 *   set_one_input(func_name, index|name, v)   one input
 *   invoke(func_name)                         -> an NDArray or an ADT (kTVMObjectHandle)
 *   invoke_stateful(func_name)                runs; read the result with get_output
 *   invoke_return_to_device(func_name, device_type, device_id, inputs...)  (the CPU)
 *   get_output(index) / get_num_outputs()     the last result's fields (1 for a tensor)
 *   get_input_index(input_name, func_name)    the parameter's index, or -1
 * A VM runs one call at a time: init, set_input, invoke or get_output while another thread's
 * call runs fails with a TVMError (give each thread its own VM; they may share the executable).
 * Inputs: arrays (kTVMNDArrayHandle, or kTVMDLTensorHandle: used in place when 64-byte aligned and
 * dense, as TVM, else copied) and ADTs of arrays.
 */
#include <stdlib.h>
#include <string.h>

#include "vm.h"

typedef struct {
  tvmrt_module* exe_mod; /* borrowed: the module imports it */
  vm_exe* exe;
  int ready;
  int running; /* one invoke at a time (atomic): a second thread's call is refused */
  vm_state st;
  vm_trace trace;         /* the profiler's record (st.trace points here while it records) */
  tvmrt_object*** inputs; /* per function, NULL until set */
  tvmrt_object* result;
} vm_machine;

static void objs_free(tvmrt_object** v, size_t n) {
  size_t i;
  if (v == NULL) return;
  for (i = 0; i < n; ++i) tvmrt_release(v[i]);
  free(v);
}

static void machine_reset(vm_machine* m) {
  size_t i;
  for (i = 0; m->st.consts != NULL && i < m->exe->num_consts; ++i)
    tvmrt_release(&m->st.consts[i]->hdr);
  for (i = 0; m->st.kernels != NULL && i < m->exe->num_prims; ++i) {
    if (m->st.kernels[i] != NULL) tvmrt_release(&m->st.kernels[i]->hdr);
  }
  free(m->st.consts);
  free(m->st.kernels);
  tvmrt_vm_pool_release(m->st.pool);
  m->st.consts = NULL;
  m->st.kernels = NULL;
  m->st.pool = NULL;
  m->ready = 0;
}

static void machine_finalize(tvmrt_module* mod) {
  vm_machine* m = (vm_machine*)mod->impl;
  size_t i;
  for (i = 0; i < m->exe->num_funcs; ++i) objs_free(m->inputs[i], m->exe->funcs[i].num_params);
  free(m->inputs);
  tvmrt_release(m->result);
  tvmrt_vm_trace_free(&m->trace);
  machine_reset(m);
  free(m);
}

static int str_arg(TVMValue* args, int* codes, int n, int i, const char* fn, const char** out) {
  if (i >= n || codes[i] != kTVMStr) {
    return tvmrt_fail("ArgumentTypeError", "VirtualMachine.%s: argument %d must be a string", fn,
                      i);
  }
  *out = args[i].v_str;
  return 0;
}

static int func_of(vm_machine* m, const char* name) {
  int k = tvmrt_vm_find_func(m->exe, name);
  if (k < 0) tvmrt_fail("InputNotFoundError", "the executable has no function '%.100s'", name);
  return k;
}

/* Every call that reads or frees the VM's state (init, the inputs, invoke, the result, the
   limits) holds `running` for its length: one in another thread meanwhile is refused, so init
   cannot free the constants, kernels and allocator an invoke is using, nor set_input an input
   it is reading, nor an invoke the result get_output is handing out */
static int enter(vm_machine* m, const char* what) {
  if (__atomic_exchange_n(&m->running, 1, __ATOMIC_ACQUIRE) != 0) {
    return tvmrt_fail("TVMError",
                      "VirtualMachine.%s: this VirtualMachine is already running in another "
                      "thread (give each thread its own VM)",
                      what);
  }
  return 0;
}

static int leave(vm_machine* m, int status) {
  __atomic_store_n(&m->running, 0, __ATOMIC_RELEASE);
  return status;
}

static int init_locked(vm_machine* m, TVMValue* args, int* codes, int n) {
  int i, pooled = 1, found = 0;
  size_t k;
  tvmrt_module* lib;
  if (n == 0 || n % 3 != 0) {
    return tvmrt_fail("ArgumentTypeError",
                      "init takes (device_type, device_id, allocator_type) "
                      "triples, got %d values",
                      n);
  }
  for (i = 0; i < n; i += 3) {
    if (codes[i] != kDLInt || codes[i + 1] != kDLInt || codes[i + 2] != kDLInt) {
      return tvmrt_fail("ArgumentTypeError", "init: triple %d is not three integers", i / 3);
    }
    if (args[i + 2].v_int64 != 1 && args[i + 2].v_int64 != 2) {
      return tvmrt_fail("InvalidArgumentError",
                        "init: allocator type %lld is not 1 (naive) or 2 (pooled)",
                        (long long)args[i + 2].v_int64);
    }
    if (args[i].v_int64 == kDLCPU && !found) found = 1, pooled = args[i + 2].v_int64 == 2;
  }
  for (k = 0; k < m->exe->num_devs; ++k) {
    if (m->exe->dev_types[k] != kDLCPU || !found) {
      return tvmrt_fail("DeviceUnavailableError",
                        "virtual device %zu needs a device of type %d; "
                        "libtvmrt_runtime's VM runs on CPU devices (type 1) only",
                        k, m->exe->dev_types[k]);
    }
  }
  for (k = 0; k < m->exe->num_consts; ++k) {
    if (m->exe->consts[k] == NULL) {
      return tvmrt_fail("ModuleLoadError",
                        "Need to load late-bound-constants before creating VM: "
                        "constant %zu (%.64s) is not loaded",
                        k, m->exe->const_names[k]);
    }
  }
  if (m->exe_mod->num_imports == 0) {
    return tvmrt_fail("ModuleLoadError", "the executable has no kernel library");
  }
  lib = m->exe_mod->imports[0];
  machine_reset(m);
  m->st.exe = m->exe;
  tvmrt_vm_limits_from_env(&m->st.limits);
  m->st.consts = (tvmrt_ndarray**)calloc(m->exe->num_consts + 1, sizeof(void*));
  m->st.kernels = (tvmrt_func**)calloc(m->exe->num_prims + 1, sizeof(void*));
  m->st.pool = tvmrt_vm_pool_new(pooled, &m->st.limits);
  if (m->st.consts == NULL || m->st.kernels == NULL || m->st.pool == NULL) {
    machine_reset(m);
    return tvmrt_fail("DeviceOutOfMemoryError", "cannot set the VM up");
  }
  for (k = 0; k < m->exe->num_consts; ++k) {
    m->st.consts[k] = m->exe->consts[k];
    tvmrt_retain(&m->st.consts[k]->hdr);
  }
  for (k = 0; k < m->exe->num_prims; ++k) {
    m->st.kernels[k] = tvmrt_module_get(lib, m->exe->prims[k], 1);
    if (m->st.kernels[k] == NULL) {
      tvmrt_fail("FunctionNotFoundError",
                 "the executable calls kernel '%.200s', which its library "
                 "('%s' module) does not have",
                 m->exe->prims[k], lib->type_key);
      machine_reset(m);
      return -1;
    }
  }
  m->ready = 1;
  return 0;
}

static int f_init(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  vm_machine* m = (vm_machine*)self;
  if (enter(m, "init") != 0) return -1;
  return leave(m, init_locked(m, args, codes, n));
}

static int bind(vm_machine* m, int k, int index, TVMValue v, int code) {
  const vm_func* fn = &m->exe->funcs[k];
  tvmrt_object* value;
  if (m->inputs[k] == NULL) {
    m->inputs[k] = (tvmrt_object**)calloc(fn->num_params + 1, sizeof(void*));
    if (m->inputs[k] == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot hold inputs");
  }
  value = tvmrt_vm_input_value(v, code, index);
  if (value == NULL) return -1;
  tvmrt_release(m->inputs[k][index]);
  m->inputs[k][index] = value;
  return 0;
}

static int set_input_locked(vm_machine* m, TVMValue* args, int* codes, int n) {
  const char* name = NULL;
  int k, i;
  if (str_arg(args, codes, n, 0, "set_input", &name) != 0 || (k = func_of(m, name)) < 0) return -1;
  if ((size_t)(n - 1) != m->exe->funcs[k].num_params) {
    return tvmrt_fail("InvalidArgumentError", "function '%.100s' takes %zu inputs, got %d", name,
                      m->exe->funcs[k].num_params, n - 1);
  }
  for (i = 1; i < n; ++i) {
    if (bind(m, k, i - 1, args[i], codes[i]) != 0) return -1;
  }
  return 0;
}

static int f_set_input(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  vm_machine* m = (vm_machine*)self;
  if (enter(m, "set_input") != 0) return -1;
  return leave(m, set_input_locked(m, args, codes, n));
}

static int param_index(const vm_func* fn, const char* name) {
  size_t i;
  for (i = 0; i < fn->num_params; ++i) {
    if (strcmp(fn->params[i], name) == 0) return (int)i;
  }
  return -1;
}

static int set_one_input_locked(vm_machine* m, TVMValue* args, int* codes, int n) {
  const char* name = NULL;
  int k, index;
  if (n != 3)
    return tvmrt_fail("InvalidArgumentError",
                      "set_one_input takes (func_name, index or name, value)");
  if (str_arg(args, codes, n, 0, "set_one_input", &name) != 0 || (k = func_of(m, name)) < 0)
    return -1;
  if (codes[1] == kTVMStr) {
    index = param_index(&m->exe->funcs[k], args[1].v_str);
    if (index < 0)
      return tvmrt_fail("InputNotFoundError", "function '%.100s' has no input '%.100s'", name,
                        args[1].v_str);
  } else if (codes[1] == kDLInt && args[1].v_int64 >= 0 &&
             (uint64_t)args[1].v_int64 < m->exe->funcs[k].num_params) {
    index = (int)args[1].v_int64;
  } else {
    return tvmrt_fail("InputIndexError", "function '%.100s' has no such input", name);
  }
  return bind(m, k, index, args[2], codes[2]);
}

static int f_set_one_input(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  vm_machine* m = (vm_machine*)self;
  if (enter(m, "set_one_input") != 0) return -1;
  return leave(m, set_one_input_locked(m, args, codes, n));
}

static int run(vm_machine* m, TVMValue* args, int* codes, int n, const char* what) { /* entered */
  const char* name = NULL;
  int k;
  size_t i;
  tvmrt_object* out = NULL;
  const vm_func* fn;
  if (!m->ready)
    return tvmrt_fail("ModuleLoadError", "the VirtualMachine is not initialised: call init first");
  if (str_arg(args, codes, n, 0, what, &name) != 0 || (k = func_of(m, name)) < 0) return -1;
  fn = &m->exe->funcs[k];
  for (i = 0; i < fn->num_params; ++i) {
    if (m->inputs[k] == NULL || m->inputs[k][i] == NULL) {
      return tvmrt_fail("InputNotFoundError", "set the inputs of '%.100s' before invoking it",
                        name);
    }
  }
  if (tvmrt_vm_run(&m->st, k, m->inputs[k], fn->num_params, &out) != 0) return -1;
  tvmrt_release(m->result);
  m->result = out;
  return 0;
}

static int give(tvmrt_object* v, TVMValue* ret, int* rc) { /* a new reference to the caller */
  tvmrt_ndarray* a = tvmrt_vm_as_array(v);
  if (a == NULL && (v == NULL || v->magic != RT_MAGIC_ADT)) {
    return tvmrt_fail("ArgumentTypeError", "the VM's result holds %s, not a tensor or an ADT",
                      tvmrt_vm_kind(v));
  }
  tvmrt_retain(v);
  ret->v_handle = a != NULL ? (void*)&a->dl : (void*)v;
  *rc = a != NULL ? kTVMNDArrayHandle : kTVMObjectHandle;
  return 0;
}

static int f_invoke(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  vm_machine* m = (vm_machine*)self;
  if (enter(m, "invoke") != 0) return -1;
  if (run(m, args, codes, n, "invoke") != 0) return leave(m, -1);
  return leave(m, give(m->result, ret, rc));
}

static int f_invoke_stateful(void* self, TVMValue* args, int* codes, int n, TVMValue* ret,
                             int* rc) {
  vm_machine* m = (vm_machine*)self;
  if (enter(m, "invoke_stateful") != 0) return -1;
  return leave(m, run(m, args, codes, n, "invoke_stateful"));
}

/* (func_name, device_type, device_id, inputs...): set_input, invoke, the result on that
   device (the CPU: as it is) */
static int f_invoke_to_device(void* self, TVMValue* args, int* codes, int n, TVMValue* ret,
                              int* rc) {
  vm_machine* m = (vm_machine*)self;
  if (n < 3 || codes[0] != kTVMStr || codes[1] != kDLInt || codes[2] != kDLInt) {
    return tvmrt_fail("ArgumentTypeError",
                      "invoke_return_to_device takes (func_name, "
                      "device_type, device_id, inputs...)");
  }
  if (args[1].v_int64 != kDLCPU) {
    return tvmrt_fail("DeviceUnavailableError",
                      "invoke_return_to_device: device type %lld; "
                      "libtvmrt_runtime's VM returns results on the CPU (type 1) only",
                      (long long)args[1].v_int64);
  }
  TVMValue* in = (TVMValue*)malloc((size_t)(n - 2) * sizeof(TVMValue));
  int* in_codes = (int*)malloc((size_t)(n - 2) * sizeof(int));
  int result = -1;
  if (in == NULL || in_codes == NULL) {
    free(in);
    free(in_codes);
    return tvmrt_fail("DeviceOutOfMemoryError", "cannot hold %d inputs", n - 3);
  }
  in[0] = args[0]; /* set_input's (func_name, inputs...), the caller's arrays untouched */
  in_codes[0] = kTVMStr;
  memcpy(in + 1, args + 3, (size_t)(n - 3) * sizeof(TVMValue));
  memcpy(in_codes + 1, codes + 3, (size_t)(n - 3) * sizeof(int));
  if (enter(m, "invoke_return_to_device") == 0) {
    if (set_input_locked(m, in, in_codes, n - 2) == 0 &&
        run(m, in, in_codes, 1, "invoke_return_to_device") == 0)
      result = give(m->result, ret, rc);
    leave(m, 0);
  }
  free(in);
  free(in_codes);
  return result;
}

static int f_get_num_outputs(void* self, TVMValue* args, int* codes, int n, TVMValue* ret,
                             int* rc) {
  vm_machine* m = (vm_machine*)self;
  if (enter(m, "get_num_outputs") != 0) return -1;
  ret->v_int64 = (m->result != NULL && m->result->magic == RT_MAGIC_ADT)
                     ? (int64_t)((vm_adt*)m->result)->size
                     : 1;
  *rc = kDLInt;
  return leave(m, 0);
}

static int get_output_locked(vm_machine* m, TVMValue* args, int* codes, int n, TVMValue* ret,
                             int* rc) {
  tvmrt_object* v = NULL;
  int64_t i;
  if (n != 1 || codes[0] != kDLInt)
    return tvmrt_fail("ArgumentTypeError", "get_output takes an output index");
  i = args[0].v_int64;
  if (m->result != NULL && m->result->magic == RT_MAGIC_ADT) {
    vm_adt* t = (vm_adt*)m->result;
    if (i >= 0 && (uint64_t)i < t->size) v = t->fields[i];
  } else if (i == 0) {
    v = m->result;
  }
  if (tvmrt_vm_as_array(v) == NULL) {
    return tvmrt_fail("InputIndexError", "output %lld is not a tensor of the last result",
                      (long long)i);
  }
  return give(v, ret, rc);
}

static int f_get_output(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  vm_machine* m = (vm_machine*)self;
  if (enter(m, "get_output") != 0) return -1;
  return leave(m, get_output_locked(m, args, codes, n, ret, rc));
}

static int f_get_input_index(void* self, TVMValue* args, int* codes, int n, TVMValue* ret,
                             int* rc) {
  vm_machine* m = (vm_machine*)self;
  const char *input = NULL, *name = "main";
  int k;
  if (str_arg(args, codes, n, 0, "get_input_index", &input) != 0) return -1;
  if (n > 1 && str_arg(args, codes, n, 1, "get_input_index", &name) != 0) return -1;
  if ((k = func_of(m, name)) < 0) return -1;
  ret->v_int64 = param_index(&m->exe->funcs[k], input);
  *rc = kDLInt;
  return 0;
}

/* tvmrt's set_limits(max_frames, max_steps, max_alloc_bytes, max_live_bytes) after init,
   as TVMRT_VM_MAX_* give them (steps 0, bytes -1: no limit); TVM's VM has no limits */
static int f_set_limits(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  vm_machine* m = (vm_machine*)self;
  vm_limits l;
  int i;
  for (i = 0; i < n; ++i) {
    if (codes[i] != kDLInt || args[i].v_int64 < (i < 2 ? (i == 0) : -1)) n = -1;
  }
  if (n != 4)
    return tvmrt_fail("InvalidArgumentError",
                      "set_limits takes max_frames >= 1, max_steps >= 0 "
                      "and max_alloc_bytes, max_live_bytes >= -1");
  if (enter(m, "set_limits") != 0) return -1;
  if (!m->ready) return leave(m, tvmrt_fail("TVMError", "set_limits: the VM is not initialised"));
  l = (vm_limits){args[0].v_int64, args[1].v_int64, args[2].v_int64, args[3].v_int64};
  m->st.limits = l;
  tvmrt_vm_pool_set_limits(m->st.pool, &l);
  return leave(m, 0);
}

/* tvmrt's profile_start(): record the kernel calls and the instructions TVM's profiler
   times in the invokes until profile_stop() (vm_profile.c) */
static int f_profile_start(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  vm_machine* m = (vm_machine*)self;
  if (tvmrt_arity("profile_start", n, 0, 0) != 0 || enter(m, "profile_start") != 0) return -1;
  tvmrt_vm_trace_clear(&m->trace);
  m->st.trace = &m->trace;
  return leave(m, 0);
}

/* tvmrt's profile_stop(): the events recorded since profile_start, as bytes (vm_profile.c
   says their layout; valid until the next profile_stop), and recording ends */
static int f_profile_stop(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  vm_machine* m = (vm_machine*)self;
  if (tvmrt_arity("profile_stop", n, 0, 0) != 0 || enter(m, "profile_stop") != 0) return -1;
  if (m->st.trace == NULL) {
    return leave(m, tvmrt_fail("TVMError", "profile_stop: no profile_start() before it"));
  }
  m->st.trace = NULL;
  return leave(m, tvmrt_vm_trace_blob(&m->trace, ret, rc));
}

static const struct {
  const char* name;
  tvmrt_fn fn;
} k_funcs[] = {
    {"init", f_init},
    {"set_input", f_set_input},
    {"set_one_input", f_set_one_input},
    {"invoke", f_invoke},
    {"invoke_stateful", f_invoke_stateful},
    {"invoke_return_to_device", f_invoke_to_device},
    {"get_output", f_get_output},
    {"get_num_outputs", f_get_num_outputs},
    {"get_input_index", f_get_input_index},
    {"set_limits", f_set_limits},
    {"profile_start", f_profile_start},
    {"profile_stop", f_profile_stop},
};

static tvmrt_func* machine_lookup(tvmrt_module* mod, const char* name) {
  size_t i;
  for (i = 0; i < sizeof(k_funcs) / sizeof(k_funcs[0]); ++i) {
    if (strcmp(k_funcs[i].name, name) == 0)
      return tvmrt_func_new(k_funcs[i].fn, mod->impl, &mod->hdr);
  }
  return NULL;
}

tvmrt_module* tvmrt_vm_machine_new(tvmrt_module* exe_mod, vm_exe* exe) {
  vm_machine* m = (vm_machine*)calloc(1, sizeof(vm_machine));
  tvmrt_module* mod;
  if (m == NULL ||
      (m->inputs = (tvmrt_object***)calloc(exe->num_funcs + 1, sizeof(void*))) == NULL) {
    free(m);
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate a VirtualMachine");
    return NULL;
  }
  m->exe_mod = exe_mod;
  m->exe = exe;
  mod = tvmrt_module_new("VirtualMachine", m);
  if (mod == NULL) {
    free(m->inputs);
    free(m);
    return NULL;
  }
  mod->lookup = machine_lookup;
  mod->finalize = machine_finalize;
  if (tvmrt_module_import(mod, exe_mod) != 0) {
    tvmrt_release(&mod->hdr);
    return NULL;
  }
  return mod;
}
