/*
 * The `relax.VirtualMachine` module (TVM's VirtualMachineImpl) over an executable module: its
 * packed functions, as TVM 0.19 to 0.27 name them,
 *
 *   vm_initialization(dev_type, dev_id, alloc_type, ...)   devices, constants, the function
 *                                                          pool (every name resolved now)
 *   <function name>(args...)            a closure of the VM function, called
 *   invoke_closure(closure, args...)    set_input(name, args...)
 *   set_input_with_param_module(name, args..., params)     invoke_stateful(name)
 *   get_output(name, index...)          get_output_arity(name, index...)
 *   get_function_arity(name)            get_function_param_name(name, i)
 *   save_function(name, saved, include_return, args...)    set_instrument(func or name, ...)
 *   profile(name, args...)              the per-call timing report (TVM's JSON Report)
 *
 * and tvmrt's `set_limits(max_steps, max_frames, max_live_bytes, max_storage_bytes)`.
 * Names are resolved at initialisation: the kernel library first, then the functions an
 * application registered, then the VM's builtins; a name that none provides, or one of the
 * families tvmrt refuses (relax_builtin.c), fails the initialisation listing every such name.
 * One invoke runs at a time per VM (another thread's call is refused; the instrument may
 * call back on the same thread).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "relax.h"

#define MAX_MISSING_TEXT 2048

static uint64_t g_next_vm_id = 1;

static uint64_t thread_token(void) {
  static _Thread_local char token;
  return (uint64_t)(uintptr_t)&token;
}

/* ---------------------------------------------------------------------------------- */
/* values in and out of packed calls                                                   */

/* a VM value handed to a C caller: its reference goes with it (strings as objects) */
static void to_return(rx_value v, TVMValue* out, int* code) {
  tvmrt_object* temp = NULL;
  if (v.kind == RX_STR) {
    out->v_handle = v.v.obj;
    *code = kTVMObjectHandle;
    return;
  }
  tvmrt_rx_to_packed(v, 0, out, code, &temp);
}

