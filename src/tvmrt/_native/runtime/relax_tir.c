/*
 * Compiled mode (exec_mode="compiled"): a vm_tir function is the library's
 * `__vmtir__<name>(ctx, registers, constants, functions)`, code that TVM generated from the
 * bytecode. It keeps the VM's registers in an any-list, moves values in and out with the
 * TVMBackendAnyList* functions, looks the builtins up by name in its library's environment
 * and calls them as packed functions (TVM's VirtualMachineImpl::GetClosureInternal).
 *
 * Two ABIs: TVM <= 0.20 (legacy: an item is a TVMValue and its type code, the runtime's
 * object_types.c helpers) and tvm-ffi (an item is a TVMFFIAny; these helpers). In a tvm-ffi
 * list a tensor is a DLTensor* of one of the runtime's arrays (type index 7, which kernels
 * take) and any other VM value an opaque pointer to its object (4): packed calls of the
 * builtins (func_env.c) give both back as the same objects, so identity survives the trip.
 * An item holding an object owns a reference and says so in its padding (FFI_OWNED: only
 * the runtime writes these lists, and a borrowed opaque pointer, an argument's, has none),
 * so emptying it, or passing it to a builtin, needs no lookup. The registers are released when the
 * call returns; the constant and function lists are made once per VM (vm->tir_consts, tir_funcs).
 *
 * The builtins reach generated code as global packed functions (tvmrt_rx_builtin_global),
 * run for the VM whose compiled function is running on this thread. What the library's
 * environment lookup hands generated code is the builtin's own table entry, registered as a
 * closure block (func_env.c): its calls reach the builtin directly, and a tvm-ffi call's
 * arguments are read as they are (builtin_ffi), the marked items borrowed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relax.h"

static _Thread_local rx_vm* t_vm; /* the VM whose compiled function runs on this thread */

/* ---------------------------------------------------------------------------------- */
/* items                                                                               */

enum { FFI_NONE = 0, FFI_INT = 1, FFI_BOOL = 2, FFI_FLOAT = 3, FFI_PTR = 4, FFI_DTYPE = 5 };
enum { FFI_TENSOR = 7 };
#define FFI_OWNED TVMRT_FFI_OWNED /* an item's zero_padding when it holds a reference */

/* a VM value into a legacy item (a new reference: strings as string objects) */
static void legacy_item(rx_value v, tvmrt_any_item* it) {
  tvmrt_object* temp = NULL;
  memset(it, 0, sizeof(*it));
  if (tvmrt_rx_is_object(v.kind)) tvmrt_retain(v.v.obj);
  if (v.kind == RX_STR) {
    it->value.v_handle = v.v.obj;
    it->code = kTVMObjectHandle;
    return;
  }
  tvmrt_rx_to_packed(v, RX_ERA_LEGACY, &it->value, &it->code, &temp);
}

/* a VM value into a tvm-ffi item, v's reference moving into it (v is emptied) */
static void ffi_item_move(rx_value* v, TVMFFIAny* it) {
  memset(it, 0, sizeof(*it));
  switch (v->kind) {
    case RX_NULL: it->type_index = FFI_NONE; return;
    case RX_INT: it->type_index = FFI_INT, it->v_int64 = v->v.i; return;
    case RX_BOOL: it->type_index = FFI_BOOL, it->v_int64 = v->v.i; return;
    case RX_FLOAT: it->type_index = FFI_FLOAT, memcpy(&it->v_int64, &v->v.f, 8); return;
    case RX_DTYPE:
      it->type_index = FFI_DTYPE, memcpy(&it->v_int64, &v->v.t, sizeof(v->v.t));
      return;
    case RX_HANDLE: it->type_index = FFI_PTR, it->v_int64 = (int64_t)(intptr_t)v->v.p; return;
    case RX_TENSOR:
      it->type_index = FFI_TENSOR;
      it->zero_padding = FFI_OWNED;
      it->v_int64 = (int64_t)(intptr_t)&tvmrt_rx_tensor(*v)->dl;
      break;
    default:
      it->type_index = FFI_PTR;
      it->zero_padding = FFI_OWNED;
      it->v_int64 = (int64_t)(intptr_t)v->v.obj;
      break;
  }
  v->kind = RX_NULL; /* the reference is the item's now */
  v->v.obj = NULL;
}

