/*
 * Internal header of tvmrt's native C runtime (libtvmrt_runtime): the object layer
 * (modules, packed functions, arrays), and the entry points the files offer each other.
 * Public API: tvm/runtime/c_runtime_api.h; the ABI types, errors and services: native.h; the
 * bounded byte reader the parsers share: reader.h.
 *
 * The files call down only (tests/native/test_c_layers.py fails on a cycle), bottom up:
 *   object (functions, errors' text) -> files, module, registry, reader, json, cuda (libcuda)
 *   -> ndarray, cuda_module (the blob's `cuda` entry) -> streams
 *   -> params, graph_attrs, graph_checks -> graph -> graph_arrays -> graph_executor
 *   -> graph_funcs -> factory -> the Relay VM (vm_*.c, vm.h) -> blob -> ffi_bin, ffi_lib -> dso
 *   aot_meta -> aot -> aot_factory (under blob, over params and factory's device args)
 *   -> globals (global functions, the kernels' function environment, tvmrt_init)
 *   dlpack, object_types: the rest of TVM's C API, over object and ndarray
 *
 * Objects are reference counted (atomics), freed when the count drops to zero:
 *   tvmrt_module   a module: a type key, a lookup function, imports
 *   tvmrt_func     a packed function: C code with a `self` it owns a reference to
 *   tvmrt_ndarray  an array: its DLTensor comes first, so the handle is the DLTensor*
 */
#ifndef TVMRT_NATIVE_RUNTIME_RT_H_
#define TVMRT_NATIVE_RUNTIME_RT_H_

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "native.h"
#include "reader.h"

#define RT_MAX_NDIM 32
#define RT_ALIGN 64 /* kAllocAlignment */

/* Limits of the parsers (documented in docs/c_runtime.md). */
#define RT_JSON_MAX_DEPTH 64
#define RT_MAX_NODES (1 << 22)
#define RT_MAX_NAME 4096

/* Errors: tvmrt_fail (native.h), with the Python runtime's class names as kinds. */

/* words.c: the words of a caller's bad argument, as the Python faces say them */
/* 0 when `fn` got lo..hi arguments (hi < 0: no upper bound), else -1 with an error set */
int tvmrt_arity(const char* fn, int n, int lo, int hi);
/* the Python type name of a value of type code `code` ("float", "NoneType", "NDArray", ...;
   "an object" for a handle C cannot name) */
const char* tvmrt_py_type_name(int code);
/* `v` as Python's repr writes a float (the shortest digits that read back, ".0" when whole) */
void tvmrt_float_repr(double v, char* buf, size_t n);
/* a value as the Python faces name it: its type and repr ("float 3.5", "NoneType None",
   "str 'x'", "int 3"), or "type code N" for one C cannot write */
void tvmrt_py_value_words(TVMValue v, int code, char* buf, size_t n);
/* a dtype as TVM writes it ("float32", "int8x4", "bool", "void"); returns buf */
const char* tvmrt_dtype_text(DLDataType t, char* buf, size_t n);

/* files.c: a model's files, as tvmrt/binfmt/files.py reads them (the same bounds and words):
   opened without blocking, fstat on the descriptor a regular file, its size within the bound
   of its kind before anything is read (docs/c_runtime.md, "Limits on input") */
#define RT_MAX_META_BYTES (16ull << 20)      /* DLR's compiled.meta */
#define RT_MAX_GRAPH_JSON_BYTES (1ull << 30) /* graph JSON */
#define RT_MAX_LIBRARY_BYTES (2ull << 30)    /* a shared library */
#define RT_MAX_PARAMS_BYTES (16ull << 30)    /* a params file (its magic checked first) */
#define RT_MAX_CODE_BYTES (16ull << 30)      /* a Relay VM code.ro (its magic checked first) */
/* the first 8 bytes (a little-endian u64) of a params file (kTVMNDArrayListMagic; params.c
   reads it) and of a Relay VM code.ro (kTVMVMBytecodeMagic; vm_format.c reads it) */
