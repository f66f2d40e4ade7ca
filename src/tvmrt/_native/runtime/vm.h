/*
 * The Relay VM of the C runtime (TVM 0.14-0.19 executables): internal header.
 *
 * The files, bottom up (each calls only the ones before it):
 *   vm_format.c   code.ro: the header, constants, kernel names and the code, every count
 *                 checked against the bytes left, every instruction's hash and field count
 *   vm_decode.c   every operand checked (registers, indexes, jumps, dtypes, static sizes)
 *                 and decoded into vm_ins once
 *   vm_value.c    the values registers hold besides arrays: ADTs, closures, storages; the
 *                 pooled allocator and the live-bytes budget
 *   vm_profile.c  the profiler's record of an invoke: kernel calls and timed instructions
 *   vm_step.c     one instruction that neither calls, returns nor jumps
 *   vm_interp.c   the run loop (TVM's VirtualMachine::RunLoop): calls, returns, jumps
 *   vm_machine.c  the `VirtualMachine` module and its packed functions
 *   vm_exec.c     the `VMExecutable` module, its blob loader and runtime.Load_Executable
 */
#ifndef TVMRT_NATIVE_RUNTIME_VM_H_
#define TVMRT_NATIVE_RUNTIME_VM_H_

#include "rt.h"

#define VM_MAGIC RT_VM_CODE_MAGIC  /* kTVMVMBytecodeMagic (rt.h) */
#define VM_MAX_REGISTERS (1 << 20) /* per frame */
#define VM_MAX_STATIC_BYTES (1LL << 48)

enum {
  VM_MOVE,
  VM_RET,
  VM_INVOKE,
  VM_INVOKE_CLOSURE,
  VM_INVOKE_PACKED,
  VM_ALLOC_TENSOR,
  VM_ALLOC_TENSOR_REG,
  VM_ALLOC_ADT,
  VM_ALLOC_CLOSURE,
  VM_GET_FIELD,
  VM_IF,
  VM_LOAD_CONST,
  VM_GOTO,
  VM_GET_TAG,
  VM_LOAD_CONSTI,
  VM_FATAL,
  VM_ALLOC_STORAGE,
  VM_SHAPE_OF,
  VM_RESHAPE_TENSOR,
  VM_DEVICE_COPY,
  VM_KILL_REGISTER,
  VM_NUM_OPCODES
};

extern const char* const tvmrt_vm_opcode_names[VM_NUM_OPCODES];

/* One decoded instruction: operands in the order the run loop uses them. */
typedef struct {
  int32_t op;
  int32_t dst;        /* destination register, -1 if none */
  int32_t r0, r1, r2; /* source registers (-1 if unused) */
  int32_t dev;        /* virtual device index */
  int64_t imm;        /* index, tag, field, offset, value or static byte count */
  int64_t imm2;       /* If's false offset, alignment, output count */
  DLDataType dtype;
  int32_t nargs, ndim;
  int32_t* args;  /* argument / field registers */
  int64_t* shape; /* static shape */
} vm_ins;

typedef struct {
  char* name;
  int64_t num_regs;
  size_t num_params;
  char** params;
  int64_t* param_devs;
  size_t num_code;
  int64_t* words;  /* the raw fields of every instruction, back to back */
  size_t* starts;  /* starts[pc]: where instruction pc's words begin (opcode first) */
  size_t* lengths; /* lengths[pc]: its field count, opcode excluded */
  vm_ins* code;    /* after decoding */
} vm_func;

typedef struct {
  char* version;
  size_t num_devs;
  int32_t* dev_types;
  int32_t* dev_ids;
  char** dev_scopes;
  int32_t host;
  size_t num_funcs; /* = globals, in function-index order */
  vm_func* funcs;
  size_t num_consts;
  tvmrt_ndarray** consts; /* NULL where late-bound and not loaded */
  char** const_names;     /* the late-bound name, NULL for an immediate */
  int64_t* const_devs;
  size_t num_prims;
  char** prims;
} vm_exe;

/* vm_format.c: parse code.ro (check_hash 0: skip the hashes, for fuzzing the operand checks);
   0, or -1 with a ModuleLoadError naming `what` */
int tvmrt_vm_read(const uint8_t* data, size_t size, const char* what, int check_hash, vm_exe* out);
void tvmrt_vm_exe_free(vm_exe* exe);

/* vm_decode.c: check every operand and fill each function's code */
int tvmrt_vm_decode(vm_exe* exe, const char* what);
int tvmrt_vm_find_func(const vm_exe* exe, const char* name); /* index or -1 */