/* a VM value into a tvm-ffi item (a new reference) */
static void ffi_item(rx_value v, TVMFFIAny* it) {
  if (tvmrt_rx_is_object(v.kind)) tvmrt_retain(v.v.obj);
  ffi_item_move(&v, it);
}

/* the object a tvm-ffi item owns, or NULL */
static tvmrt_object* ffi_owned(const TVMFFIAny* it) {
  void* p = (void*)(intptr_t)it->v_int64;
  if (it->zero_padding != FFI_OWNED) return NULL;
  if (it->type_index == FFI_TENSOR) return &((tvmrt_ndarray*)p)->hdr;
  return it->type_index == FFI_PTR ? (tvmrt_object*)p : NULL;
}

static void ffi_clear(TVMFFIAny* it) {
  tvmrt_release(ffi_owned(it));
  memset(it, 0, sizeof(*it));
}

/* an item as a VM value, its reference taken (the item is emptied) */
static int take_legacy(tvmrt_any_item* it, rx_value* out) {
  int rc;
  if (it->code == kTVMStr || it->code == kTVMBytes) {
    rc = tvmrt_rx_from_packed(it->value, it->code, 0, out);
    tvmrt_any_item_clear(it);
    return rc;
  }
  rc = tvmrt_rx_from_packed(it->value, it->code, 1, out);
  if (rc == 0) {
    it->code = kTVMNullptr;
    it->value.v_handle = NULL;
  }
  return rc;
}

static int take_ffi(TVMFFIAny* it, rx_value* out) {
  TVMValue v;
  int code;
  memcpy(&v, &it->v_int64, sizeof(v));
  switch (it->type_index) {
    case FFI_NONE: code = kTVMNullptr; break;
    case FFI_INT: code = kDLInt; break;
    case FFI_BOOL: code = kTVMArgBool; break;
    case FFI_FLOAT: code = kDLFloat; break;
    case FFI_DTYPE: code = kTVMDataType; break;
    case FFI_TENSOR: code = kTVMDLTensorHandle; break;
    case FFI_PTR: code = kTVMOpaqueHandle; break;
    default:
      return tvmrt_fail("ArgumentTypeError",
                        "a compiled Relax function left a value of tvm-ffi type index %d in a "
                        "register; tvmrt's any-lists hold numbers, tensors and its own objects",
                        (int)it->type_index);
  }
  if (tvmrt_rx_from_packed(v, code, 0, out) != 0) return -1; /* a reference of its own */
  ffi_clear(it);
  return 0;
}

/* ---------------------------------------------------------------------------------- */
/* the tvm-ffi any-list functions (ffi_lib.c links a library's imports of them here)   */

static int ffi_index(void* list, int index, const char* fn) {
  if (list == NULL || index < 0) {
    tvmrt_ffi_error_set_raised_from_cstr("ValueError", fn);
    return -1;
  }
  return 0;
}

TVM_DLL int tvmrt_rx_anylist_set_packed_arg(void* list, int index, TVMFFIAny* args,
                                            int arg_offset) {
  if (ffi_index(list, index, "TVMBackendAnyListSetPackedArg: no list or a negative index") ||
      args == NULL || arg_offset < 0)
    return -1;
  args[arg_offset] = ((TVMFFIAny*)list)[index]; /* borrowed: the item keeps it */
  return 0;
}

TVM_DLL int tvmrt_rx_anylist_reset_item(void* list, int index) {
  if (ffi_index(list, index, "TVMBackendAnyListResetItem: no list or a negative index")) return -1;
  ffi_clear((TVMFFIAny*)list + index);
  return 0;
}

