/*
 * The rest of TVM 0.19's C API in libtvmrt_runtime, checked from C:
 *
 *   interop checks          DLPack in and out (each deleter runs exactly once), DLPack
 *                           refusals (the caller keeps the tensor), type indices of live
 *                           handles, scoped allocation, run-once, the env C API's refusals,
 *                           the any-list helpers; prints "ok"
 *   interop types KEY...    one line per key, index 0..15 and derived pair, in the format
 *                           the test's TVM 0.19 probe prints, to compare the two
 *   interop throw           TVMThrowLastError after an error: must end the program
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/c_runtime_api.h>
#include "check.h"

static int g_failed;

/* a call that must fail with a message containing `words` */
#define REFUSED(call, words)                                                                       \
  do {                                                                                             \
    int rc_ = (call);                                                                              \
    EXPECT(rc_ == -1);                                                                             \
    if (rc_ == -1 && strstr(TVMGetLastError(), words) == NULL) {                                   \
      fprintf(stderr, "%s:%d: %s: error '%s' lacks '%s'\n", __FILE__, __LINE__, #call,             \
              TVMGetLastError(), words);                                                           \
      g_failed = 1;                                                                                \
    }                                                                                              \
  } while (0)

/* ------------------------------------------------------------------------------------ */
/* a producer's tensor, as PyTorch or ONNX Runtime would hand one over                    */

typedef struct {
  DLManagedTensor managed;
  int64_t shape[2];
  int64_t strides[2];
  float* data;
  int* deleted;
} producer;

static void producer_deleter(DLManagedTensor* self) {
  producer* p = (producer*)self->manager_ctx;
  ++*p->deleted;
  free(p->data);
  free(p);
}

static producer* make_tensor(int* deleted) {
  producer* p = (producer*)calloc(1, sizeof(producer));
  int i;
  if (p == NULL) exit(1);
  p->data = (float*)aligned_alloc(64, 64 * sizeof(float));
  if (p->data == NULL) exit(1);
  for (i = 0; i < 6; ++i) p->data[i] = 0.5f * (float)i - 1.0f;
  p->shape[0] = 2;
  p->shape[1] = 3;
  p->deleted = deleted;
  p->managed.dl_tensor.data = p->data;
  p->managed.dl_tensor.device.device_type = kDLCPU;
  p->managed.dl_tensor.ndim = 2;
  p->managed.dl_tensor.dtype.code = kDLFloat;
  p->managed.dl_tensor.dtype.bits = 32;
  p->managed.dl_tensor.dtype.lanes = 1;
  p->managed.dl_tensor.shape = p->shape;
  p->managed.manager_ctx = p;
  p->managed.deleter = producer_deleter;
  return p;
}