/* vm_value.c ---------------------------------------------------------------------- */
enum {
  RT_MAGIC_VM_CLOSURE = 0x434c4f31,
  RT_MAGIC_VM_STORAGE = 0x53544f31,
  RT_MAGIC_VM_POOL = 0x504f4f31
};

typedef struct vm_pool vm_pool;

/* ADTs and closures: cells holding references; a chain of them (a list built by a loop)
   is freed with a worklist through `next_dead`, never by recursion */
typedef struct {
  tvmrt_object hdr;
  int32_t tag;
  size_t size;
  tvmrt_object** fields;   /* each a reference */
  tvmrt_object* next_dead; /* the free's worklist */
  struct vm_pool* pool;    /* the budget charged (a reference), or NULL */
  size_t charged;
  uint32_t foreign; /* the magic of a closure or storage among its fields, at any depth,
                              or 0: such an ADT is no input to a VM (see tvmrt_vm_input_value) */
} vm_adt;

typedef struct {
  tvmrt_object hdr;
  int64_t func;
  size_t size;
  tvmrt_object** fields;
  tvmrt_object* next_dead;
  struct vm_pool* pool;
  size_t charged;
} vm_closure;

typedef struct {
  tvmrt_object hdr;
  void* data;
  size_t nbytes;   /* usable bytes */
  size_t capacity; /* the buffer's size */
  size_t align;
  size_t charged; /* bytes charged to the pool's budget */
  vm_pool* pool;  /* a reference, or NULL */
} vm_storage;

typedef struct {
  int64_t max_frames, max_steps;           /* steps: 0 is no limit */
  int64_t max_alloc_bytes, max_live_bytes; /* -1: no limit */
} vm_limits;

void tvmrt_vm_limits_from_env(vm_limits* out);
/* pool: the VM whose live-bytes budget the cell is charged to (NULL: none, a C caller's) */
vm_adt* tvmrt_vm_adt_new(vm_pool* pool, int32_t tag, tvmrt_object* const* fields, size_t n);
vm_adt* tvmrt_vm_adt_check(void* handle); /* NULL (no error) if not a live ADT */
vm_closure* tvmrt_vm_closure_new(vm_pool* pool, int64_t func, tvmrt_object* const* fields,
                                 size_t n);
/* an array's object from its handle, and back */
tvmrt_object* tvmrt_vm_array_obj(tvmrt_ndarray* a);
tvmrt_ndarray* tvmrt_vm_as_array(tvmrt_object* obj); /* NULL if obj is no array */
/* element i of a dense integer tensor (int or uint of 1, 8, 16, 32 or 64 bits) as an int64 */
int64_t tvmrt_vm_int_at(const tvmrt_ndarray* a, size_t i);
const char* tvmrt_vm_kind(const tvmrt_object* obj);
/* a packed argument as a VM input (a new reference): an NDArray; a DLTensor, viewed in place
   when 64-byte aligned and dense (TVM's NDArray::FromExternalDLTensor), else copied; an ADT */
tvmrt_object* tvmrt_vm_input_value(TVMValue v, int code, int index);
/* a host DLTensor as a tensor of the VM (a new reference): viewed in place when may_view and it
   is compact and aligned (the caller keeps its memory alive), else a copy; NULL with the error
   set (`index` names it) when it is not a host tensor with a shape and data */
tvmrt_ndarray* tvmrt_vm_host_tensor(const DLTensor* dl, int index, int may_view);

/* a pool of freed buffers (pooled) or none (naive), with a live-bytes budget */
vm_pool* tvmrt_vm_pool_new(int pooled, const vm_limits* limits);
void tvmrt_vm_pool_release(vm_pool* pool);
void tvmrt_vm_pool_set_limits(vm_pool* pool, const vm_limits* limits); /* when not running */
vm_storage* tvmrt_vm_storage_alloc(vm_pool* pool, int64_t nbytes, int64_t align);
/* the live-bytes budget beyond storages: `bytes` of `what` (an ADT, a register file) charged
   (*charged: what to give back, 0 when the budget is off), or -1 with the budget's error */
int tvmrt_vm_charge(vm_pool* pool, size_t bytes, const char* what, size_t* charged);
void tvmrt_vm_uncharge(vm_pool* pool, size_t charged);
/* what a value of `fields` fields costs the budget: its C size, plus malloc's headers and
   the live-object table's slots */
/* an array the VM made (a view's header, or a small tensor with its data) charged to the
   live-bytes budget until it is freed: 0, or -1 with DeviceOutOfMemoryError set */
