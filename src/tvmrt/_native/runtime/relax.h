/*
 * The Relax VM of the C runtime (TVM 0.16-0.27 executables, every era): internal header.
 *
 * The files, bottom up (each calls only the ones before it):
 *   relax_value.c    the values registers hold (numbers, strings, shapes, tensors, tuples,
 *                    closures, storages, functions) and their conversion to and from the
 *                    packed-function ABI; storages on the VM's devices with the budgets
 *   relax_format.c   the executable's bytes, every era: header, function table, memory
 *                    scopes, constant pool (tags by era), code; every count, index, register,
 *                    jump and function index checked before use
 *   relax_builtin.c  the vm.builtin.* functions executables call (memory, shapes and checks,
 *                    values, control)
 *   relax_run.c      the relax.run.* functions TVM has only in its Python
 *   relax_interp.c   the run loop: frames, Call/Ret/Goto/If, closures, the instrument hook,
 *                    the step, frame and register budgets
 *   relax_vm.c       the `relax.VirtualMachine` module and its packed functions
 *   relax_exec.c     the executable module (`relax.Executable` / `relax.VMExecutable`), its
 *                    blob loader and the era detection
 *
 * Formats and semantics: TVM's src/runtime/relax_vm (0.19) and src/runtime/vm (>= 0.21);
 * docs/relax.md says what tvmrt runs and refuses.
 */
#ifndef TVMRT_NATIVE_RUNTIME_RELAX_H_
#define TVMRT_NATIVE_RUNTIME_RELAX_H_

#include "rt.h"

#define RX_MAGIC_V1 0xD225DE2F4214151DULL /* kTVMVMBytecodeMagic */
#define RX_MAGIC_V2 0xD225DE2F4214151EULL /* >= 0.23: a memory-scope section follows */
#define RX_MAX_FUNCS (1 << 20)
#define RX_MAX_REGISTERS (1 << 20) /* per frame */
#define RX_MAX_CONSTS (1 << 24)
#define RX_MAX_ARGS 4096 /* arguments of one call */
/* what recursion on the C stack may reach: the tuple nesting a device copy or relax.run.print
   walks (a deeper one is refused by name: freeing any depth is iterative), and the run loops
   nested on the C stack (a VM function called from outside the loop, as a builtin's callee:
   call_tir_dyn of a VM function, a kernel calling back) */
#define RX_MAX_NESTING 1000
#define RX_MAX_NESTED_RUNS 64
#define RX_VOID_REG (INT64_C(1) << 54)
#define RX_VM_REG ((INT64_C(1) << 54) + 1)

/* eras of the executable format (what decides the constant tags and the ABI) */
enum {
  RX_ERA_LEGACY = 0, /* TVM <= 0.20: __tvm_dev_mblob, tags 0-5, legacy packed kernels */
  RX_ERA_021 = 1,    /* TVM 0.21: __tvm_ffi_library_bin, tags 1/3/5/65/71/72, tvm-ffi */
  RX_ERA_FFI = 2     /* TVM >= 0.22: __tvm_ffi__library_bin, tags 1/3/5/65/69/70 */
};
extern const char* const tvmrt_rx_era_names[3];

/* ---------------------------------------------------------------------------------- */
/* values (relax_value.c)                                                              */

enum {
  RX_NULL,
  RX_INT,
  RX_FLOAT,
  RX_BOOL,
  RX_DTYPE,
  RX_HANDLE, /* an opaque pointer (the VM context among them) */
  RX_STR,    /* objects from here on: v.obj holds a reference */
  RX_SHAPE,
  RX_TENSOR,
  RX_TUPLE,
  RX_CLOSURE,
  RX_FUNC,
  RX_STORAGE,
  RX_MODULE,
  RX_MAP, /* TVM's Map<String, ObjectRef>: what the graph executor's get_input_info returns */
  RX_NUM_KINDS
};
/* what tvmrt.relax.kind answers for a Relay VM ADT (not a Relax value: the Python face reads
   its fields with runtime.GetADTSize / GetADTTag / GetADTFields) */
enum { RX_KIND_RELAY_ADT = RX_NUM_KINDS };

typedef struct {
  int32_t kind;
  int32_t pad;
  union {
    int64_t i;
    double f;
    void* p;
    DLDataType t;
    tvmrt_object* obj;
  } v;
} rx_value;

enum {
  RT_MAGIC_RX_STR = 0x52535431,
  RT_MAGIC_RX_SHAPE = 0x52534831,
  RT_MAGIC_RX_TUPLE = 0x52545031,
  RT_MAGIC_RX_CLOSURE = 0x52434c31,
  RT_MAGIC_RX_STORAGE = 0x52534731,
  RT_MAGIC_RX_MAP = 0x524d5031
};