TVM_DLL int tvmrt_rx_anylist_move_from_return(void* list, int index, TVMFFIAny* args,
                                              int ret_offset) {
  TVMFFIAny* it;
  if (ffi_index(list, index,
                "TVMBackendAnyListMoveFromPackedReturn: no list or a negative index") ||
      args == NULL || ret_offset < 0)
    return -1;
  it = (TVMFFIAny*)list + index;
  ffi_clear(it);
  *it = args[ret_offset]; /* the return's reference moves into the item */
  if (it->type_index == FFI_TENSOR || it->type_index == FFI_PTR) it->zero_padding = FFI_OWNED;
  return 0;
}

/* ---------------------------------------------------------------------------------- */
/* a compiled function as the VM's closure                                             */

typedef struct {
  tvmrt_object hdr;
  rx_vm* vm; /* not a reference: the VM owns this function */
  int64_t func;
  tvmrt_func* vmtir;
} tir_fn;

enum { RT_MAGIC_RX_TIR = 0x52544931 };

static void tir_destroy(tvmrt_object* obj) {
  tir_fn* t = (tir_fn*)obj;
  tvmrt_release(&t->vmtir->hdr);
  obj->magic = 0;
  free(t);
}

/* an any-list of n VM values (new references), or NULL with an error */
static void* make_list(const rx_value* values, size_t stride, size_t n, int ffi) {
  void* list = calloc(n + 1, ffi ? sizeof(TVMFFIAny) : sizeof(tvmrt_any_item));
  size_t k;
  if (list == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate a compiled function's any-list");
    return NULL;
  }
  for (k = 0; k < n; ++k) {
    const rx_value* v = (const rx_value*)((const char*)values + k * stride);
    if (ffi) ffi_item(*v, (TVMFFIAny*)list + k);
    else legacy_item(*v, (tvmrt_any_item*)list + k);
  }
  return list;
}

static void free_list(void* list, size_t n, int ffi) {
  size_t k;
  for (k = 0; list != NULL && k < n; ++k) {
    if (ffi) ffi_clear((TVMFFIAny*)list + k);
    else tvmrt_any_item_clear((tvmrt_any_item*)list + k);
  }
  free(list);
}

void tvmrt_rx_tir_free_pools(rx_vm* vm) {
  int ffi = vm->exe->era != RX_ERA_LEGACY;
  free_list(vm->tir_consts, vm->exe->num_consts, ffi);
  free_list(vm->tir_funcs, vm->exe->num_funcs, ffi);
  vm->tir_consts = vm->tir_funcs = NULL;
}

/* vm's constants and function pool as any-lists (once: generated code only reads them) */
static int tir_pools(rx_vm* vm, int ffi) {
  if (vm->tir_consts != NULL && vm->tir_funcs != NULL) return 0;
  tvmrt_rx_tir_free_pools(vm);
  vm->tir_consts = make_list(vm->consts, sizeof(rx_value), vm->exe->num_consts, ffi);
  vm->tir_funcs = vm->tir_consts == NULL ? NULL
                                         : make_list(&vm->func_pool[0].value, sizeof(rx_pool_entry),
                                                     vm->exe->num_funcs, ffi);
  if (vm->tir_funcs == NULL) {
    tvmrt_rx_tir_free_pools(vm);
    return -1;
  }
  return 0;
}

