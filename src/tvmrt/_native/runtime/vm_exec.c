/*
 * The `VMExecutable` module (TVM's runtime::vm::Executable, src/runtime/vm/executable.cc):
 * a checked, decoded code.ro whose first import is the kernel library. Its functions:
 *   vm_load_executable()                    -> a new VirtualMachine module (vm_machine.c)
 *   get_lib()                               -> the kernel library
 *   get_function_arity(name)                -> the parameter count, or -1
 *   get_function_param_name(name, index)    -> a parameter's name
 *   load_late_bound_consts(path)            the late-bound constants from a params file
 * Where it comes from: the `VMExecutable` entry of vm.so's module blob (the blob loader here),
 * or code.ro's bytes and a library through the global runtime.Load_Executable
 * (Executable::Load). The VM's other globals: runtime.Tuple / runtime.ADT (tag, fields...)
 * make an ADT, runtime.GetADTSize / GetADTTag / GetADTFields(adt, index) read one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vm.h"

static void exec_finalize(tvmrt_module* mod) {
  vm_exe* exe = (vm_exe*)mod->impl;
  tvmrt_vm_exe_free(exe);
  free(exe);
}

static int func_arg(vm_exe* exe, TVMValue* args, int* codes, int n, const char* fn, int* k) {
  if (n < 1 || codes[0] != kTVMStr)
    return tvmrt_fail("ArgumentTypeError", "%s takes a function name", fn);
  *k = tvmrt_vm_find_func(exe, args[0].v_str);
  return 0;
}

static int f_load_vm(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  tvmrt_module* mod = (tvmrt_module*)self;
  tvmrt_module* vm = tvmrt_vm_machine_new(mod, (vm_exe*)mod->impl);
  if (vm == NULL) return -1;
  ret->v_handle = vm;
  *rc = kTVMModuleHandle;
  return 0;
}

static int f_get_lib(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  tvmrt_module* mod = (tvmrt_module*)self;
  if (mod->num_imports == 0)
    return tvmrt_fail("ModuleLoadError", "the executable has no kernel library");
  tvmrt_retain(&mod->imports[0]->hdr);
  ret->v_handle = mod->imports[0];
  *rc = kTVMModuleHandle;
  return 0;
}

static int f_arity(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  vm_exe* exe = (vm_exe*)((tvmrt_module*)self)->impl;
  int k = -1;
  if (func_arg(exe, args, codes, n, "get_function_arity", &k) != 0) return -1;
  ret->v_int64 = k < 0 ? -1 : (int64_t)exe->funcs[k].num_params;
  *rc = kDLInt;
  return 0;
}

static int f_param_name(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  vm_exe* exe = (vm_exe*)((tvmrt_module*)self)->impl;
  int k = -1;
  if (func_arg(exe, args, codes, n, "get_function_param_name", &k) != 0) return -1;
  if (k < 0)
    return tvmrt_fail("InputNotFoundError", "the executable has no function '%.100s'",
                      args[0].v_str);
  if (n != 2 || codes[1] != kDLInt || args[1].v_int64 < 0 ||
      (uint64_t)args[1].v_int64 >= exe->funcs[k].num_params) {
    return tvmrt_fail("InvalidArgumentError",
                      "function '%.100s' has %zu params; expected an index below it", args[0].v_str,
                      exe->funcs[k].num_params);
  }
  ret->v_str = exe->funcs[k].params[args[1].v_int64];
  *rc = kTVMStr;
  return 0;
}

static int f_load_late(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  vm_exe* exe = (vm_exe*)((tvmrt_module*)self)->impl;
  size_t size;
  char* data = NULL;
  tvmrt_params p;
  size_t k, i, matched = 0, wanted = 0;
  int result = -1;
  memset(&p, 0, sizeof(p));
  if (n != 1 || codes[0] != kTVMStr)
    return tvmrt_fail("ArgumentTypeError", "load_late_bound_consts takes a path");
  if (tvmrt_read_regular(args[0].v_str, "ModuleLoadError", "late-bound constants file",
                         RT_MAX_PARAMS_BYTES, &tvmrt_params_file_magic, &data, &size) != 0) {
    return -1;
  }
  if (tvmrt_params_parse((const uint8_t*)data, size, RT_PARAMS_COPY, &p) != 0) goto done;
  for (k = 0; k < exe->num_consts; ++k) {
    if (exe->const_names[k] == NULL || exe->consts[k] != NULL) continue;
    ++wanted;
    for (i = 0; i < p.count; ++i) {
      if (strcmp(p.names[i], exe->const_names[k]) == 0) break;
    }
    if (i == p.count) {
      tvmrt_fail("ParamsFormatError",
                 "late-bound constants do not match the executable: %.64s is missing",
                 exe->const_names[k]);
      goto done;
    }
  }
  if (wanted != p.count) {
    tvmrt_fail("ParamsFormatError",
               "late-bound constants do not match the executable: %zu given for %zu", p.count,
               wanted);
    goto done;
  }
  for (k = 0; k < exe->num_consts; ++k) {
    if (exe->const_names[k] == NULL || exe->consts[k] != NULL) continue;
    for (i = 0; i < p.count; ++i) {
      if (strcmp(p.names[i], exe->const_names[k]) == 0) break;
    }
    exe->consts[k] = p.arrays[i];
    tvmrt_retain(&p.arrays[i]->hdr);
    ++matched;
  }
  result = matched == wanted ? 0 : -1;
done:
  tvmrt_params_free(&p);
  free(data);
  return result;
}

static const struct {
  const char* name;
  tvmrt_fn fn;
} k_funcs[] = {
    {"vm_load_executable", f_load_vm},       {"get_lib", f_get_lib},
    {"get_function_arity", f_arity},         {"get_function_param_name", f_param_name},
    {"load_late_bound_consts", f_load_late},
};

static tvmrt_func* exec_lookup(tvmrt_module* mod, const char* name) {
  size_t i;
  for (i = 0; i < sizeof(k_funcs) / sizeof(k_funcs[0]); ++i) {
    if (strcmp(k_funcs[i].name, name) == 0) return tvmrt_func_new(k_funcs[i].fn, mod, &mod->hdr);
  }
  return NULL;
}

/* a VMExecutable module over code.ro's bytes (no library yet) */
static tvmrt_module* exec_new(const uint8_t* data, size_t size, const char* what) {
  vm_exe* exe = (vm_exe*)calloc(1, sizeof(vm_exe));
  tvmrt_module* mod;
  if (exe == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate an executable");
    return NULL;
  }
  if (tvmrt_vm_read(data, size, what, 1, exe) != 0) {
    free(exe);
    return NULL;
  }
  if (tvmrt_vm_decode(exe, what) != 0) {
    tvmrt_vm_exe_free(exe);
    free(exe);
    return NULL;
  }
  mod = tvmrt_module_new("VMExecutable", exe);
  if (mod == NULL) {
    tvmrt_vm_exe_free(exe);
    free(exe);
    return NULL;
  }
  mod->lookup = exec_lookup;
  mod->finalize = exec_finalize;
  return mod;
}