typedef struct {
  tvmrt_object hdr;
  size_t len;
  char data[]; /* NUL after len bytes */
} rx_str;

typedef struct {
  tvmrt_object hdr;
  size_t ndim;
  int64_t dims[];
} rx_shape;

typedef struct {
  tvmrt_object hdr;
  size_t size;
  rx_value items[];
} rx_tuple;

typedef struct rx_vm rx_vm;

/* a function value: a VM function of one VM (by index) or a packed function, with bound
   trailing arguments (make_closure, save_function) */
typedef struct {
  tvmrt_object hdr;
  uint64_t owner; /* the id of the rx_vm whose function table `func` indexes (0: packed) */
  int64_t func;   /* VM function index, or -1 */
  tvmrt_func* packed;
  int discard_return; /* save_function(include_return=False) */
  char name[64];
  size_t nbound;
  rx_value bound[];
} rx_closure;

typedef struct rx_pool rx_pool;

typedef struct {
  tvmrt_object hdr;
  void* data;
  size_t nbytes;
  DLDevice dev;
  char scope[32];
  rx_pool* pool; /* a reference: where the buffer goes back */
  size_t capacity;
} rx_storage;

extern const char* const tvmrt_rx_kind_names[RX_NUM_KINDS];
void tvmrt_rx_release(rx_value* v);              /* and sets it to NULL */
void tvmrt_rx_copy(rx_value* dst, rx_value src); /* a new reference in dst (dst released) */
static inline int tvmrt_rx_is_object(int kind) { return kind >= RX_STR; }
static inline rx_value tvmrt_rx_int(int64_t i) {
  rx_value v;
  v.kind = RX_INT;
  v.pad = 0;
  v.v.i = i;
  return v;
}
rx_value tvmrt_rx_object(int kind, tvmrt_object* obj); /* takes the reference */

rx_str* tvmrt_rx_str_new(const char* s, size_t n);
rx_shape* tvmrt_rx_shape_new(const int64_t* dims, size_t n);
rx_tuple* tvmrt_rx_tuple_new(size_t n); /* items NULL */
/* a Map of `pairs` entries: an rx_tuple under its own magic whose items are key, value, key,
   value... (keys are strings, each once; items NULL) */
rx_tuple* tvmrt_rx_map_new(size_t pairs);
/* sets `key` (a new string) to `value` (a reference taken) in the first `*used` pairs of `m`,
   or appends it: TVM's Map::Set. -1 with an error (the value released) */
int tvmrt_rx_map_set(rx_tuple* m, size_t* used, const char* key, rx_value value);
rx_closure* tvmrt_rx_closure_new(uint64_t owner, int64_t func, tvmrt_func* packed, const char* name,
                                 const rx_value* bound, size_t nbound);
tvmrt_ndarray* tvmrt_rx_tensor(rx_value v); /* NULL if v is no tensor */
rx_shape* tvmrt_rx_shape(rx_value v);
rx_str* tvmrt_rx_str(rx_value v);
rx_tuple* tvmrt_rx_tuple(rx_value v);
rx_tuple* tvmrt_rx_map(rx_value v); /* NULL if v is no Map */
/* "a Tensor", "a Shape", ...: what a value is, in TVM's words */
const char* tvmrt_rx_type_key(rx_value v);

/* whether p is a live object the Relax VM hands out (any of its kinds, a function, a module) */
int tvmrt_rx_is_live_object(const void* p);
/* whether a live object's magic (tvmrt_object_live_magic) is one of the values above */
static inline int tvmrt_rx_is_value_magic(uint32_t magic) {
  return magic == RT_MAGIC_RX_STR || magic == RT_MAGIC_RX_SHAPE || magic == RT_MAGIC_RX_TUPLE ||
         magic == RT_MAGIC_RX_CLOSURE || magic == RT_MAGIC_RX_STORAGE || magic == RT_MAGIC_FUNC ||
         magic == RT_MAGIC_MODULE || magic == RT_MAGIC_RX_MAP;
}
/* a value as a packed argument (borrowed: valid while v lives); closures become functions
   the caller must release through *temp (NULL when none was made) */
int tvmrt_rx_to_packed(rx_value v, int era, TVMValue* out, int* code, tvmrt_object** temp);
/* a packed argument or return as a value (a new reference; `ret`: the value is a return
   whose object reference is the VM's to take) */
int tvmrt_rx_from_packed(TVMValue v, int code, int ret, rx_value* out);

/* storage: one allocator per VM device, pooled (freed buffers of a size reused, as TVM's
   PooledAllocator) or naive, charging a live-bytes budget the VM shares */