static int tir_call(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  tir_fn* t = (tir_fn*)self;
  rx_vm* vm = t->vm;
  const rx_func_info* info = &vm->exe->funcs[t->func];
  int ffi = vm->exe->era != RX_ERA_LEGACY, i, status = -1;
  size_t item = ffi ? sizeof(TVMFFIAny) : sizeof(tvmrt_any_item);
  void* regs = NULL;
  rx_vm* saved = t_vm;
  TVMValue call[4], rv;
  int call_codes[4] = {kTVMOpaqueHandle, kTVMOpaqueHandle, kTVMOpaqueHandle, kTVMOpaqueHandle};
  int rcode = kTVMNullptr;
  rx_value out = {RX_NULL, 0, {0}};
  if ((int64_t)n != info->num_args) {
    return tvmrt_fail("InvalidArgumentError", "Function %.100s expects %lld arguments, got %d",
                      info->name, (long long)info->num_args, n);
  }
  if (tir_pools(vm, ffi) != 0) return -1;
  regs = calloc((size_t)info->num_regs + 1, item);
  if (regs == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate the registers of %.100s", info->name);
    goto done;
  }
  for (i = 0; i < n; ++i) {
    rx_value v = {RX_NULL, 0, {0}};
    if (tvmrt_rx_from_packed(args[i], codes[i], 0, &v) != 0) goto done;
    if (ffi) ffi_item(v, (TVMFFIAny*)regs + i);
    else legacy_item(v, (tvmrt_any_item*)regs + i);
    tvmrt_rx_release(&v);
  }
  call[0].v_handle = vm;
  call[1].v_handle = regs;
  call[2].v_handle = vm->tir_consts;
  call[3].v_handle = vm->tir_funcs;
  t_vm = vm;
  status = tvmrt_func_call(t->vmtir, call, call_codes, 4, &rv, &rcode);
  t_vm = saved;
  if (status == 0) { /* the result is in the register after the arguments */
    status = ffi ? take_ffi((TVMFFIAny*)regs + info->num_args, &out)
                 : take_legacy((tvmrt_any_item*)regs + info->num_args, &out);
  }
done:
  free_list(regs, (size_t)info->num_regs + 1, ffi);
  if (status != 0) return -1;
  if (out.kind == RX_STR) { /* a string goes out as its object */
    ret->v_handle = out.v.obj;
    *rc = kTVMObjectHandle;
  } else {
    tvmrt_object* temp = NULL;
    tvmrt_rx_to_packed(out, 0, ret, rc, &temp); /* out's reference goes with it */
  }
  return 0;
}

tvmrt_func* tvmrt_rx_tir_func(rx_vm* vm, int64_t func, tvmrt_func* vmtir) {
  tir_fn* t = (tir_fn*)calloc(1, sizeof(tir_fn));
  tvmrt_func* f;
  if (t == NULL || tvmrt_object_init(&t->hdr, RT_MAGIC_RX_TIR, tir_destroy) != 0) {
    free(t);
    tvmrt_fail("DeviceOutOfMemoryError", "cannot make a compiled function");
    return NULL;
  }
  t->vm = vm;
  t->func = func;
  t->vmtir = vmtir;
  tvmrt_retain(&vmtir->hdr);
  f = tvmrt_func_new(tir_call, t, &t->hdr);
  tvmrt_release(&t->hdr);
  return f;
}

/* ---------------------------------------------------------------------------------- */
/* the builtins as global packed functions (what compiled code looks up)               */

static int no_vm(const rx_builtin* b) {
  return tvmrt_fail("InvalidArgumentError",
                    "%s runs inside a Relax VM: it was called with no compiled Relax function "
                    "running on this thread",
                    b->name);
}

static int builtin_call(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  const rx_builtin* b = (const rx_builtin*)self;
  rx_value small[16], *in = small, out = {RX_NULL, 0, {0}};
  int i, status;
  if (t_vm == NULL) return no_vm(b);
  if (n > 16 && (in = (rx_value*)calloc((size_t)n, sizeof(rx_value))) == NULL)
    return tvmrt_fail("DeviceOutOfMemoryError", "%s: no memory", b->name);
  for (i = 0; i < n; ++i) {
    if (tvmrt_rx_from_packed(args[i], codes[i], 0, &in[i]) != 0) {
      while (i-- > 0) tvmrt_rx_release(&in[i]);
      if (in != small) free(in);
      return -1;
    }
  }
  status = b->fn(t_vm, in, n, &out);
  for (i = 0; i < n; ++i) tvmrt_rx_release(&in[i]);
  if (in != small) free(in);
  if (status != 0) return -1;
  if (out.kind == RX_STR) {
    ret->v_handle = out.v.obj;
    *rc = kTVMObjectHandle;
  } else {
    tvmrt_object* temp = NULL;
    tvmrt_rx_to_packed(out, 0, ret, rc, &temp); /* out's reference goes with it */
  }
  return 0;
}

tvmrt_func* tvmrt_rx_builtin_global(const char* name) {
  const rx_builtin* b = tvmrt_rx_builtin(name);
  if (b == NULL) b = tvmrt_rx_run_builtin(name);
  return b != NULL ? tvmrt_func_new(builtin_call, (void*)b, NULL) : NULL;
}