static int args_in(TVMValue* args, int* codes, int first, int n, rx_value** out) {
  int i;
  *out = (rx_value*)calloc((size_t)(n > first ? n - first : 1), sizeof(rx_value));
  if (*out == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot take %d arguments", n);
  for (i = first; i < n; ++i) {
    if (tvmrt_rx_from_packed(args[i], codes[i], 0, &(*out)[i - first]) != 0) {
      int k;
      for (k = 0; k < i - first; ++k) tvmrt_rx_release(&(*out)[k]);
      free(*out);
      *out = NULL;
      return -1;
    }
  }
  return 0;
}

static void args_free(rx_value* a, int n) {
  int i;
  for (i = 0; a != NULL && i < n; ++i) tvmrt_rx_release(&a[i]);
  free(a);
}

static rx_vm* vm_of(void* self) { return (rx_vm*)self; }

/* claim the VM for an invoke (the same thread may call back in) */
static int enter(rx_vm* vm, uint64_t* previous) {
  uint64_t me = thread_token(), none = 0;
  if (!vm->initialized) {
    return tvmrt_fail("InvalidArgumentError",
                      "the Relax VM is not initialised: call vm_initialization(device_type, "
                      "device_id, allocator, ...) first");
  }
  *previous = __atomic_load_n(&vm->busy_thread, __ATOMIC_ACQUIRE);
  if (*previous == me) return 0;
  if (!__atomic_compare_exchange_n(&vm->busy_thread, &none, me, 0, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE)) {
    return tvmrt_fail("InvalidArgumentError",
                      "the Relax VM is running an invoke on another thread; one VM runs one "
                      "invoke at a time (make a VirtualMachine per thread)");
  }
  vm->steps = 0;
  return 0;
}

static void leave(rx_vm* vm, uint64_t previous) {
  if (previous == 0) __atomic_store_n(&vm->busy_thread, 0, __ATOMIC_RELEASE);
}

static int find(rx_vm* vm, const char* name, const char* what) {
  int i = tvmrt_rx_find_func(vm->exe, name);
  if (i < 0) return tvmrt_fail("InvalidArgumentError", "%s: Unknown function: %.200s", what, name);
  return i;
}

static int str_arg(TVMValue* args, int* codes, int n, int i, const char* fn, const char** out) {
  if (i >= n || codes[i] != kTVMStr) {
    return tvmrt_fail("ArgumentTypeError", "%s: argument %d must be a function name (a string)", fn,
                      i);
  }
  *out = args[i].v_str;
  return 0;
}

/* ---------------------------------------------------------------------------------- */
/* initialisation                                                                      */

static void append_missing(char* text, size_t* used, const char* name, const char* why) {
  int w;
  if (*used + 8 >= MAX_MISSING_TEXT) return;
  w = snprintf(text + *used, MAX_MISSING_TEXT - *used, "%s%s%s%s%s", *used ? "; " : "", name,
               why ? " (" : "", why ? why : "", why ? ")" : "");
  if (w > 0)
    *used += (size_t)w < MAX_MISSING_TEXT - *used ? (size_t)w : MAX_MISSING_TEXT - *used - 1;
}

static int f_native(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  return TVMFuncCall(self, args, codes, n, ret, rc);
}

static tvmrt_func* native_function(const char* name) {
  const void* native = tvmrt_native_function(name);
  return native != NULL ? tvmrt_func_new(f_native, (void*)native, NULL) : NULL;
}

static int resolve(rx_vm* vm) {
  const rx_exe* exe = vm->exe;
  char missing[MAX_MISSING_TEXT] = "";
  size_t used = 0, i, k;
  int nmissing = 0;
  vm->func_pool =
      (rx_pool_entry*)calloc(exe->num_funcs ? exe->num_funcs : 1, sizeof(rx_pool_entry));
  if (vm->func_pool == NULL)
    return tvmrt_fail("DeviceOutOfMemoryError", "cannot make the function pool");
  for (i = 0; i < exe->num_funcs; ++i) {
    const rx_func_info* f = &exe->funcs[i];
    rx_pool_entry* e = &vm->func_pool[i];
    tvmrt_func* packed = NULL;
    e->kind = f->kind;
    if (f->kind == RX_FUNC_VM) {
      rx_closure* c = tvmrt_rx_closure_new(vm->id, (int64_t)i, NULL, f->name, NULL, 0);
      if (c == NULL) return -1;
      e->value = tvmrt_rx_object(RX_CLOSURE, &c->hdr);
      continue;
    }
    if (f->kind == RX_FUNC_VM_TIR) {
      char name[300];
      snprintf(name, sizeof(name), "__vmtir__%s", f->name);
      for (k = 0; k < vm->exec->num_imports && packed == NULL; ++k)
        packed = tvmrt_module_get(vm->exec->imports[k], name, 1);
      if (packed == NULL) {
        nmissing++;
        append_missing(missing, &used, name, "the compiled function of a vm_tir function");
        continue;
      }
      {
        tvmrt_func* body = tvmrt_rx_tir_func(vm, (int64_t)i, packed);
        rx_closure* c;
        tvmrt_release(&packed->hdr);
        if (body == NULL) return -1;
        c = tvmrt_rx_closure_new(0, -1, body, f->name, NULL, 0);
        tvmrt_release(&body->hdr);
        if (c == NULL) return -1;
        e->value = tvmrt_rx_object(RX_CLOSURE, &c->hdr);
      }
      continue;
    }
    for (k = 0; k < vm->exec->num_imports && packed == NULL; ++k)
      packed = tvmrt_module_get(vm->exec->imports[k], f->name, 1);
    if (packed == NULL) packed = tvmrt_registry_find(f->name);
    if (packed != NULL) {
      e->packed = packed;
      e->value = tvmrt_rx_object(RX_FUNC, &packed->hdr);
      tvmrt_retain(&packed->hdr);
      continue;
    }
    e->builtin = tvmrt_rx_builtin(f->name);
    if (e->builtin == NULL) e->builtin = tvmrt_rx_run_builtin(f->name);
    if (e->builtin != NULL) {
      e->kind = RX_POOL_BUILTIN;
      e->invoke_closure = strcmp(f->name, "vm.builtin.invoke_closure") == 0;
      continue;
    }
    packed = native_function(f->name); /* the C-implemented contrib functions (sort.c) */
    if (packed == NULL) packed = tvmrt_registry_find_host(f->name); /* then the host's */
    if (packed != NULL) {
      e->packed = packed;
      e->value = tvmrt_rx_object(RX_FUNC, &packed->hdr);
      tvmrt_retain(&packed->hdr);
      continue;
    }
    nmissing++;
    append_missing(missing, &used, f->name, tvmrt_rx_refused_family(f->name));
  }
  if (nmissing) {
    return tvmrt_fail("UnsupportedError",
                      "Cannot find %d PackedFunc%s in either the Relax VM kernel library or "
                      "tvmrt's runtime: %s",
                      nmissing, nmissing > 1 ? "s" : "", missing);
  }
  return 0;
}

static void release_state(rx_vm* vm) {
  size_t i;
  tvmrt_rx_tir_free_pools(vm);
  for (i = 0; vm->func_pool != NULL && i < vm->exe->num_funcs; ++i) {
    tvmrt_rx_release(&vm->func_pool[i].value);
    if (vm->func_pool[i].packed != NULL) tvmrt_release(&vm->func_pool[i].packed->hdr);
  }
  free(vm->func_pool);
  vm->func_pool = NULL;
  for (i = 0; vm->consts != NULL && i < vm->exe->num_consts; ++i) tvmrt_rx_release(&vm->consts[i]);
  free(vm->consts);
  vm->consts = NULL;
  for (i = 0; i < vm->exe->num_funcs; ++i) {
    if (vm->inputs != NULL) tvmrt_rx_release(&vm->inputs[i]);
    if (vm->outputs != NULL) tvmrt_rx_release(&vm->outputs[i]);
  }
  free(vm->inputs);
  free(vm->outputs);
  vm->inputs = vm->outputs = NULL;
  for (i = 0; i < vm->num_saved; ++i) {
    free(vm->saved_names[i]);
    tvmrt_rx_release(&vm->saved[i]);
  }
  free(vm->saved_names);
  free(vm->saved);
  vm->saved_names = NULL;
  vm->saved = NULL;
  vm->num_saved = 0;
  for (i = 0; i < vm->num_devices; ++i) tvmrt_rx_pool_release(vm->pools[i]);
  vm->num_devices = 0;
  vm->initialized = 0;
  tvmrt_rx_budget_release(vm->budget);
  vm->budget = NULL;
}

static int f_init(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  rx_vm* vm = vm_of(self);
  int i;
  (void)ret;
  (void)rc;
  if (n == 0 || n % 3 != 0 || n / 3 > RX_MAX_DEVICES) {
    return tvmrt_fail("InvalidArgumentError",
                      "vm_initialization takes (device_type, device_id, allocator) triples for "
                      "1 to %d devices, got %d values",
                      RX_MAX_DEVICES, n);
  }
  for (i = 0; i < n; ++i) {
    if (codes[i] != kDLInt) {
      return tvmrt_fail("ArgumentTypeError", "vm_initialization: argument %d must be an int", i);
    }
  }
  if (__atomic_load_n(&vm->busy_thread, __ATOMIC_ACQUIRE) != 0) {
    return tvmrt_fail("InvalidArgumentError",
                      "vm_initialization while an invoke runs on this VM is refused");
  }
  release_state(vm);
  vm->budget = tvmrt_rx_budget_new(vm->limits.max_live);
  if (vm->budget == NULL) return -1;
  for (i = 0; i < n / 3; ++i) {
    int64_t type = args[3 * i].v_int64, id = args[3 * i + 1].v_int64,
            alloc = args[3 * i + 2].v_int64;
    DLDevice dev;
    if (!tvmrt_device_supported(type)) {
      release_state(vm);
      return tvmrt_fail("DeviceUnavailableError",
                        "vm_initialization: device type %lld; tvmrt's Relax VM runs on %s",
                        (long long)type, tvmrt_device_backends());
    }
    if (id < 0 || id > 64 || (alloc != 1 && alloc != 2)) {
      release_state(vm);
      return tvmrt_fail("InvalidArgumentError",
                        "vm_initialization: device id %lld, allocator %lld (1 naive, 2 pooled)",
                        (long long)id, (long long)alloc);
    }
    if (tvmrt_device_ready((int)type, (int)id, "vm_initialization") != 0) {
      release_state(vm);
      return -1;
    }
    dev.device_type = (DLDeviceType)type;
    dev.device_id = (int)id;
    vm->devices[i] = dev;
    vm->pools[i] = tvmrt_rx_pool_new(dev, alloc == 2, vm->budget, &vm->limits);
    if (vm->pools[i] == NULL) {
      release_state(vm);
      return -1;
    }
    vm->num_devices = (size_t)i + 1;
  }
  if (vm->devices[vm->num_devices - 1].device_type != kDLCPU) {
    release_state(vm);
    return tvmrt_fail("InvalidArgumentError",
                      "vm_initialization: the last device must be the host CPU (shape functions "
                      "run there)");
  }
  vm->consts = (rx_value*)calloc(vm->exe->num_consts ? vm->exe->num_consts : 1, sizeof(rx_value));
  vm->inputs = (rx_value*)calloc(vm->exe->num_funcs ? vm->exe->num_funcs : 1, sizeof(rx_value));
  vm->outputs = (rx_value*)calloc(vm->exe->num_funcs ? vm->exe->num_funcs : 1, sizeof(rx_value));
  if (vm->consts == NULL || vm->inputs == NULL || vm->outputs == NULL) {
    release_state(vm);
    return tvmrt_fail("DeviceOutOfMemoryError", "cannot initialise the Relax VM");
  }
  vm->initialized = 1;
  for (i = 0; (size_t)i < vm->exe->num_consts; ++i) {
    const char* scope = vm->exe->const_scopes != NULL ? vm->exe->const_scopes[i] : NULL;
    if (scope != NULL && *scope && strcmp(scope, "global") != 0) {
      release_state(vm);
      return tvmrt_fail("UnsupportedError",
                        "constant %d is in memory scope '%.64s': tvmrt loads constants in the "
                        "global scope only",
                        i, scope);
    }
    if (tvmrt_rx_to_device(vm, vm->exe->consts[i], vm->devices[0], &vm->consts[i]) != 0) {
      release_state(vm);
      return -1;
    }
  }
  if (resolve(vm) != 0) {
    release_state(vm);
    return -1;
  }
  return 0;
}

/* ---------------------------------------------------------------------------------- */
/* invoking                                                                            */

/* the closure a name means: a saved one first, then a VM function's */
static int closure_of(rx_vm* vm, const char* name, rx_value* out) {
  size_t i;
  int f;
  for (i = 0; i < vm->num_saved; ++i) {
    if (strcmp(vm->saved_names[i], name) == 0) {
      *out = vm->saved[i];
      return 0;
    }
  }
  f = tvmrt_rx_find_func(vm->exe, name);
  if (f < 0 || vm->exe->funcs[f].kind == RX_FUNC_PACKED) return -1;
  *out = vm->func_pool[f].value;
  return 0;
}

/* call `callee` with C arguments args[first:] and hand the result to the C caller */
static int call_with_packed(rx_vm* vm, rx_value callee, TVMValue* args, int* codes, int first,
                            int n, TVMValue* ret, int* rc) {
  rx_value *in = NULL, out = {RX_NULL, 0, {0}};
  uint64_t previous;
  int status;
  if (enter(vm, &previous) != 0) return -1;
  if (args_in(args, codes, first, n, &in) != 0) {
    leave(vm, previous);
    return -1;
  }
  status = tvmrt_rx_call_value(vm, callee, in, n - first, &out);
  args_free(in, n - first);
  leave(vm, previous);
  if (status != 0) return -1;
  to_return(out, ret, rc);
  return 0;
}

typedef struct {
  tvmrt_object hdr;
  tvmrt_module* mod; /* a reference: the VM lives as long as its functions */
  rx_value callee;
} entry;

enum { RT_MAGIC_RX_ENTRY = 0x52454e31, RT_MAGIC_RX_PROFILER = 0x52505231 };

static void entry_destroy(tvmrt_object* obj) {
  entry* e = (entry*)obj;
  tvmrt_rx_release(&e->callee);
  tvmrt_release(&e->mod->hdr);
  obj->magic = 0;
  free(e);
}

static int f_entry(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  entry* e = (entry*)self;
  return call_with_packed((rx_vm*)e->mod->impl, e->callee, args, codes, 0, n, ret, rc);
}

static int f_invoke_closure(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  rx_vm* vm = vm_of(self);
  rx_value callee = {RX_NULL, 0, {0}};
  int status;
  if (n < 1) return tvmrt_fail("InvalidArgumentError", "invoke_closure takes (closure, args...)");
  if (tvmrt_rx_from_packed(args[0], codes[0], 0, &callee) != 0) return -1;
  status = call_with_packed(vm, callee, args, codes, 1, n, ret, rc);
  tvmrt_rx_release(&callee);
  return status;
}

static int set_input(rx_vm* vm, TVMValue* args, int* codes, int n, int with_params) {
  const char* name = NULL;
  int f, i, count;
  rx_tuple* t;
  if (str_arg(args, codes, n, 0, "set_input", &name) != 0 || (f = find(vm, name, "set_input")) < 0)
    return -1;
  if (!vm->initialized)
    return tvmrt_fail("InvalidArgumentError", "the Relax VM is not initialised");
  count = n - 1;
  if (count != vm->exe->funcs[f].num_args) {
    return tvmrt_fail("InvalidArgumentError",
                      "The number of provided parameters doesn't match the number of arguments "
                      "for %.100s: %d given, %lld expected",
                      name, count, (long long)vm->exe->funcs[f].num_args);
  }
  t = tvmrt_rx_tuple_new((size_t)count);
  if (t == NULL) return -1;
  for (i = 0; i < count; ++i) {
    rx_value v = {RX_NULL, 0, {0}};
    int status;
    if (with_params && i == count - 1) { /* the module's get_params() */
      tvmrt_module* m;
      tvmrt_func* get;
      TVMValue rv;
      int rcode = kTVMNullptr;
      if (codes[1 + i] != kTVMModuleHandle ||
          (m = tvmrt_module_check(args[1 + i].v_handle)) == NULL ||
          (get = tvmrt_module_get(m, "get_params", 0)) == NULL) {
        tvmrt_release(&t->hdr);
        return tvmrt_fail("ArgumentTypeError",
                          "set_input_with_param_module: the last argument must be a module with "
                          "get_params");
      }
      status = tvmrt_func_call(get, NULL, NULL, 0, &rv, &rcode);
      tvmrt_release(&get->hdr);
      if (status == 0) status = tvmrt_rx_from_packed(rv, rcode, 1, &t->items[i]);
    } else {
      status = tvmrt_rx_from_packed(args[1 + i], codes[1 + i], 0, &v);
      if (status == 0) status = tvmrt_rx_to_device(vm, v, vm->devices[0], &t->items[i]);
      tvmrt_rx_release(&v);
    }
    if (status != 0) {
      tvmrt_release(&t->hdr);
      return -1;
    }
  }
  tvmrt_rx_release(&vm->inputs[f]);
  vm->inputs[f] = tvmrt_rx_object(RX_TUPLE, &t->hdr);
  return 0;
}

static int f_set_input(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  (void)ret;
  (void)rc;
  return set_input(vm_of(self), args, codes, n, 0);
}

static int f_set_input_params(void* self, TVMValue* args, int* codes, int n, TVMValue* ret,
                              int* rc) {
  (void)ret;
  (void)rc;
  return set_input(vm_of(self), args, codes, n, 1);
}

static int f_invoke_stateful(void* self, TVMValue* args, int* codes, int n, TVMValue* ret,
                             int* rc) {
  rx_vm* vm = vm_of(self);
  const char* name = NULL;
  rx_tuple* in;
  rx_value out = {RX_NULL, 0, {0}};
  uint64_t previous;
  int f, status;
  (void)ret;
  (void)rc;
  if (str_arg(args, codes, n, 0, "invoke_stateful", &name) != 0 ||
      (f = find(vm, name, "invoke_stateful")) < 0)
    return -1;
  if (vm->inputs == NULL || vm->inputs[f].kind != RX_TUPLE) {
    return tvmrt_fail("InvalidArgumentError",
                      "No inputs set for stateful call of %.100s; use `set_input` first.", name);
  }
  if (enter(vm, &previous) != 0) return -1;
  in = (rx_tuple*)vm->inputs[f].v.obj;
  tvmrt_retain(&in->hdr);
  status = tvmrt_rx_call_value(vm, vm->func_pool[f].value, in->items, (int)in->size, &out);
  tvmrt_release(&in->hdr);
  leave(vm, previous);
  if (status != 0) return -1;
  tvmrt_rx_release(&vm->outputs[f]);
  vm->outputs[f] = out;
  return 0;
}

/* the saved output of `name`, indexed by args[1:] */
static int output_at(rx_vm* vm, TVMValue* args, int* codes, int n, const char* fn, rx_value* out) {
  const char* name = NULL;
  int f, i;
  rx_value v;
  if (str_arg(args, codes, n, 0, fn, &name) != 0 || (f = find(vm, name, fn)) < 0) return -1;
  if (vm->outputs == NULL || vm->outputs[f].kind == RX_NULL) {
    return tvmrt_fail("InvalidArgumentError",
                      "No output saved for call of \"%.100s\"; use `invoke_stateful` to call it "
                      "first.",
                      name);
  }
  v = vm->outputs[f];
  for (i = 1; i < n; ++i) {
    rx_tuple* t = tvmrt_rx_tuple(v);
    if (codes[i] != kDLInt)
      return tvmrt_fail("ArgumentTypeError", "%s: index %d must be an int", fn, i);
    if (t == NULL) {
      return tvmrt_fail("InvalidArgumentError",
                        "Attempted to index into an object that is not "
                        "an ADT.");
    }
    if (args[i].v_int64 < 0 || (uint64_t)args[i].v_int64 >= t->size) {
      return tvmrt_fail("IndexOutOfRangeError", "Invalid index (%lld >= %zu).",
                        (long long)args[i].v_int64, t->size);
    }
    v = t->items[args[i].v_int64];
  }
  *out = v;
  return 0;
}

static int f_get_output(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  rx_value v;
  if (output_at(vm_of(self), args, codes, n, "get_output", &v) != 0) return -1;
  if (v.kind == RX_TUPLE) {
    return tvmrt_fail("InvalidArgumentError",
                      "`get_output` cannot return a tuple for RPC compatibility. Please specify "
                      "another index argument.");
  }
  if (tvmrt_rx_is_object(v.kind)) tvmrt_retain(v.v.obj);
  to_return(v, ret, rc);
  return 0;
}

static int f_get_output_arity(void* self, TVMValue* args, int* codes, int n, TVMValue* ret,
                              int* rc) {
  rx_value v;
  if (output_at(vm_of(self), args, codes, n, "get_output_arity", &v) != 0) return -1;
  ret->v_int64 = v.kind == RX_TUPLE ? (int64_t)tvmrt_rx_tuple(v)->size : -1;
  *rc = kDLInt;
  return 0;
}

static int f_function_arity(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  rx_vm* vm = vm_of(self);
  const char* name = NULL;
  int f;
  if (str_arg(args, codes, n, 0, "get_function_arity", &name) != 0 ||
      (f = find(vm, name, "get_function_arity")) < 0)
    return -1;
  ret->v_int64 = (int64_t)vm->exe->funcs[f].num_params;
  *rc = kDLInt;
  return 0;
}

static int f_function_param_name(void* self, TVMValue* args, int* codes, int n, TVMValue* ret,
                                 int* rc) {
  rx_vm* vm = vm_of(self);
  const char* name = NULL;
  int f;
  const rx_func_info* info;
  if (str_arg(args, codes, n, 0, "get_function_param_name", &name) != 0 ||
      (f = find(vm, name, "get_function_param_name")) < 0)
    return -1;
  info = &vm->exe->funcs[f];
  if (n < 2 || codes[1] != kDLInt || args[1].v_int64 < 0 ||
      (uint64_t)args[1].v_int64 >= info->num_params) {
    return tvmrt_fail("InvalidArgumentError", "Invalid index for %.100s (%lld out of %zu)", name,
                      n > 1 ? (long long)args[1].v_int64 : -1LL, info->num_params);
  }
  ret->v_str = info->params[args[1].v_int64]; /* lives as long as the VM */
  *rc = kTVMStr;
  return 0;
}

static int f_save_function(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  rx_vm* vm = vm_of(self);
  const char *name = NULL, *saved = NULL;
  rx_value base, *in = NULL;
  rx_closure *c, *made;
  size_t i;
  int k;
  (void)ret;
  (void)rc;
  if (n < 3 || str_arg(args, codes, n, 0, "save_function", &name) != 0 ||
      str_arg(args, codes, n, 1, "save_function", &saved) != 0 || codes[2] != kDLInt) {
    return tvmrt_fail("ArgumentTypeError",
                      "save_function takes (func_name, saved_name, include_return, args...)");
  }
  if (!vm->initialized)
    return tvmrt_fail("InvalidArgumentError", "the Relax VM is not initialised");
  if (closure_of(vm, name, &base) != 0) {
    return tvmrt_fail("InvalidArgumentError", "save_function: Unknown function: %.200s", name);
  }
  if (tvmrt_rx_find_func(vm->exe, saved) >= 0) {
    return tvmrt_fail("InvalidArgumentError",
                      "save_function: '%.200s' is a function of the executable; a saved function "
                      "cannot replace it",
                      saved);
  }
  if (args_in(args, codes, 3, n, &in) != 0) return -1;
  for (k = 0; k < n - 3; ++k) { /* onto the VM's device, as TVM's ConvertArgToDevice */
    rx_value moved = {RX_NULL, 0, {0}};
    if (tvmrt_rx_to_device(vm, in[k], vm->devices[0], &moved) != 0) {
      args_free(in, n - 3);
      return -1;
    }
    tvmrt_rx_release(&in[k]);
    in[k] = moved;
  }
  c = (rx_closure*)base.v.obj;
  {
    size_t nb = c->nbound + (size_t)(n - 3);
    rx_value* bound = (rx_value*)malloc((nb ? nb : 1) * sizeof(rx_value));
    if (bound == NULL) {
      args_free(in, n - 3);
      return tvmrt_fail("DeviceOutOfMemoryError", "save_function: no memory");
    }
    memcpy(bound, in, (size_t)(n - 3) * sizeof(rx_value));
    memcpy(bound + (n - 3), c->bound, c->nbound * sizeof(rx_value));
    made = tvmrt_rx_closure_new(c->owner, c->func, c->packed, saved, bound, nb);
    free(bound);
  }
  args_free(in, n - 3);
  if (made == NULL) return -1;
  made->discard_return = args[2].v_int64 == 0;
  for (i = 0; i < vm->num_saved; ++i) {
    if (strcmp(vm->saved_names[i], saved) == 0) {
      tvmrt_rx_release(&vm->saved[i]);
      vm->saved[i] = tvmrt_rx_object(RX_CLOSURE, &made->hdr);
      return 0;
    }
  }
  {
    char** names = (char**)realloc(vm->saved_names, (vm->num_saved + 1) * sizeof(char*));
    rx_value* values;
    if (names != NULL) vm->saved_names = names;
    values = (rx_value*)realloc(vm->saved, (vm->num_saved + 1) * sizeof(rx_value));
    if (values != NULL) vm->saved = values;
    if (names == NULL || values == NULL || (names[vm->num_saved] = strdup(saved)) == NULL) {
      tvmrt_release(&made->hdr);
      return tvmrt_fail("DeviceOutOfMemoryError", "save_function: no memory");
    }
    values[vm->num_saved++] = tvmrt_rx_object(RX_CLOSURE, &made->hdr);
  }
  return 0;
}

static int f_set_instrument(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  rx_vm* vm = vm_of(self);
  tvmrt_func* f = NULL;
  (void)ret;
  (void)rc;
  if (__atomic_load_n(&vm->busy_thread, __ATOMIC_ACQUIRE) != 0) { /* it may be running */
    return tvmrt_fail("InvalidArgumentError",
                      "set_instrument while an invoke runs on this VM is refused (the "
                      "instrument in use would be released)");
  }
  if (n >= 1 && codes[0] == kTVMPackedFuncHandle) {
    f = tvmrt_func_check(args[0].v_handle);
    if (f == NULL) return -1;
    tvmrt_retain(&f->hdr);
  } else if (n >= 1 && codes[0] == kTVMStr) {
    tvmrt_func* factory = tvmrt_registry_find(args[0].v_str);
    if (factory == NULL) factory = tvmrt_registry_find_host(args[0].v_str);
    TVMValue rv;
    int rcode = kTVMNullptr, status;
    if (factory == NULL) {
      return tvmrt_fail("InvalidArgumentError", "Cannot find factory %.200s", args[0].v_str);
    }
    status = tvmrt_func_call(factory, args + 1, codes + 1, n - 1, &rv, &rcode);
    tvmrt_release(&factory->hdr);
    if (status != 0) return -1;
    if (rcode != kTVMPackedFuncHandle || (f = tvmrt_func_check(rv.v_handle)) == NULL) {
      return tvmrt_fail("ArgumentTypeError",
                        "set_instrument: the factory %.200s returned no "
                        "function",
                        args[0].v_str);
    }
  } else if (n >= 1 && codes[0] != kTVMNullptr) {
    return tvmrt_fail("ArgumentTypeError", "set_instrument takes a function or a factory's name");
  }
  if (vm->instrument != NULL) tvmrt_release(&vm->instrument->hdr);
  vm->instrument = f;
  return 0;
}

static int f_set_limits(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  rx_vm* vm = vm_of(self);
  int i;
  (void)ret;
  (void)rc;
  if (n != 4) {
    return tvmrt_fail("InvalidArgumentError",
                      "set_limits takes (max_steps, max_frames, max_live_bytes, "
                      "max_storage_bytes)");
  }
  for (i = 0; i < 4; ++i) {
    if (codes[i] != kDLInt) return tvmrt_fail("ArgumentTypeError", "set_limits: ints only");
  }
  if (vm->num_devices > 0) {
    return tvmrt_fail("InvalidArgumentError", "set_limits must come before vm_initialization");
  }
  vm->limits.max_steps = args[0].v_int64;
  vm->limits.max_frames = args[1].v_int64 > 0 ? args[1].v_int64 : vm->limits.max_frames;
  vm->limits.max_live = args[2].v_int64;
  vm->limits.max_storage = args[3].v_int64;
  return 0;
}

/* ---------------------------------------------------------------------------------- */
/* profile: the time of every call, as TVM's VirtualMachineProfiler reports it         */

typedef struct {
  char name[128];
  double us;
  char shapes[256];
} prof_call;

typedef struct {
  tvmrt_object hdr;
  prof_call* calls;
  size_t n, cap;
  struct timespec start;
  int64_t pending; /* the callee of the call being timed (-1: none) */
  DLDevice dev;    /* the VM's device: synchronized around each call when not the CPU, so a
                      call's time holds its kernels' device work, as TVM's timer's does */
} profiler;

static int profiler_sync(const profiler* p) {
  return p->dev.device_type == kDLCPU ? 0
                                      : TVMSynchronize(p->dev.device_type, p->dev.device_id, NULL);
}

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static void shapes_of(TVMValue* args, int* codes, int n, char* out, size_t size) {
  size_t used = 0;
  int i, d;
  out[0] = '\0';
  for (i = 4; i < n && used + 16 < size; ++i) {
    const DLTensor* t;
    if (codes[i] != kTVMNDArrayHandle && codes[i] != kTVMDLTensorHandle) continue;
    t = (const DLTensor*)args[i].v_handle;
    used += (size_t)snprintf(out + used, size - used, "%s", used ? ", " : "");
    used += (size_t)snprintf(out + used, size - used, "float32[");
    if (t->dtype.code != kDLFloat || t->dtype.bits != 32) {
      static const char* const names[] = {"int", "uint", "float", "handle", "bfloat", "", "bool"};
      used -= strlen("float32[");
      used += (size_t)snprintf(out + used, size - used, "%s%u[",
                               t->dtype.code < 7 ? names[t->dtype.code] : "?", t->dtype.bits);
    }
    for (d = 0; d < t->ndim && used + 8 < size; ++d)
      used += (size_t)snprintf(out + used, size - used, "%s%lld", d ? ", " : "",
                               (long long)t->shape[d]);
    used += (size_t)snprintf(out + used, size - used, "]");
    if (used >= size) {
      out[size - 1] = '\0';
      return;
    }
  }
}

/* the instrument the profiler installs: (func, name, before, ret, args...) */
static int f_profile_hook(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  profiler* p = (profiler*)self;
  (void)ret;
  if (n < 4 || codes[1] != kTVMStr) return tvmrt_fail("InternalError", "profile hook arguments");
  *rc = kDLInt;
  ret->v_int64 = 0;
  if (profiler_sync(p) != 0) return -1; /* work queued before the call is not its time */
  if (args[2].v_int64) {
    clock_gettime(CLOCK_MONOTONIC, &p->start);
    return 0;
  }
  {
    struct timespec end;
    prof_call* c;
    double us;
    clock_gettime(CLOCK_MONOTONIC, &end);
    us = (double)(end.tv_sec - p->start.tv_sec) * 1e6 +
         (double)(end.tv_nsec - p->start.tv_nsec) / 1e3;
    if (p->n == p->cap) {
      size_t cap = p->cap ? p->cap * 2 : 64;
      prof_call* grown = (prof_call*)realloc(p->calls, cap * sizeof(prof_call));
      if (grown == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "profile: no memory");
      p->calls = grown;
      p->cap = cap;
    }
    c = &p->calls[p->n++];
    snprintf(c->name, sizeof(c->name), "%s", args[1].v_str);
    c->us = us;
    shapes_of(args, codes, n, c->shapes, sizeof(c->shapes));
  }
  return 0;
}

static void profiler_destroy(tvmrt_object* obj) {
  profiler* p = (profiler*)obj;
  free(p->calls);
  obj->magic = 0;
  free(p);
}

static void json_str(FILE* f, const char* s) {
  fputc('"', f);
  for (; *s; ++s) {
    if (*s == '"' || *s == '\\') fputc('\\', f);
    if ((unsigned char)*s < 0x20) fprintf(f, "\\u%04x", *s);
    else fputc(*s, f);
  }
  fputc('"', f);
}

/* profile(name, args...): a warm-up invoke, then one timed with every call recorded; the
   report is TVM's Report JSON (calls, device_metrics, configuration) */
static int f_profile(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  rx_vm* vm = vm_of(self);
  const char* name = NULL;
  rx_value callee, *in = NULL, out = {RX_NULL, 0, {0}};
  profiler* p;
  tvmrt_func *hook, *saved = NULL;
  int status, use_inputs, f, count;
  uint64_t previous;
  double total;
  char* text = NULL;
  size_t text_len = 0;
  FILE* json;
  if (str_arg(args, codes, n, 0, "profile", &name) != 0 || (f = find(vm, name, "profile")) < 0)
    return -1;
  if (closure_of(vm, name, &callee) != 0) {
    return tvmrt_fail("InvalidArgumentError", "profile: %.200s is not a VM function", name);
  }
  use_inputs = n == 1;
  if (use_inputs && (vm->inputs == NULL || vm->inputs[f].kind != RX_TUPLE)) {
    return tvmrt_fail("InvalidArgumentError", "No input is provided");
  }
  if (!use_inputs && args_in(args, codes, 1, n, &in) != 0) return -1;
  count = use_inputs ? (int)tvmrt_rx_tuple(vm->inputs[f])->size : n - 1;
  if (use_inputs) in = tvmrt_rx_tuple(vm->inputs[f])->items;
  p = (profiler*)calloc(1, sizeof(profiler));
  if (p == NULL || tvmrt_object_init(&p->hdr, RT_MAGIC_RX_PROFILER, profiler_destroy) != 0) {
    free(p);
    if (!use_inputs) args_free(in, count);
    return tvmrt_fail("DeviceOutOfMemoryError", "profile: no memory");
  }
  p->dev = vm->devices[0];
  hook = tvmrt_func_new(f_profile_hook, p, &p->hdr);
  tvmrt_release(&p->hdr);
  if (hook == NULL || enter(vm, &previous) != 0) {
    if (hook != NULL) tvmrt_release(&hook->hdr);
    if (!use_inputs) args_free(in, count);
    return -1;
  }
  status = tvmrt_rx_call_value(vm, callee, in, count, &out); /* warm-up */
  tvmrt_rx_release(&out);
  saved = vm->instrument;
  vm->instrument = hook;
  if (status == 0) status = profiler_sync(p);
  total = now_us();
  if (status == 0) status = tvmrt_rx_call_value(vm, callee, in, count, &out);
  if (status == 0) status = profiler_sync(p);
  total = now_us() - total;
  vm->instrument = saved;
  tvmrt_rx_release(&out);
  leave(vm, previous);
  if (!use_inputs) args_free(in, count);
  if (status != 0) {
    tvmrt_release(&hook->hdr);
    return -1;
  }
  json = open_memstream(&text, &text_len);
  if (json == NULL) {
    tvmrt_release(&hook->hdr);
    return tvmrt_fail("DeviceOutOfMemoryError", "profile: no memory");
  }
  {
    size_t i;
    const tvmrt_device_backend* backend = tvmrt_device_backend_of(vm->devices[0].device_type);
    const char* dev = backend != NULL ? backend->name : "cpu";
    fprintf(json, "{\"calls\": [");
    for (i = 0; i < p->n; ++i) {
      fprintf(json, "%s{\"Name\": {\"string\": ", i ? ", " : "");
      json_str(json, p->calls[i].name);
      fprintf(json,
              "}, \"Duration (us)\": {\"microseconds\": %.3f}, \"Count\": {\"count\": 1}, "
              "\"Device\": {\"string\": \"%s%d\"}, \"Argument Shapes\": {\"string\": ",
              p->calls[i].us, dev, vm->devices[0].device_id);
      json_str(json, p->calls[i].shapes);
      fprintf(json, "}}");
    }
    fprintf(json,
            "], \"device_metrics\": {\"%s%d\": {\"Name\": {\"string\": \"%s%d\"}, "
            "\"Duration (us)\": {\"microseconds\": %.3f}}}, \"configuration\": {\"Executor\": "
            "{\"string\": \"VM\"}, \"Number of threads\": {\"count\": %d}}}",
            dev, vm->devices[0].device_id, dev, vm->devices[0].device_id, total,
            tvmrt_get_num_threads());
  }
  fclose(json);
  tvmrt_release(&hook->hdr);
  {
    rx_str* s = tvmrt_rx_str_new(text, text_len);
    free(text);
    if (s == NULL) return -1;
    ret->v_handle = &s->hdr;
    *rc = kTVMObjectHandle;
  }
  return 0;
}

/* ---------------------------------------------------------------------------------- */
/* the module                                                                          */

static const struct {
  const char* name;
  tvmrt_fn fn;
} k_functions[] = {
    {"vm_initialization", f_init},
    {"invoke_closure", f_invoke_closure},
    {"set_input", f_set_input},
    {"set_input_with_param_module", f_set_input_params},
    {"invoke_stateful", f_invoke_stateful},
    {"get_output", f_get_output},
    {"get_output_arity", f_get_output_arity},
    {"get_function_arity", f_function_arity},
    {"get_function_param_name", f_function_param_name},
    {"save_function", f_save_function},
    {"set_instrument", f_set_instrument},
    {"set_limits", f_set_limits},
    {"profile", f_profile},
};

static tvmrt_func* vm_lookup(tvmrt_module* self, const char* name) {
  rx_vm* vm = (rx_vm*)self->impl;
  rx_value callee;
  entry* e;
  tvmrt_func* f;
  size_t i;
  for (i = 0; i < sizeof(k_functions) / sizeof(k_functions[0]); ++i) {
    if (strcmp(k_functions[i].name, name) == 0)
      return tvmrt_func_new(k_functions[i].fn, vm, &self->hdr);
  }
  if (!vm->initialized || closure_of(vm, name, &callee) != 0) return NULL;
  e = (entry*)calloc(1, sizeof(entry));
  if (e == NULL || tvmrt_object_init(&e->hdr, RT_MAGIC_RX_ENTRY, entry_destroy) != 0) {
    free(e);
    return NULL;
  }
  e->mod = self;
  tvmrt_retain(&self->hdr);
  tvmrt_rx_copy(&e->callee, callee);
  f = tvmrt_func_new(f_entry, e, &e->hdr);
  tvmrt_release(&e->hdr);
  return f;
}

static void vm_finalize(tvmrt_module* self) {
  rx_vm* vm = (rx_vm*)self->impl;
  release_state(vm);
  if (vm->instrument != NULL) tvmrt_release(&vm->instrument->hdr);
  tvmrt_release(&vm->exec->hdr);
  free(vm);
}

tvmrt_module* tvmrt_rx_machine_new(tvmrt_module* exec_mod, const rx_exe* exe) {
  rx_vm* vm = (rx_vm*)calloc(1, sizeof(rx_vm));
  tvmrt_module* mod;
  if (vm == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate a Relax VM");
    return NULL;
  }
  mod = tvmrt_module_new("relax.VirtualMachine", vm);
  if (mod == NULL) {
    free(vm);
    return NULL;
  }
  vm->id = __atomic_fetch_add(&g_next_vm_id, 1, __ATOMIC_RELAXED);
  vm->mod = mod;
  vm->exec = exec_mod;
  tvmrt_retain(&exec_mod->hdr);
  vm->exe = exe;
  tvmrt_rx_limits_from_env(&vm->limits);
  mod->lookup = vm_lookup;
  mod->finalize = vm_finalize;
  return mod;
}