#define RT_PARAMS_LIST_MAGIC 0xF7E58D4F05049CB7ULL
#define RT_VM_CODE_MAGIC 0xD225DE2F4214151DULL
typedef struct {
  uint64_t value;     /* the file's first 8 bytes, little-endian */
  const char* error;  /* the error kind when they differ */
  const char* format; /* what such a file is, for the message ("a TVM params blob") */
} tvmrt_file_magic;
extern const tvmrt_file_magic tvmrt_params_file_magic;  /* RT_PARAMS_LIST_MAGIC */
extern const tvmrt_file_magic tvmrt_vm_code_file_magic; /* RT_VM_CODE_MAGIC */
/* path opened read-only: a regular file of at most `limit` bytes (else -1 with an `error`
   naming `what` and the path); *fd to close, *size its size */
int tvmrt_open_regular(const char* path, const char* error, const char* what, uint64_t limit,
                       int* fd, uint64_t* size);
/* tvmrt_open_regular, then closed */
int tvmrt_check_regular(const char* path, const char* error, const char* what, uint64_t limit);
/* the file's bytes, NUL-terminated (free with free); with `magic`, its first bytes are checked
   before the rest is read */
int tvmrt_read_regular(const char* path, const char* error, const char* what, uint64_t limit,
                       const tvmrt_file_magic* magic, char** data, size_t* size);

/* globals.c: the one-time set-up (the function environment kernels see, TVM_NUM_THREADS);
   every public entry point that hands out a module or function calls it first */
void tvmrt_init(void);

/* ---------------------------------------------------------------------------------- */
/* objects                                                                             */

enum { RT_MAGIC_MODULE = 0x4d4f4431, RT_MAGIC_FUNC = 0x46554e31, RT_MAGIC_ARRAY = 0x41525231 };
/* an ADT of the Relay VM (vm_value.c): handed to C callers as kTVMObjectHandle */
enum { RT_MAGIC_ADT = 0x41445431 };

typedef struct tvmrt_object {
  uint32_t magic;
  int32_t listed; /* in the live set (object.c); atomics */
  int64_t refs;
  void (*destroy)(struct tvmrt_object* self);
} tvmrt_object;

/* sets magic, one reference and destroy, and registers obj as live (-1 on OOM, error set) */
int tvmrt_object_init(tvmrt_object* obj, uint32_t magic, void (*destroy)(tvmrt_object*));
/* the same, not yet in the live set: for objects made and dropped inside the runtime by the
   thousand (the Relax VM's shapes and storages), which enter it when a pointer to them first
   leaves the runtime (tvmrt_object_publish, at every such exit); until then no handle
   check finds them, as no caller can hold one */
void tvmrt_object_init_unlisted(tvmrt_object* obj, uint32_t magic, void (*destroy)(tvmrt_object*));
/* obj into the live set if it is not there (best effort: on OOM it stays out, and a handle
   check refuses it later with an error) */
void tvmrt_object_publish(tvmrt_object* obj);
/* whether obj is a live object of this magic (never reads a freed object's memory) */
int tvmrt_object_live(const void* obj, uint32_t magic);
/* the magic of a live object (one lookup for callers that accept several kinds), 0 if obj is
   not a live object of this runtime */
uint32_t tvmrt_object_live_magic(const void* obj);
void tvmrt_retain(tvmrt_object* obj);
void tvmrt_release(tvmrt_object* obj); /* the last release unregisters, then destroys */
/* tvmrt_release without the destroy: 1 when that was the last reference (obj is unregistered
   and the caller must destroy it), else 0; for destructors that free chains with a worklist */
int tvmrt_release_deferred(tvmrt_object* obj);

/* A packed function implemented inside the runtime: args are borrowed, an object handle
   in *ret is a new reference for the caller; a string in *ret lives as long as `self`. */
typedef int (*tvmrt_fn)(void* self, TVMValue* args, int* codes, int num_args, TVMValue* ret,
                        int* ret_code);

typedef struct tvmrt_func {
  tvmrt_object hdr;
  int kind; /* RT_FN_* */
  tvmrt_fn fn;
  TVMBackendPackedCFunc backend;
  TVMPackedCFunc cfunc;
  TVMPackedCFuncFinalizer fin;
  void* self;          /* given to fn / backend resource / cfunc resource */
  tvmrt_object* owner; /* kept alive while the function lives (may be NULL) */
} tvmrt_func;