void* tvmrt_rx_builtin_handle_of(const tvmrt_func* f) {
  return f != NULL && f->kind == RT_FN_INTERNAL && f->fn == builtin_call ? f->self : NULL;
}

/* a tvm-ffi argument as a VM value: the runtime's marked arrays and objects borrowed (*made
   0), anything else converted as a packed argument (*made 1: a reference to release) */
static int ffi_arg(const TVMFFIAny* it, rx_value* out, int* made) {
  void* p = (void*)(intptr_t)it->v_int64;
  TVMValue v;
  int code;
  *made = 0;
  out->pad = 0;
  switch (it->type_index) {
    case FFI_NONE: out->kind = RX_NULL, out->v.i = 0; return 0;
    case FFI_INT: out->kind = RX_INT, out->v.i = it->v_int64; return 0;
    case FFI_BOOL: out->kind = RX_BOOL, out->v.i = it->v_int64 != 0; return 0;
    case FFI_FLOAT: out->kind = RX_FLOAT, memcpy(&out->v.f, &it->v_int64, 8); return 0;
    case FFI_TENSOR:
      if (it->zero_padding == FFI_OWNED) {
        out->kind = RX_TENSOR, out->v.obj = &((tvmrt_ndarray*)p)->hdr;
        return 0;
      }
      code = kTVMDLTensorHandle;
      break;
    case FFI_PTR:
      if (it->zero_padding == FFI_OWNED) {
        out->kind = tvmrt_rx_kind_of_magic(((tvmrt_object*)p)->magic);
        out->v.obj = (tvmrt_object*)p;
        if (out->kind >= 0) return 0;
      }
      code = kTVMOpaqueHandle;
      break;
    case FFI_DTYPE: code = kTVMDataType; break;
    case 8: code = kTVMStr; break; /* kTVMFFIRawStr */
    default:
      return tvmrt_fail("ArgumentTypeError",
                        "a compiled Relax function passed a builtin a value of tvm-ffi type "
                        "index %d; tvmrt's builtins take numbers, strings, tensors and its own "
                        "objects",
                        (int)it->type_index);
  }
  memcpy(&v, &it->v_int64, sizeof(v));
  if (tvmrt_rx_from_packed(v, code, 0, out) != 0) return -1;
  *made = 1;
  return 0;
}

static int builtin_ffi(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  const rx_builtin* b = (const rx_builtin*)self;
  rx_value small[16], *in = small, out = {RX_NULL, 0, {0}};
  int made_small[16], *made = made_small, i, status = -1;
  if (t_vm == NULL) return no_vm(b);
  if (n > 16) {
    in = (rx_value*)calloc((size_t)n, sizeof(rx_value));
    made = (int*)calloc((size_t)n, sizeof(int));
    if (in == NULL || made == NULL) {
      tvmrt_fail("DeviceOutOfMemoryError", "%s: no memory", b->name);
      goto done;
    }
  }
  for (i = 0; i < n; ++i) {
    if (ffi_arg(&args[i], &in[i], &made[i]) != 0) {
      n = i;
      goto done;
    }
  }
  status = b->fn(t_vm, in, n, &out);
  if (status == 0 && result != NULL) ffi_item_move(&out, result);
  tvmrt_rx_release(&out);
done:
  for (i = 0; i < n; ++i) {
    if (made[i]) tvmrt_rx_release(&in[i]);
  }
  if (in != small) free(in);
  if (made != made_small) free(made);
  return status;
}

/* the builtins' tables as closure blocks, from the moment the library loads */
__attribute__((constructor)) static void register_builtin_blocks(void) {
  size_t n;
  const rx_builtin* t = tvmrt_rx_builtin_table(&n);
  tvmrt_register_closure_block_ffi(t, sizeof(*t), (int)n, builtin_call, builtin_ffi);
  t = tvmrt_rx_run_table(&n);
  tvmrt_register_closure_block_ffi(t, sizeof(*t), (int)n, builtin_call, builtin_ffi);
}