typedef struct {
  int64_t max_steps;   /* steps of one invoke, weighted by their cost; 0: no limit */
  int64_t max_frames;  /* nested calls */
  int64_t max_live;    /* bytes of every live VM value; -1: no limit */
  int64_t max_storage; /* bytes of one alloc_storage; -1: no limit */
} rx_limits;
void tvmrt_rx_limits_from_env(rx_limits* out);

/* the live-bytes budget one VM's pools share (a reference each) */
typedef struct rx_budget rx_budget;
rx_budget* tvmrt_rx_budget_new(int64_t max_live);
void tvmrt_rx_budget_release(rx_budget* b);
int64_t tvmrt_rx_budget_live(const rx_budget* b);
rx_pool* tvmrt_rx_pool_new(DLDevice dev, int pooled, rx_budget* budget, const rx_limits* limits);
void tvmrt_rx_pool_release(rx_pool* p);
rx_storage* tvmrt_rx_storage_alloc(rx_pool* p, uint64_t nbytes, const char* scope);
/* charge (or, negative, give back) bytes of live VM values; -1 with an error over budget */
int tvmrt_rx_charge(rx_pool* p, int64_t bytes, const char* what);

/* ---------------------------------------------------------------------------------- */
/* the executable (relax_format.c)                                                     */

enum { RX_FUNC_PACKED = 0, RX_FUNC_VM = 1, RX_FUNC_VM_TIR = 2 };
enum { RX_OP_CALL = 1, RX_OP_RET = 2, RX_OP_GOTO = 3, RX_OP_IF = 4 };
enum { RX_ARG_REG = 0, RX_ARG_IMM = 1, RX_ARG_CONST = 2, RX_ARG_FUNC = 3 };

typedef struct {
  int32_t kind;
  char* name;
  int64_t start, end, num_args, num_regs;
  size_t num_params;
  char** params;
} rx_func_info;

typedef struct {
  int era;
  uint64_t magic;
  char* version;
  size_t num_funcs;
  rx_func_info* funcs;
  size_t num_consts;
  rx_value* consts;    /* tensors on the CPU; copied to the VM's device at init */
  int32_t* const_tags; /* as the file wrote them */
  char** const_scopes; /* >= 0.23: memory scope per constant, NULL for none */
  size_t num_code;     /* instructions */
  int64_t* offsets;    /* instr_offset */
  size_t num_words;
  int64_t* words; /* instr_data */
} rx_exe;

/* parse an executable payload (after any length prefix); 0, or -1 with a ModuleLoadError
   naming `what` and the field */
int tvmrt_rx_read(const uint8_t* data, size_t size, int era, const char* what, rx_exe* out);
void tvmrt_rx_exe_free(rx_exe* exe);
int tvmrt_rx_find_func(const rx_exe* exe, const char* name); /* index or -1 */
/* the argument word's kind and value (kind << 56 | 56-bit signed value) */
static inline int rx_arg_kind(int64_t w) { return (int)((uint64_t)w >> 56); }
static inline int64_t rx_arg_value(int64_t w) { return (int64_t)((uint64_t)w << 8) >> 8; }

/* ---------------------------------------------------------------------------------- */
/* builtins (relax_builtin.c, relax_run.c)                                             */

typedef int (*rx_builtin_fn)(rx_vm* vm, rx_value* args, int n, rx_value* ret);
typedef struct {
  const char* name;
  rx_builtin_fn fn;
} rx_builtin;

/* the builtin of that name (vm.builtin.* and relax.run.*), or NULL */
const rx_builtin* tvmrt_rx_builtin(const char* name);
const rx_builtin* tvmrt_rx_run_builtin(const char* name); /* relax.run.* (relax_run.c) */
/* the two tables whole (their entries are the builtins' handles for compiled code) */
const rx_builtin* tvmrt_rx_builtin_table(size_t* count);
const rx_builtin* tvmrt_rx_run_table(size_t* count);
/* the families tvmrt refuses by name (LLM KV caches, sampling, tensor cache, disco, CUDA
   graphs): why, or NULL when the name is none of them */
const char* tvmrt_rx_refused_family(const char* name);

/* ---------------------------------------------------------------------------------- */
/* the VM (relax_interp.c, relax_vm.c)                                                 */

typedef struct {
  int kind;           /* RX_FUNC_*, or RX_POOL_BUILTIN */
  int invoke_closure; /* vm.builtin.invoke_closure: a bytecode closure runs in the loop */
  const rx_builtin* builtin;
  tvmrt_func* packed; /* a kernel, a global, or a __vmtir__ function */
  rx_value value;     /* what a function-index argument passes: a closure or a function */
} rx_pool_entry;
enum { RX_POOL_BUILTIN = 3 };

#define RX_MAX_DEVICES 8