enum { RT_FN_INTERNAL = 1, RT_FN_BACKEND = 2, RT_FN_C = 3 };

/* new functions (one reference each); `owner` is retained */
tvmrt_func* tvmrt_func_new(tvmrt_fn fn, void* self, tvmrt_object* owner);
tvmrt_func* tvmrt_func_backend(TVMBackendPackedCFunc f, tvmrt_object* owner);
tvmrt_func* tvmrt_func_check(void* handle); /* NULL (error set) if not a function handle */
/* a function written in C against TVM's API (TVMFuncCreateFromCFunc) */
tvmrt_func* tvmrt_func_c(TVMPackedCFunc fn, TVMPackedCFuncFinalizer fin, void* resource);
/* call a function handle: what TVMFuncCall does with the runtime's handles */
int tvmrt_func_call(void* handle, TVMValue* args, int* codes, int num_args, TVMValue* ret,
                    int* ret_code);

/* ---------------------------------------------------------------------------------- */
/* modules                                                                             */

typedef struct tvmrt_env_entry {
  char* name;
  tvmrt_func* func;
  void* handle; /* what the lookup answers: func, or a builtin's table entry (relax_tir.c) */
  struct tvmrt_env_entry* next;
} tvmrt_env_entry;

typedef struct tvmrt_module {
  tvmrt_object hdr;
  char type_key[48];
  /* the module's own function `name` as a new reference, or NULL (no error set) */
  tvmrt_func* (*lookup)(struct tvmrt_module* self, const char* name);
  void (*finalize)(struct tvmrt_module* self);
  void* impl;
  struct tvmrt_module** imports;
  size_t num_imports, cap_imports;
  pthread_mutex_t env_mu;
  tvmrt_env_entry* env; /* TVMBackendGetFuncFromEnv's answers, kept for the module's life */
} tvmrt_module;

tvmrt_module* tvmrt_module_new(const char* type_key, void* impl);
tvmrt_module* tvmrt_module_check(void* handle); /* NULL (error set) if not a module handle */
int tvmrt_module_import(tvmrt_module* mod, tvmrt_module* dep);
/* the function `name` of mod (then of its imports if query_imports), a new reference or
   NULL (no error set) */
tvmrt_func* tvmrt_module_get(tvmrt_module* mod, const char* name, int query_imports);

/* ffi_lib.c: tvm-ffi kernel libraries (TVM >= 0.21). Whether a dlopen-ed library is one
   (and, TVM 0.21's, exports its kernels under plain names); link its imports and slots to
   the runtime's services (-1, error set, when it needs one the runtime lacks); point its
   context slots at `module` (only where they hold `only_if`, unless that is NULL); a
   kernel as a packed function `owner` keeps alive. */
int tvmrt_ffi_is_ffi_library(void* handle, int* plain_names);
int tvmrt_ffi_link(void* handle, const char* path);
void tvmrt_ffi_set_context(void* handle, void* module, void* only_if);
tvmrt_func* tvmrt_ffi_func(void* fn, tvmrt_object* owner, int tvm021);

/* dso.c */
tvmrt_module* tvmrt_load_dso(const char* path);
/* the same from `size` bytes in memory (through a memfd; Linux) */
tvmrt_module* tvmrt_load_dso_memory(const void* data, size_t size);
tvmrt_module* tvmrt_system_lib(const char* prefix);
/* blob.c: the module tree a `__tvm_dev_mblob` (or TVM 0.21's `__tvm_ffi_library_bin`, the
   same layout: `container` says which, RT_BLOB_*) describes, with `lib` as its "_lib"; the
   loader of a blob entry's type key (NULL: none) */
tvmrt_module* tvmrt_process_blob(const uint8_t* blob, size_t limit, tvmrt_module* lib,
                                 int container);
typedef tvmrt_module* (*tvmrt_blob_loader_fn)(tvmrt_reader* r);
tvmrt_blob_loader_fn tvmrt_blob_loader(const char* key);
/* ffi_bin.c: the module tree of a tvm-ffi `__tvm_ffi__library_bin` (TVM >= 0.22), with
   `lib` as its "_lib" (a new reference; modules of kinds without a loader are skipped) */