static void check_dlpack(void) {
  int deleted = 0;
  producer* p = make_tensor(&deleted);
  TVMArrayHandle arr, copy;
  DLManagedTensor* out;
  float got[6];
  unsigned tindex = 0;
  int64_t shape[2] = {2, 3};

  /* in: the array views the producer's memory, then hands it back through DLPack */
  CHECK(TVMArrayFromDLPack(&p->managed, &arr));
  EXPECT(arr->data == (void*)p->data && arr->ndim == 2 && arr->shape[1] == 3);
  EXPECT(arr->shape != p->shape); /* the shape is the array's own copy */
  CHECK(TVMArrayCopyToBytes(arr, got, sizeof(got)));
  EXPECT(memcmp(got, p->data, sizeof(got)) == 0);
  CHECK(TVMArrayGetTypeIndex(arr, &tindex));
  EXPECT(tindex == 2);
  CHECK(TVMArrayToDLPack(arr, &out));
  EXPECT(out->dl_tensor.data == (void*)p->data && out->dl_tensor.shape[0] == 2);
  CHECK(TVMArrayFree(arr));
  EXPECT(deleted == 0); /* the exported tensor still holds the array */
  got[0] = 0.0f;
  memcpy(got, out->dl_tensor.data, sizeof(got));
  EXPECT(got[1] == -0.5f);
  TVMDLManagedTensorCallDeleter(out);
  EXPECT(deleted == 1);

  /* out: an array of the runtime's own, read through DLPack after its handle is freed */
  CHECK(TVMArrayAlloc(shape, 2, kDLFloat, 32, 1, kDLCPU, 0, &copy));
  CHECK(TVMArrayCopyFromBytes(copy, got, sizeof(got)));
  CHECK(TVMArrayToDLPack(copy, &out));
  CHECK(TVMArrayFree(copy));
  EXPECT(((float*)out->dl_tensor.data)[1] == -0.5f && out->dl_tensor.ndim == 2);
  TVMDLManagedTensorCallDeleter(out);
  REFUSED(TVMArrayGetTypeIndex(copy, &tindex), "not a live array");

  /* refusals: the caller keeps its tensor (no deleter call) */
  deleted = 0;
  p = make_tensor(&deleted);
  p->managed.dl_tensor.byte_offset = 4;
  REFUSED(TVMArrayFromDLPack(&p->managed, &arr), "not aligned");
  p->managed.dl_tensor.byte_offset = 0;
  p->strides[0] = 1;
  p->strides[1] = 2; /* a transposed view */
  p->managed.dl_tensor.strides = p->strides;
  REFUSED(TVMArrayFromDLPack(&p->managed, &arr), "must be contiguous");
  p->strides[0] = 3;
  p->strides[1] = 1; /* compact strides are fine */
  p->managed.dl_tensor.device.device_type = kDLCUDA;
  REFUSED(TVMArrayFromDLPack(&p->managed, &arr), "DeviceUnavailableError");
  p->managed.dl_tensor.device.device_type = kDLCPU;
  p->shape[0] = -2;
  REFUSED(TVMArrayFromDLPack(&p->managed, &arr), "negative or too large");
  p->shape[0] = 2;
  p->managed.dl_tensor.ndim = 40;
  REFUSED(TVMArrayFromDLPack(&p->managed, &arr), "ndim 40");
  p->managed.dl_tensor.ndim = 2;
  REFUSED(TVMArrayFromDLPack(NULL, &arr), "required");
  EXPECT(deleted == 0);
  CHECK(TVMArrayFromDLPack(&p->managed, &arr)); /* with its compact strides */
  CHECK(TVMArrayCopyToBytes(arr, got, sizeof(got)));
  EXPECT(got[5] == 1.5f);
  CHECK(TVMArrayFree(arr));
  EXPECT(deleted == 1);
  TVMDLManagedTensorCallDeleter(NULL); /* nothing to delete */
}

/* ------------------------------------------------------------------------------------ */

static int count_calls(TVMValue* args, int* codes, int n, TVMRetValueHandle ret, void* res) {
  TVMValue v;
  int code = kTVMArgInt;
  (void)args;
  (void)codes;
  v.v_int64 = n + (*(int*)res += 1);
  return TVMCFuncSetReturn(ret, &v, &code, 1);
}

static void finalize(void* res) { *(int*)res = -100; }

static void check_objects(void) {
  int state = 0;
  unsigned tindex = 0;
  TVMFunctionHandle f, syslib;
  TVMModuleHandle mod;
  TVMValue ret;
  int code;
  CHECK(TVMFuncCreateFromCFunc(count_calls, &state, finalize, &f));
  CHECK(TVMObjectGetTypeIndex(f, &tindex));
  EXPECT(tindex == 7);
  CHECK(TVMFuncGetGlobal("runtime.SystemLib", &syslib));
  CHECK(TVMFuncCall(syslib, NULL, NULL, 0, &ret, &code));
  EXPECT(code == kTVMModuleHandle);
  mod = ret.v_handle;
  CHECK(TVMObjectGetTypeIndex(mod, &tindex));
  EXPECT(tindex == 1);
  CHECK(TVMModFree(mod));
  CHECK(TVMFuncFree(syslib));
  /* a Relay VM tuple (runtime.Tuple with no fields) is TVM's runtime.ADT, 11 */
  CHECK(TVMFuncGetGlobal("runtime.Tuple", &syslib));
  CHECK(TVMFuncCall(syslib, NULL, NULL, 0, &ret, &code));
  EXPECT(code == kTVMObjectHandle);
  CHECK(TVMObjectGetTypeIndex(ret.v_handle, &tindex));
  EXPECT(tindex == 11);
  CHECK(TVMObjectFree(ret.v_handle));
  CHECK(TVMFuncFree(syslib));
  REFUSED(TVMObjectGetTypeIndex(&state, &tindex), "not a live module, function or ADT");
  CHECK(TVMFuncFree(f));
  EXPECT(state == -100);
  REFUSED(TVMObjectGetTypeIndex(f, &tindex), "not a live module, function or ADT");
  EXPECT(TVMGetLastBacktrace() == NULL);
}