int tvmrt_vm_charge_array(vm_pool* p, tvmrt_object* array, const char* what);
#define VM_CELL_BYTES(head, fields) ((head) + (fields) * sizeof(void*) + 64)

/* vm_profile.c ---------------------------------------------------------------------- */
/* What TVM's VM profiler (VirtualMachineDebug) times, recorded in C during an invoke and read
   once after it: one event per kernel call and per AllocStorage, AllocTensor, AllocTensorReg,
   ReshapeTensor, DeviceCopy and KillRegister, in the order they ran, at most
   VM_TRACE_MAX_EVENTS events and VM_TRACE_MAX_TEXT bytes of shapes (an invoke past either
   fails with InvalidArgumentError) */
#define VM_TRACE_MAX_EVENTS (1u << 20)
#define VM_TRACE_MAX_TEXT (64u << 20)
typedef struct {
  /* kind 0: a kernel call (index: its primitive; dev_type, dev_id: its last tensor's device,
     -1 if it has none); 1: an instruction (index: its opcode; dev_type: the virtual device
     it names, -1 for the host; dev_id 0) */
  int32_t kind, index, dev_type, dev_id;
  uint64_t t0, t1;             /* CLOCK_MONOTONIC ns around the work alone */
  uint32_t text_off, text_len; /* its "dtype[shape], ..." in the text */
} vm_event;
typedef struct {
  vm_event* events;
  size_t count, cap;
  char* text;
  size_t used, text_cap;
  uint8_t* blob; /* the last profile_stop's bytes */
  TVMByteArray blob_ref;
} vm_trace;

void tvmrt_vm_trace_clear(vm_trace* t);
void tvmrt_vm_trace_free(vm_trace* t);
/* a kernel call's event (its tensors, DLTensor handles): its index, or -1 with an error */
int tvmrt_vm_trace_kernel(vm_trace* t, int64_t prim, const TVMValue* vals, int n);
/* an instruction's event, read from the registers before it runs: its index, -2 for an
   instruction TVM does not time, -1 with an error */
int tvmrt_vm_trace_instruction(vm_trace* t, const vm_ins* ins, tvmrt_object* const* regs);
void tvmrt_vm_trace_times(vm_trace* t, int event, uint64_t t0, uint64_t t1);
/* the events as bytes: a little-endian u64 count, `count` events as vm_event lays them out
   (40 bytes each: four i32, two u64, two u32), then the text */
int tvmrt_vm_trace_blob(vm_trace* t, TVMValue* ret, int* rc);

/* vm_interp.c ---------------------------------------------------------------------- */
typedef struct {
  const vm_exe* exe;
  tvmrt_ndarray** consts; /* exe's constants, referenced */
  tvmrt_func** kernels;   /* one per primitive */
  vm_pool* pool;
  vm_limits limits;
  int regs_charged; /* this invoke's register files are charged to the live-bytes budget */
  vm_trace* trace;  /* the profiler's record while it records, else NULL (vm_profile.c) */
} vm_state;

/* vm_step.c: one instruction that neither calls, returns nor jumps (0, or -1 with an error
   set); the register write that releases what the register held; LoadScalarInt */
int tvmrt_vm_step(vm_state* vm, const vm_ins* ins, tvmrt_object** regs);
void tvmrt_vm_set_reg(tvmrt_object** regs, int32_t r, tvmrt_object* value);
int tvmrt_vm_scalar_int(tvmrt_object* v, const char* role, int32_t r, int64_t* out);

/* vm_interp.c: run function `index` on `args` (borrowed); *out is a new reference */
int tvmrt_vm_run(vm_state* vm, int64_t index, tvmrt_object* const* args, size_t nargs,
                 tvmrt_object** out);

/* vm_machine.c: a new `VirtualMachine` module over an executable module (retained) */
tvmrt_module* tvmrt_vm_machine_new(tvmrt_module* exe_mod, vm_exe* exe);

/* vm_exec.c -------------------------------------------------------------------------- */
tvmrt_module* tvmrt_vm_exec_load_blob(tvmrt_reader* r); /* blob loader: VMExecutable */
/* the globals the VM adds (runtime.Load_Executable, the ADT functions), a new reference or
   NULL (no error) */
tvmrt_func* tvmrt_vm_global(const char* name);
const char* const* tvmrt_vm_global_names(size_t* n); /* their names (TVMFuncListGlobalNames) */

#endif /* TVMRT_NATIVE_RUNTIME_VM_H_ */