tvmrt_module* tvmrt_ffi_library_bin(const uint8_t* data, size_t limit, tvmrt_module* lib);

/* ---------------------------------------------------------------------------------- */
/* cuda.c: kDLCUDA through libcuda.so.1, dlopened at first use                          */

typedef struct {
  int (*init)(unsigned);
  int (*driver_get_version)(int*);
  int (*device_get_count)(int*);
  int (*device_get)(int*, int);
  int (*primary_ctx_retain)(void**, int);
  int (*ctx_set_current)(void*);
  int (*mem_alloc)(uint64_t*, size_t);
  int (*mem_free)(uint64_t);
  int (*memcpy_htod)(uint64_t, const void*, size_t, void*);
  int (*memcpy_dtoh)(void*, uint64_t, size_t, void*);
  int (*memcpy_dtod)(uint64_t, uint64_t, size_t, void*);
  int (*stream_create)(void**, unsigned);
  int (*stream_destroy)(void*);
  int (*stream_synchronize)(void*);
  int (*module_load_data)(void**, const void*);
  int (*module_unload)(void*);
  int (*module_get_function)(void**, void*, const char*);
  int (*func_set_attribute)(void*, int, int);
  int (*launch_kernel)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                       void*, void**, void**);
  int (*device_get_attribute)(int*, int, int);
  int (*get_error_name)(int, const char**);
  int (*get_error_string)(int, const char**);
} tvmrt_cuda_api;

/* the loaded driver, or NULL with DeviceUnavailableError set (the Python runtime's words) */
const tvmrt_cuda_api* tvmrt_cuda_driver(void);
int tvmrt_cuda_error(const char* call, int code); /* the error for a CUresult; returns -1 */
/* make cuda(device_id)'s primary context current on this thread (or fail: no such GPU) */
int tvmrt_cuda_activate(int device_id);
void* tvmrt_cuda_stream(int device_id); /* this thread's stream (NULL: the default) */
int tvmrt_cuda_alloc(int device_id, size_t nbytes, void** out);
int tvmrt_cuda_free(int device_id, void* ptr);
int tvmrt_cuda_sync(int device_id, void* stream);
/* n bytes between compact buffers, one side at least on a GPU (host copies wait) */
int tvmrt_cuda_copy(void* to, size_t to_offset, DLDevice to_dev, const void* from,
                    size_t from_offset, DLDevice from_dev, size_t n);
int tvmrt_cuda_stream_create(int device_id, void** out);
int tvmrt_cuda_stream_free(int device_id, void* stream);
int tvmrt_cuda_set_stream(int device_id, void* stream);

/* the C runtime's device backend for cuda (its functions above, in the device table) */
extern const struct tvmrt_device_backend tvmrt_cuda_backend;

/* opencl.c: kDLOpenCL through libOpenCL.so.1 (any ICD). A memory handle is a
   descriptor of opencl.c (DLTensor.data of an OpenCL array, as TVM's
   cl::BufferDescriptor*: its first member is the cl_mem); tvmrt_opencl_buffer checks one
   is live */