struct rx_vm {
  uint64_t id;        /* unique in the process: what closures name their VM by */
  tvmrt_module* mod;  /* the VirtualMachine module (not a reference) */
  tvmrt_module* exec; /* the executable module (a reference) */
  const rx_exe* exe;
  int initialized;
  size_t num_devices;
  DLDevice devices[RX_MAX_DEVICES]; /* the host is the last */
  rx_pool* pools[RX_MAX_DEVICES];
  rx_value* consts; /* exe's constants, tensors on devices[0] */
  rx_pool_entry* func_pool;
  rx_limits limits;
  rx_budget* budget; /* bytes of live VM values, charged by the pools */
  int64_t steps;     /* this invoke's */
  int64_t depth;
  int nested_runs; /* run loops on the C stack now (RX_MAX_NESTED_RUNS) */
  tvmrt_func* instrument;
  uint64_t busy_thread; /* the thread running an invoke, 0 when none (atomics) */
  /* set_input / invoke_stateful / get_output, per function index */
  rx_value* inputs; /* a tuple per function, or NULL */
  rx_value* outputs;
  /* save_function's closures by name */
  size_t num_saved;
  char** saved_names;
  rx_value* saved;
  /* compiled mode: the constants and functions as the any-lists generated code reads (made at
     its first call, read-only to it; relax_tir.c) */
  void* tir_consts;
  void* tir_funcs;
};

/* call the function a pool entry or a value names, with `args` (borrowed); *ret a new
   reference. `callee` is a closure, a function value or a pool index (func >= 0) */
int tvmrt_rx_call_value(rx_vm* vm, rx_value callee, rx_value* args, int n, rx_value* ret);
int tvmrt_rx_invoke(rx_vm* vm, int64_t func, rx_value* args, int n, rx_value* ret);
/* a value's device copy (tensors, and tuples of them) onto vm's device 0 */
int tvmrt_rx_to_device(rx_vm* vm, rx_value in, DLDevice dev, rx_value* out);
/* a new tensor on `dev` from the VM's pools (uninitialised) */
int tvmrt_rx_empty(rx_vm* vm, const int64_t* shape, int ndim, DLDataType dtype, DLDevice dev,
                   rx_value* out);
/* the VM of a context argument (RX_HANDLE of a live VM), or NULL with an error */
rx_vm* tvmrt_rx_context(rx_vm* vm, rx_value ctx, const char* what);

/* relax_tir.c: compiled mode. A vm_tir function's closure body (calls `vmtir` with the VM's
   any-lists; vm is not retained); the builtins as global packed functions for compiled
   code; the tvm-ffi any-list functions (a tvm-ffi library's imports are linked to these) */
tvmrt_func* tvmrt_rx_tir_func(rx_vm* vm, int64_t func, tvmrt_func* vmtir);
void tvmrt_rx_tir_free_pools(rx_vm* vm); /* vm->tir_consts and tir_funcs, at release_state */
tvmrt_func* tvmrt_rx_builtin_global(const char* name);
/* what TVMBackendGetFuncFromEnv answers compiled code for a builtin's global function f: the
   builtin's table entry (called without a lookup: a closure block), or NULL if f is none */
void* tvmrt_rx_builtin_handle_of(const tvmrt_func* f);
/* the value kind of an object's magic (RX_STR ... RX_MODULE), -1 for another */
int tvmrt_rx_kind_of_magic(uint32_t magic);
TVM_DLL int tvmrt_rx_anylist_set_packed_arg(void* list, int index, TVMFFIAny* args, int arg_offset);
TVM_DLL int tvmrt_rx_anylist_reset_item(void* list, int index);
TVM_DLL int tvmrt_rx_anylist_move_from_return(void* list, int index, TVMFFIAny* args,
                                              int ret_offset);

/* relax_vm.c: the VirtualMachine module over an executable module (retained) */
tvmrt_module* tvmrt_rx_machine_new(tvmrt_module* exec_mod, const rx_exe* exe);

/* relax_exec.c: the blob loaders of the `relax.VMExecutable` (TVM >= 0.20) and
   `relax.Executable` (<= 0.19) entries, any container */
tvmrt_module* tvmrt_rx_exec_load_blob(tvmrt_reader* r);
tvmrt_module* tvmrt_rx_exec_load_blob_019(tvmrt_reader* r);
const rx_exe* tvmrt_rx_exec_of(tvmrt_module* mod); /* NULL unless a Relax executable */
/* the global functions over the VM's values (runtime.ShapeTuple, ...): a new reference or
   NULL; their names, NULL past the last */
tvmrt_func* tvmrt_rx_global(const char* name);
const char* tvmrt_rx_global_name(size_t i);

#endif /* TVMRT_NATIVE_RUNTIME_RELAX_H_ */
