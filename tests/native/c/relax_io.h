/*
 * What the Relax VM test programs (run_relax.c, relax_checks.c) share: a model.so loaded
 * into a `relax.VirtualMachine` the way TVM's C++ deployment does it (TVMModLoadFromFile,
 * vm_load_executable, vm_initialization on the CPU with the pooled allocator), an input
 * tensor read from a spec line, and a result walked depth first (tuples through
 * runtime.ArraySize / runtime.ArrayGetItem, shapes through runtime.GetShapeTupleSize /
 * GetShapeTupleElem) into files the pytest side compares bit for bit with the goldens.
 */
#ifndef TVMRT_TESTS_RELAX_IO_H_
#define TVMRT_TESTS_RELAX_IO_H_

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tvm/runtime/c_runtime_api.h>
#include "model_io.h"

typedef struct {
  TVMModuleHandle exe, vm;
} rx_model;

/* mod[name](args...) (the function handle freed after); the call must succeed */
static inline void rx_call(TVMModuleHandle mod, const char* name, TVMValue* args, int* codes, int n,
                           TVMValue* ret, int* code) {
  TVMFunctionHandle f = get(mod, name);
  CHECK(TVMFuncCall(f, args, codes, n, ret, code));
  CHECK(TVMFuncFree(f));
}

/* a new VirtualMachine over exe; 0, or -1 with TVM's last error when vm_initialization
   refuses (nothing is left allocated then) */
static inline int rx_new_vm(TVMModuleHandle exe, TVMModuleHandle* out) {
  TVMFunctionHandle init;
  TVMValue args[3], ret;
  int codes[3] = {kDLInt, kDLInt, kDLInt}, code, status;
  rx_call(exe, "vm_load_executable", args, codes, 0, &ret, &code);
  if (code != kTVMModuleHandle) {
    fprintf(stderr, "vm_load_executable returned type code %d\n", code);
    exit(1);
  }
  *out = ret.v_handle;
  init = get(*out, "vm_initialization");
  args[0].v_int64 = kDLCPU;
  args[1].v_int64 = 0;
  args[2].v_int64 = 2; /* the pooled allocator */
  status = TVMFuncCall(init, args, codes, 3, &ret, &code);
  CHECK(TVMFuncFree(init));
  if (status != 0) {
    CHECK(TVMModFree(*out));
    *out = NULL;
  }
  return status;
}

/* load model.so and make its VM: 0, or -1 after printing why TVMModLoadFromFile or
   vm_initialization refused (nothing is left allocated then) */
static inline int rx_load(const char* path, rx_model* m) {
  m->exe = m->vm = NULL;
  if (TVMModLoadFromFile(path, "", &m->exe) != 0) {
    printf("TVMModLoadFromFile failed: %s\n", TVMGetLastError());
    m->exe = NULL;
    return -1;
  }
  if (rx_new_vm(m->exe, &m->vm) != 0) {
    printf("vm_initialization failed: %s\n", TVMGetLastError());
    CHECK(TVMModFree(m->exe));
    m->exe = NULL;
    return -1;
  }
  return 0;
}

static inline void rx_free(rx_model* m) {
  if (m->vm != NULL) CHECK(TVMModFree(m->vm));
  if (m->exe != NULL) CHECK(TVMModFree(m->exe));
  m->vm = m->exe = NULL;
}

/* `tensor CODE BITS NDIM DIMS... FILE`: a CPU array holding FILE's bytes */
static inline TVMArrayHandle rx_read_tensor(const char* line) {
  int dcode, bits, ndim, i, off = 0;
  int64_t shape[32];
  char file[4096];
  size_t n;
  char* data;
  TVMArrayHandle arr;
  if (sscanf(line, "tensor %d %d %d%n", &dcode, &bits, &ndim, &off) != 3 || ndim > 32) exit(2);
  line += off;
  for (i = 0; i < ndim; ++i) {
    long long d;
    if (sscanf(line, "%lld%n", &d, &off) != 1) exit(2);
    shape[i] = d;
    line += off;
  }
  if (sscanf(line, "%4095s", file) != 1) exit(2);
  data = read_file(file, &n);
  CHECK(TVMArrayAlloc(shape, ndim, dcode, bits, 1, kDLCPU, 0, &arr));
  CHECK(TVMArrayCopyFromBytes(arr, data, n));
  free(data);
  return arr;
}

static inline size_t rx_nbytes(const DLTensor* t) {
  size_t n = (size_t)(t->dtype.bits * t->dtype.lanes + 7) / 8;
  int i;
  for (i = 0; i < t->ndim; ++i) n *= (size_t)t->shape[i];
  return n;
}

/* a leaf of a result: DIR/NAME_K.bin (its bytes) and DIR/NAME_K.txt ("KIND CODE BITS NDIM
   DIMS...", KIND tensor, shape (int64 dims) or int) */
static inline void rx_write_leaf(const char* dir, const char* name, int k, const char* kind,
                                 const DLTensor* t) {
  char path[4096];
  FILE* f;
  int i;
  snprintf(path, sizeof(path), "%s/%s_%d.bin", dir, name, k);
  f = fopen(path, "wb");
  if (f == NULL) exit(4);
  fwrite((const char*)t->data + t->byte_offset, 1, rx_nbytes(t), f);
  fclose(f);
  snprintf(path, sizeof(path), "%s/%s_%d.txt", dir, name, k);
  f = fopen(path, "w");
  if (f == NULL) exit(4);
  fprintf(f, "%s %d %d %d", kind, t->dtype.code, t->dtype.bits, t->ndim);
  for (i = 0; i < t->ndim; ++i) fprintf(f, " %lld", (long long)t->shape[i]);
  fprintf(f, "\n");
  fclose(f);
}