extern const struct tvmrt_device_backend tvmrt_opencl_backend;
/* the driver functions tvmrt calls (OpenCL 1.2's; every cl_* object is a void* here) */
typedef struct {
  int32_t (*get_platform_ids)(uint32_t, void**, uint32_t*);
  int32_t (*get_device_ids)(void*, uint64_t, uint32_t, void**, uint32_t*);
  int32_t (*get_device_info)(void*, uint32_t, size_t, void*, size_t*);
  void* (*create_context)(const intptr_t*, uint32_t, void* const*, void*, void*, int32_t*);
  void* (*create_command_queue)(void*, void*, uint64_t, int32_t*);
  int32_t (*release_command_queue)(void*);
  void* (*create_buffer)(void*, uint64_t, size_t, void*, int32_t*);
  int32_t (*release_mem_object)(void*);
  int32_t (*enqueue_write_buffer)(void*, void*, uint32_t, size_t, size_t, const void*, uint32_t,
                                  const void*, void*);
  int32_t (*enqueue_read_buffer)(void*, void*, uint32_t, size_t, size_t, void*, uint32_t,
                                 const void*, void*);
  int32_t (*enqueue_copy_buffer)(void*, void*, void*, size_t, size_t, size_t, uint32_t, const void*,
                                 void*);
  int32_t (*finish)(void*);
  void* (*create_program_with_source)(void*, uint32_t, const char**, const size_t*, int32_t*);
  void* (*create_program_with_binary)(void*, uint32_t, void* const*, const size_t*,
                                      const unsigned char**, int32_t*, int32_t*);
  int32_t (*build_program)(void*, uint32_t, void* const*, const char*, void*, void*);
  int32_t (*get_program_build_info)(void*, void*, uint32_t, size_t, void*, size_t*);
  int32_t (*release_program)(void*);
  void* (*create_kernel)(void*, const char*, int32_t*);
  int32_t (*release_kernel)(void*);
  int32_t (*set_kernel_arg)(void*, uint32_t, size_t, const void*);
  int32_t (*enqueue_nd_range_kernel)(void*, void*, uint32_t, const size_t*, const size_t*,
                                     const size_t*, uint32_t, const void*, void*);
} tvmrt_opencl_api;
/* the loaded library, or NULL with DeviceUnavailableError set */
const tvmrt_opencl_api* tvmrt_opencl_driver(void);
/* the cl_mem of a live buffer handle (or NULL with an ArrayError naming `what`) */
void* tvmrt_opencl_buffer(const void* handle, const char* what);
/* the cl_context, cl_device_id and this thread's cl_command_queue of opencl(device_id)
   (activated first); 0 or -1 with the error set */
int tvmrt_opencl_device(int device_id, void** context, void** device, void** queue);
/* the error for a cl_int status of `call` ("OpenCL: <call> failed: CL_...") ; returns -1 */
int tvmrt_opencl_error(const char* call, int status);
/* opencl_module.c: the `opencl` entry of a module blob (OpenCL C source or a device binary
   + kernel table) */
tvmrt_module* tvmrt_opencl_module_load(tvmrt_reader* r);

/* nvrtc.c: CUDA C source to PTX for compute capability major.minor (malloc'd, cached on
   disk), or NULL with a ModuleLoadError naming `what`; whether NVRTC can be loaded (0, or
   -1 with the error saying what is missing) */
char* tvmrt_nvrtc_compile(const char* source, int major, int minor, const char* what);
int tvmrt_nvrtc_available(const char* what);

/* kernel_table.c: a device module's kernel table (TVM's FunctionInfo per kernel) and the
   arguments of a call to one of its kernels; CUDA's module reads it (OpenCL's will) */
#define TVMRT_MAX_KERNEL_ARGS 1024
typedef struct {
  char* key;
  int num_args;
  unsigned char* kinds; /* TVMRT_ARG_* (native.h) per argument: how it is packed */
  int slots[16];        /* per valued launch tag: 0-2 grid x/y/z, 3-5 block x/y/z */
  int num_slots, dyn_smem;
} tvmrt_kernel_info;

typedef struct {
  size_t count;
  tvmrt_kernel_info* kernels;
} tvmrt_kernel_table;

/* the table in TVM >= 0.21's layout if the bytes hold it, else the older one; `device`
   ("CUDA") names the module in a refusal, `what` the blob entry in a short read's */
int tvmrt_kernel_table_read(tvmrt_reader* r, const char* device, const char* what,
                            tvmrt_kernel_table* out);
void tvmrt_kernel_table_free(tvmrt_kernel_table* t);
/* the index of the kernel named `name`, or -1 */
ptrdiff_t tvmrt_kernel_table_find(const tvmrt_kernel_table* t, const char* name);
/* a call's n values: the kernel's arguments packed into holder[0..num_args) (8 bytes each,
   TVMRT_MAX_KERNEL_ARGS at most), the grid and block extents into size (x, y, z each; 1
   where not given) and the dynamic shared memory into *smem; a KernelError when they do not
   fit the kernel */
int tvmrt_kernel_call_args(const tvmrt_kernel_info* k, const TVMValue* args, const int* codes,
                           int n, uint64_t* holder, unsigned size[6], unsigned* smem);