tvmrt_module* tvmrt_vm_exec_load_blob(tvmrt_reader* r) {
  uint64_t n;
  if (tvmrt_read_count(r, &n, 1, "VMExecutable payload") != 0) return NULL;
  r->off += (size_t)n;
  return exec_new(r->data + r->off - (size_t)n, (size_t)n, "module blob: VMExecutable");
}

/* ---------------------------------------------------------------------------------- */
/* globals                                                                             */

static int g_load_executable(void* self, TVMValue* args, int* codes, int n, TVMValue* ret,
                             int* rc) {
  const uint8_t* data;
  size_t size;
  tvmrt_module *lib, *exe;
  if (n != 2 || (codes[0] != kTVMBytes && codes[0] != kTVMStr) || codes[1] != kTVMModuleHandle) {
    return tvmrt_fail("ArgumentTypeError",
                      "runtime.Load_Executable takes (code bytes, lib module)");
  }
  if ((lib = tvmrt_module_check(args[1].v_handle)) == NULL) return -1;
  if (codes[0] == kTVMBytes) {
    const TVMByteArray* b = (const TVMByteArray*)args[0].v_handle;
    if (b == NULL) return tvmrt_fail("ArgumentTypeError", "runtime.Load_Executable: null bytes");
    data = (const uint8_t*)b->data;
    size = b->size;
  } else {
    data = (const uint8_t*)args[0].v_str;
    size = strlen(args[0].v_str);
  }
  exe = exec_new(data, size, "Relay VM executable");
  if (exe == NULL) return -1;
  if (tvmrt_module_import(exe, lib) != 0) {
    tvmrt_release(&exe->hdr);
    return -1;
  }
  ret->v_handle = exe;
  *rc = kTVMModuleHandle;
  return 0;
}