/* the globals that read the VM's objects */
typedef struct {
  TVMFunctionHandle array_size, array_item, shape_size, shape_elem;
} rx_readers;

static inline void rx_readers_get(rx_readers* r) {
  CHECK(TVMFuncGetGlobal("runtime.ArraySize", &r->array_size));
  CHECK(TVMFuncGetGlobal("runtime.ArrayGetItem", &r->array_item));
  CHECK(TVMFuncGetGlobal("runtime.GetShapeTupleSize", &r->shape_size));
  CHECK(TVMFuncGetGlobal("runtime.GetShapeTupleElem", &r->shape_elem));
}

static inline void rx_readers_free(rx_readers* r) {
  CHECK(TVMFuncFree(r->array_size));
  CHECK(TVMFuncFree(r->array_item));
  CHECK(TVMFuncFree(r->shape_size));
  CHECK(TVMFuncFree(r->shape_elem));
}

/* the size of a tuple object (>= 0), or -1 when it is none (runtime.ArraySize refuses it) */
static inline int64_t rx_tuple_size(const rx_readers* r, TVMObjectHandle obj) {
  TVMValue a, ret;
  int c = kTVMObjectHandle, rc;
  a.v_handle = obj;
  if (TVMFuncCall(r->array_size, &a, &c, 1, &ret, &rc) != 0) return -1;
  return ret.v_int64;
}

static inline void rx_append(char* text, size_t cap, const char* s) {
  size_t used = strlen(text);
  snprintf(text + used, cap - used, "%s", s);
}

/* Write one result (and free it: the handle is the caller's): tensors and shapes as leaves
   numbered from *k, tuples walked depth first; `structure` receives it as JSON in the
   words of case.json's output_structure ("tensor", "shape", [...]). */
static inline void rx_walk(const rx_readers* r, TVMValue v, int code, const char* dir,
                           const char* name, int* k, char* structure, size_t cap) {
  TVMValue a[2], ret;
  int c[2], rc;
  int64_t n, i;
  if (code == kTVMNDArrayHandle) {
    rx_write_leaf(dir, name, (*k)++, "tensor", (DLTensor*)v.v_handle);
    rx_append(structure, cap, "\"tensor\"");
    CHECK(TVMArrayFree(v.v_handle));
    return;
  }
  if (code == kDLInt) {
    int64_t x = v.v_int64, zero = 0;
    DLTensor t;
    memset(&t, 0, sizeof(t));
    t.data = &x;
    t.dtype.code = kDLInt;
    t.dtype.bits = 64;
    t.dtype.lanes = 1;
    t.shape = &zero;
    rx_write_leaf(dir, name, (*k)++, "int", &t);
    rx_append(structure, cap, "\"int\"");
    return;
  }
  if (code != kTVMObjectHandle) {
    fprintf(stderr, "%s: a result of type code %d\n", name, code);
    exit(3);
  }
  a[0] = v;
  c[0] = kTVMObjectHandle;
  n = rx_tuple_size(r, v.v_handle);
  if (n >= 0) {
    rx_append(structure, cap, "[");
    for (i = 0; i < n; ++i) {
      a[1].v_int64 = i;
      c[1] = kDLInt;
      CHECK(TVMFuncCall(r->array_item, a, c, 2, &ret, &rc));
      if (i) rx_append(structure, cap, ", ");
      rx_walk(r, ret, rc, dir, name, k, structure, cap);
    }
    rx_append(structure, cap, "]");
  } else { /* a shape: its dims as an int64 vector, as the goldens hold it */
    int64_t dims[64], ndim;
    DLTensor t;
    CHECK(TVMFuncCall(r->shape_size, a, c, 1, &ret, &rc));
    ndim = ret.v_int64;
    if (ndim < 0 || ndim > 64) exit(3);
    for (i = 0; i < ndim; ++i) {
      a[1].v_int64 = i;
      c[1] = kDLInt;
      CHECK(TVMFuncCall(r->shape_elem, a, c, 2, &ret, &rc));
      dims[i] = ret.v_int64;
    }
    memset(&t, 0, sizeof(t));
    t.data = dims;
    t.ndim = 1;
    t.shape = &ndim;
    t.dtype.code = kDLInt;
    t.dtype.bits = 64;
    t.dtype.lanes = 1;
    rx_write_leaf(dir, name, (*k)++, "shape", &t);
    rx_append(structure, cap, "\"shape\"");
  }
  CHECK(TVMObjectFree(v.v_handle));
}

/* DIR/NAME.json: the structure text */
static inline void rx_write_structure(const char* dir, const char* name, const char* text) {
  char path[4096];
  FILE* f;
  snprintf(path, sizeof(path), "%s/%s.json", dir, name);
  f = fopen(path, "w");
  if (f == NULL) exit(4);
  fprintf(f, "%s\n", text);
  fclose(f);
}

#endif /* TVMRT_TESTS_RELAX_IO_H_ */