/* cuda_module.c: the `cuda` entry of a module blob (PTX, cubin, fatbin or CUDA C source +
   kernel table) */
tvmrt_module* tvmrt_cuda_module_load(tvmrt_reader* r);

/* ---------------------------------------------------------------------------------- */
/* arrays                                                                              */

typedef struct tvmrt_ndarray {
  DLTensor dl; /* first: the handle is &dl */
  tvmrt_object hdr;
  int64_t shape[RT_MAX_NDIM];
  void* alloc;         /* owned memory, or NULL for a view */
  tvmrt_object* owner; /* what keeps a view's memory alive */
  /* a budget the array is charged to (a Relay VM's live bytes): on free, uncharge(charged_to,
     charged), which also releases charged_to; NULL for none */
  void (*uncharge)(tvmrt_object* charged_to, size_t charged);
  tvmrt_object* charged_to;
  size_t charged;
} tvmrt_ndarray;

tvmrt_ndarray* tvmrt_ndarray_from_handle(void* handle);
/* a new CPU array (uninitialised, 64-byte aligned); NULL with an error set */
tvmrt_ndarray* tvmrt_ndarray_empty(const int64_t* shape, int ndim, DLDataType dtype);
/* the same on `dev` (cpu, or cuda: device memory freed with the array) */
tvmrt_ndarray* tvmrt_ndarray_empty_on(const int64_t* shape, int ndim, DLDataType dtype,
                                      DLDevice dev);
/* a view of `dl` (shape copied) whose memory `owner` keeps alive */
tvmrt_ndarray* tvmrt_ndarray_view(const DLTensor* dl, tvmrt_object* owner);
/* devices.c: 0 for the CPU; for a device with a backend, 0 once it is usable on this thread
   (a GPU's context current); else -1 with the error naming the device (`what`: the API
   function) */
int tvmrt_device_ready(int device_type, int device_id, const char* what);

/* devices.c: the table of device backends. A backend serves one DLDeviceType other than the
   CPU's (the host's memory needs none); each function returns 0, or -1 with the error set. */
typedef struct tvmrt_device_backend {
  int device_type;                /* DLDeviceType */
  const char* name;               /* TVM's name of the device type */
  int (*activate)(int device_id); /* the device made usable on this thread */
  int (*alloc)(int device_id, size_t nbytes, void** out);
  int (*free)(int device_id, void* ptr);
  /* n bytes between compact buffers: host and this device, or within this device. Each side
     is its allocation's handle and a byte offset into it (TVM's CopyDataFromTo): a device
     whose handles are not addresses (OpenCL's buffers) cannot take handle + offset */
  int (*copy)(void* to, size_t to_offset, DLDevice to_dev, const void* from, size_t from_offset,
              DLDevice from_dev, size_t n);
  int (*sync)(int device_id, void* stream);
  int (*stream_create)(int device_id, void** out);
  int (*stream_free)(int device_id, void* stream);
  int (*set_stream)(int device_id, void* stream);
  /* whether a memory handle is the device address of its first byte (CUDA's), so that
     handle + offset is the address of a byte in it; 0 where handles are objects (OpenCL's) */
  int handles_are_addresses;
  /* TVM's DeviceAttrKind `kind` of a device (runtime.GetDeviceAttr): an integer (kTVMArgInt)
     or a string (kTVMStr, in a per-thread buffer kept until the thread's next query) in *out,
     kTVMNullptr where the device does not say; a device that does not exist answers kExist
     with 0 and every other kind with kTVMNullptr. NULL: the backend answers nothing */
  int (*attribute)(int device_id, int kind, TVMValue* out, int* code);
} tvmrt_device_backend;

/* the backend of device_type (NULL for the CPU and for a type no backend serves) */
const tvmrt_device_backend* tvmrt_device_backend_of(int device_type);
int tvmrt_device_supported(int64_t device_type); /* the CPU, or a type with a backend */
const char* tvmrt_device_backends(void);         /* "cpu and cuda": for messages */
const tvmrt_device_backend* const* tvmrt_device_backend_list(size_t* count);
#define TVMRT_MAX_DEVICES 64 /* device ids of one type: 0 .. 63 */
/* TVMBackendAllocWorkspace / FreeWorkspace on a backend's device: one pool for all of them
   (free answers 1, no error set, for a pointer the pool did not hand out) */