static void check_scoped_alloc(void) {
  DLDevice cpu = {kDLCPU, 0}, vulkan = {kDLVulkan, 0};
  DLDataType f32 = {kDLFloat, 32, 1}, wide = {kDLFloat, 64, 16};
  int64_t shape[2] = {5, 7}, bad[2] = {5, -1};
  void* p = NULL;
  CHECK(TVMDeviceAllocDataSpaceWithScope(cpu, 2, shape, f32, "global", &p));
  EXPECT(p != NULL && (uintptr_t)p % 64 == 0);
  memset(p, 0x5a, 5 * 7 * 4); /* all of it is there (ASan checks) */
  CHECK(TVMDeviceFreeDataSpace(cpu, p));
  CHECK(TVMDeviceAllocDataSpaceWithScope(cpu, 2, shape, wide, NULL, &p));
  EXPECT((uintptr_t)p % 128 == 0); /* TVM's alignment: the element's bytes when above 64 */
  memset(p, 0, 5 * 7 * 128);
  CHECK(TVMDeviceFreeDataSpace(cpu, p));
  CHECK(TVMDeviceAllocDataSpaceWithScope(cpu, 0, NULL, f32, "", &p));
  CHECK(TVMDeviceFreeDataSpace(cpu, p));
  REFUSED(TVMDeviceAllocDataSpaceWithScope(cpu, 2, shape, f32, "global.texture", &p),
          "specified memory scope: global.texture");
  REFUSED(TVMDeviceAllocDataSpaceWithScope(cpu, 2, bad, f32, "global", &p), "negative");
  REFUSED(TVMDeviceAllocDataSpaceWithScope(cpu, 33, shape, f32, "global", &p), "ndim 33");
  REFUSED(TVMDeviceAllocDataSpaceWithScope(vulkan, 2, shape, f32, "global", &p), "no backend");
}

static int once_body(void* cdata) { return ++*(int*)cdata == 1 ? 0 : -1; }

static void check_backend(void) {
  static void* handle; /* a kernel's static slot */
  int runs = 0;
  CHECK(TVMBackendRunOnce(&handle, once_body, &runs, 0));
  CHECK(TVMBackendRunOnce(&handle, once_body, &runs, 0));
  EXPECT(runs == 1 && handle != NULL);
  REFUSED(TVMBackendRegisterEnvCAPI("PyErr_CheckSignals", (void*)&runs), "runs no Python");
  REFUSED(TVMBackendRegisterEnvCAPI("PyGILState_Ensure", NULL), "UnsupportedError");
  REFUSED(TVMBackendRegisterEnvCAPI("printf", NULL), "Unknown env API printf");
}

/* TVMRetValue's layout: the value, then its type code */
typedef struct {
  TVMValue value;
  int32_t code;
  int32_t pad;
} any_item;