static int g_adt(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  /* runtime.ADT: (tag, fields...); runtime.Tuple: (fields...). A field is an NDArray, an ADT
     or a host DLTensor, which is copied (the ADT outlives the call; TVM copies a tensor it
     did not make) */
  int first = self != NULL, i, made = 0;
  tvmrt_object* fields[256] = {NULL};
  tvmrt_object* copies[256];
  vm_adt* t;
  if ((first && (n < 1 || codes[0] != kDLInt)) || n - first > 256) {
    return tvmrt_fail("ArgumentTypeError",
                      "runtime.ADT takes (tag, fields...), at most 256 fields");
  }
  for (i = first; i < n; ++i) {
    tvmrt_ndarray* a = NULL;
    if (codes[i] == kTVMNDArrayHandle) {
      if ((a = tvmrt_ndarray_from_handle(args[i].v_handle)) == NULL) break;
    } else if (codes[i] == kTVMDLTensorHandle && args[i].v_handle != NULL) {
      if ((a = tvmrt_vm_host_tensor((const DLTensor*)args[i].v_handle, i - first, 0)) == NULL)
        break;
      copies[made++] = &a->hdr;
    } else if (codes[i] == kTVMObjectHandle && tvmrt_vm_adt_check(args[i].v_handle) != NULL) {
      fields[i - first] = (tvmrt_object*)args[i].v_handle;
      continue;
    } else {
      tvmrt_fail("ArgumentTypeError",
                 "an ADT field must be an NDArray, a DLTensor or an ADT, got type code %d",
                 codes[i]);
      break;
    }
    fields[i - first] = &a->hdr;
  }
  t = i == n ? tvmrt_vm_adt_new(NULL, first ? (int32_t)args[0].v_int64 : 0, fields,
                                (size_t)(n - first))
             : NULL;
  while (made > 0) tvmrt_release(copies[--made]); /* the ADT holds its own references */
  if (t == NULL) return -1;
  ret->v_handle = t;
  *rc = kTVMObjectHandle;
  return 0;
}

static int g_adt_read(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  const char* which = (const char*)self;
  vm_adt* t = n >= 1 && codes[0] == kTVMObjectHandle ? tvmrt_vm_adt_check(args[0].v_handle) : NULL;
  tvmrt_object* f;
  if (t == NULL) return tvmrt_fail("ArgumentTypeError", "runtime.%s takes an ADT", which);
  if (strcmp(which, "GetADTSize") == 0 || strcmp(which, "GetADTTag") == 0) {
    ret->v_int64 = which[6] == 'S' ? (int64_t)t->size : t->tag;
    *rc = kDLInt;
    return 0;
  }
  if (n != 2 || codes[1] != kDLInt || args[1].v_int64 < 0 || (uint64_t)args[1].v_int64 >= t->size) {
    return tvmrt_fail("ArrayError", "runtime.GetADTFields: the ADT has %zu fields", t->size);
  }
  f = t->fields[args[1].v_int64];
  if (f == NULL || (f->magic != RT_MAGIC_ARRAY && f->magic != RT_MAGIC_ADT)) {
    return tvmrt_fail("ArgumentTypeError",
                      "runtime.GetADTFields: field %lld holds %s, expected a tensor or an ADT",
                      (long long)args[1].v_int64, tvmrt_vm_kind(f));
  }
  tvmrt_retain(f);
  if (f->magic == RT_MAGIC_ARRAY) {
    ret->v_handle = &tvmrt_vm_as_array(f)->dl;
    *rc = kTVMNDArrayHandle;
  } else {
    ret->v_handle = f;
    *rc = kTVMObjectHandle;
  }
  return 0;
}

static const char* const k_global_names[] = {"runtime.Load_Executable", "runtime.ADT",
                                             "runtime.Tuple",           "runtime.GetADTSize",
                                             "runtime.GetADTTag",       "runtime.GetADTFields"};

const char* const* tvmrt_vm_global_names(size_t* n) {
  *n = sizeof(k_global_names) / sizeof(k_global_names[0]);
  return k_global_names;
}

tvmrt_func* tvmrt_vm_global(const char* name) {
  static char adt_tag[] = "ADT";
  if (strcmp(name, "runtime.Load_Executable") == 0)
    return tvmrt_func_new(g_load_executable, NULL, NULL);
  if (strcmp(name, "runtime.ADT") == 0) return tvmrt_func_new(g_adt, adt_tag, NULL);
  if (strcmp(name, "runtime.Tuple") == 0) return tvmrt_func_new(g_adt, NULL, NULL);
  if (strcmp(name, "runtime.GetADTSize") == 0)
    return tvmrt_func_new(g_adt_read, (void*)"GetADTSize", NULL);
  if (strcmp(name, "runtime.GetADTTag") == 0)
    return tvmrt_func_new(g_adt_read, (void*)"GetADTTag", NULL);
  if (strcmp(name, "runtime.GetADTFields") == 0)
    return tvmrt_func_new(g_adt_read, (void*)"GetADTFields", NULL);
  return NULL;
}