void* tvmrt_device_workspace_alloc(int device_type, int device_id, uint64_t nbytes);
int tvmrt_device_workspace_free(int device_type, int device_id, void* ptr);
/* the global function __tvm_set_device(device_type, device_id), and the device it selected
   on this thread for device_type (0 if none): where a device module launches */
int tvmrt_set_device(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc);
int tvmrt_current_device(int device_type);
/* the global function runtime.GetDeviceAttr(device_type, device_id, kind), TVM's */
int tvmrt_get_device_attr(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc);
int tvmrt_dtype_bytes(DLDataType t, int64_t count, size_t* out); /* 0, or -1 on overflow */
int tvmrt_tensor_nbytes(const DLTensor* t, size_t* out);
/* whether t is dense row-major (no strides, or the compact ones; TVM's IsContiguous) */
int tvmrt_is_compact(const DLTensor* t);
/* copy with TVM's TVMArrayCopyFromTo checks (CPU, byte sizes equal); arrays with strides
   (of one shape) are copied element by element */
int tvmrt_copy_tensor(const DLTensor* from, DLTensor* to);
int tvmrt_parse_dtype(const char* s, DLDataType* out);

/* ---------------------------------------------------------------------------------- */
/* params.c: tensor records and params blobs, read with the bounded reader (reader.h)   */

/* one tensor record (SaveDLTensor) as a new array */
int tvmrt_read_tensor(tvmrt_reader* r, tvmrt_ndarray** out);

/* a params blob: names and arrays (all owned by the caller: tvmrt_params_free) */
typedef struct {
  size_t count;
  char** names;
  tvmrt_ndarray** arrays; /* NULL when only the names were read */
} tvmrt_params;

/* what tvmrt_params_parse makes of the tensors: arrays of their own (a copy), none (the
   names only), or views of the blob's bytes (valid while `data` lives: for a caller that
   copies them into its own arrays, as load_params does, with no copy in between) */
enum { RT_PARAMS_COPY = 0, RT_PARAMS_NAMES = 1, RT_PARAMS_VIEWS = 2 };
int tvmrt_params_parse(const uint8_t* data, size_t size, int mode, tvmrt_params* out);
void tvmrt_params_free(tvmrt_params* p);
/* a graph or AOT factory's params in the module blob: the count, the names, then one tensor
   record each; a count that disagrees with the names fails as "<what> N params but M names" */
int tvmrt_read_factory_params(tvmrt_reader* r, const char* what, tvmrt_params* out);

/* ---------------------------------------------------------------------------------- */
/* graph executor                                                                      */

#define TVMRT_GE_MAX_DEVICES 8
/* create an executor module from graph JSON text over `lib` on `devs` (the first is where
   entries go whose device_index names none of them; at most TVMRT_GE_MAX_DEVICES) */
tvmrt_module* tvmrt_graph_executor_create(const char* json, size_t json_len, tvmrt_module* lib,
                                          const DLDevice* devs, size_t num_devs);
/* the same with the debug executor's functions (graph_debug.c; TVM's GraphExecutorDebug) */
tvmrt_module* tvmrt_graph_executor_debug_create(const char* json, size_t json_len,
                                                tvmrt_module* lib, const DLDevice* devs,
                                                size_t num_devs);
/* the factory module a "GraphExecutorFactory" blob entry describes */
tvmrt_module* tvmrt_graph_factory_load(tvmrt_reader* r);
/* copy every named array into the executor's inputs of that name (unknown names skipped);
   each must have the input's shape and dtype, or, `embedded` in a factory, its dtype and
   byte count */
int tvmrt_graph_set_params(tvmrt_module* executor, const tvmrt_params* params, int embedded);

/* ---------------------------------------------------------------------------------- */
/* AOT executor                                                                        */

/* aot_meta.c: an AOT build's TVMMetadata (what get_c_metadata returns), checked, copied */
typedef struct {
  char* name;
  int ndim;
  int64_t shape[RT_MAX_NDIM];
  DLDataType dtype;
} tvmrt_aot_tensor;