static void check_anylist(void) {
  any_item list[3];
  TVMValue vals[2], ret;
  int codes[2], code, state = 0, i;
  TVMFunctionHandle f;
  TVMByteArray bytes = {"a\0b", 3};
  char text[8] = "hello";
  for (i = 0; i < 3; ++i) {
    list[i].value.v_handle = NULL;
    list[i].code = kTVMNullptr;
  }
  /* an object: the list takes the return value's reference, lends it as an argument */
  CHECK(TVMFuncCreateFromCFunc(count_calls, &state, finalize, &f));
  vals[0].v_handle = f;
  codes[0] = kTVMPackedFuncHandle;
  CHECK(TVMBackendAnyListMoveFromPackedReturn(list, 1, vals, codes, 0));
  vals[1].v_handle = NULL;
  CHECK(TVMBackendAnyListSetPackedArg(list, 1, vals, codes, 1));
  EXPECT(vals[1].v_handle == f && codes[1] == kTVMPackedFuncHandle);
  CHECK(TVMFuncCall(vals[1].v_handle, NULL, NULL, 0, &ret, &code));
  EXPECT(code == kTVMArgInt && ret.v_int64 == 1);
  CHECK(TVMBackendAnyListResetItem(list, 1));
  EXPECT(state == -100); /* the list held the last reference */
  EXPECT(list[1].code == kTVMNullptr);
  /* a string is copied in */
  vals[0].v_str = text;
  codes[0] = kTVMStr;
  CHECK(TVMBackendAnyListMoveFromPackedReturn(list, 0, vals, codes, 0));
  text[0] = 'j';
  CHECK(TVMBackendAnyListSetPackedArg(list, 0, vals, codes, 1));
  EXPECT(codes[1] == kTVMStr && strcmp(vals[1].v_str, "hello") == 0);
  /* bytes are kept, but TVM passes none as an argument */
  vals[0].v_handle = &bytes;
  codes[0] = kTVMBytes;
  CHECK(TVMBackendAnyListMoveFromPackedReturn(list, 2, vals, codes, 0));
  EXPECT(list[2].code == kTVMBytes && ((TVMByteArray*)list[2].value.v_handle)->size == 3);
  REFUSED(TVMBackendAnyListSetPackedArg(list, 2, vals, codes, 1), "holds bytes");
  /* a plain value replaces the string (freed) */
  vals[0].v_int64 = 42;
  codes[0] = kTVMArgInt;
  CHECK(TVMBackendAnyListMoveFromPackedReturn(list, 0, vals, codes, 0));
  CHECK(TVMBackendAnyListSetPackedArg(list, 0, vals, codes, 1));
  EXPECT(codes[1] == kTVMArgInt && vals[1].v_int64 == 42);
  vals[0].v_handle = &state; /* not an object of this runtime */
  codes[0] = kTVMPackedFuncHandle;
  REFUSED(TVMBackendAnyListMoveFromPackedReturn(list, 0, vals, codes, 0), "not a live object");
  REFUSED(TVMBackendAnyListResetItem(list, -1), "index >= 0");
  for (i = 0; i < 3; ++i) CHECK(TVMBackendAnyListResetItem(list, i));
}

/* ------------------------------------------------------------------------------------ */

static void print_types(int n, char** keys) {
  int i;
  unsigned c, p;
  for (i = 0; i < n; ++i) {
    unsigned idx = 0;
    int rc = TVMObjectTypeKey2Index(keys[i], &idx);
    printf("key %s %d %u\n", keys[i], rc, rc == 0 ? idx : 0u);
  }
  for (c = 0; c < 16; ++c) {
    char* key = NULL;
    int rc = TVMObjectTypeIndex2Key(c, &key);
    printf("index %u %d %s\n", c, rc, rc == 0 ? key : "-");
    free(key);
  }
  for (c = 0; c < 16; ++c) {
    for (p = 0; p < 16; ++p) {
      int d = 0, rc = TVMObjectDerivedFrom(c, p, &d);
      printf("derived %u %u %d %d\n", c, p, rc, rc == 0 ? d : 0);
    }
  }
}

int main(int argc, char** argv) {
  if (argc >= 2 && strcmp(argv[1], "types") == 0) {
    print_types(argc - 2, argv + 2);
    return 0;
  }
  if (argc == 2 && strcmp(argv[1], "throw") == 0) {
    TVMAPISetLastError("the error to throw");
    TVMThrowLastError();
    printf("returned\n");
    return 0;
  }
  if (argc != 2 || strcmp(argv[1], "checks") != 0) {
    fprintf(stderr, "usage: interop checks | types KEY... | throw\n");
    return 2;
  }
  check_dlpack();
  check_objects();
  check_scoped_alloc();
  check_backend();
  check_anylist();
  if (g_failed) return 1;
  printf("ok\n");
  return 0;
}