typedef struct {
  char* mod_name;
  size_t num_inputs, num_outputs;
  tvmrt_aot_tensor* tensors; /* inputs, then outputs */
} tvmrt_aot_meta;

int tvmrt_aot_read_metadata(const void* address, tvmrt_aot_meta* out);
void tvmrt_aot_meta_free(tvmrt_aot_meta* m);

/* aot.c: an executor over the library holding get_c_metadata and the entry (a new
   module); the factory's params copied into the inputs of their names */
tvmrt_module* tvmrt_aot_executor_create(tvmrt_module* lib, DLDevice dev);
int tvmrt_aot_set_params(tvmrt_module* exec, const tvmrt_params* params);

/* aot_factory.c: the "AotExecutorFactory" and "metadata_module" blob entries, and the
   global tvm.aot_executor.create */
tvmrt_module* tvmrt_aot_factory_load(tvmrt_reader* r);
tvmrt_module* tvmrt_aot_metadata_load(tvmrt_reader* r);
int tvmrt_aot_global_create(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc);

/* devices.c: the device of a packed call (DLDevice, or a (type, id) int pair) at `first` */
int tvmrt_device_args(TVMValue* args, int* codes, int first, int n, DLDevice* out, const char* fn);
/* every device of a packed call from argument `first` to the end (at least one, at most
   cap), as tvmrt_device_args reads one */
int tvmrt_device_list(TVMValue* args, int* codes, int first, int n, DLDevice* out, size_t cap,
                      size_t* count, const char* fn);

/* object_types.c: an any-list item of the legacy ABI (TVM's TVMRetValue layout: a TVMValue,
   then its type code), owning what it holds; emptied (its reference released) */
typedef struct {
  TVMValue value;
  int32_t code;
  int32_t pad;
} tvmrt_any_item;
void tvmrt_any_item_clear(tvmrt_any_item* it);

/* registry.c: the functions applications register as globals */
tvmrt_func* tvmrt_registry_find(const char* name); /* new reference or NULL (no error) */
/* the host's (Python's) registered function of that name: a new reference or NULL (no
   error); the host answers with a handle from TVMFuncCreateFromCFunc */
typedef int (*tvmrt_host_lookup_cb)(const char* name, void** out);
TVM_DLL void tvmrt_set_host_registry(tvmrt_host_lookup_cb lookup);
tvmrt_func* tvmrt_registry_find_host(const char* name);
/* every registered name, then the `num_more` names of `more` (TVMFuncListGlobalNames) */
int tvmrt_registry_names(const char* const* more, size_t num_more, int* out_size,
                         const char*** out_array);

/* ---------------------------------------------------------------------------------- */
/* timing.c: TVM's time evaluator                                                      */

#define TVMRT_TIMING_MAX_REPEAT (1 << 20) /* measurements per call: bounds the results */
typedef struct {
  int64_t number, repeat;
  double min_repeat_ms;
  int64_t limit_zero_time_iterations;
  double cooldown_interval_ms;
  int64_t repeats_to_cooldown;
} tvmrt_timing;
/* TVM's six timing arguments (number, repeat, min_repeat_ms, limit_zero_time_iterations,
   cooldown_interval_ms, repeats_to_cooldown; the first `n` given, the rest TVM's defaults),
   checked with the Python runtime's words */
int tvmrt_timing_args(const TVMValue* args, const int* codes, int n, tvmrt_timing* out);
/* CLOCK_MONOTONIC in nanoseconds: the clock of the time evaluator and of the profilers'
   records (Python's perf_counter on Linux) */
uint64_t tvmrt_now_ns(void);
/* seconds per call of `call(ctx)` (0: it ran) for each of t->repeat measurements, into
   `results`; `dev` is synchronized around each measurement */
int tvmrt_time_evaluate(int (*call)(void* ctx), void* ctx, DLDevice dev, const tvmrt_timing* t,
                        double* results);

/* globals.c: any global function (registered, built-in, C-implemented contrib) */
tvmrt_func* tvmrt_registry_get(const char* name); /* new reference or NULL (no error) */

#endif /* TVMRT_NATIVE_RUNTIME_RT_H_ */
