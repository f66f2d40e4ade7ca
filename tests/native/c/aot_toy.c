/*
 * An AOT kernel library made by tests/native/test_c_aot.py (built with `cc -shared`): what
 * a Relay AOT build exports for the C++ runtime interface, `get_c_metadata` (a packed
 * function returning TVM's TVMMetadata struct, version 1) and the entry
 * `tvmgen_default___tvm_main__` (here: out = x + 1 on float32 (2, 3)). Each -DMETA_<CASE>
 * spoils one field of the metadata, for the runtime to refuse clearly.
 */
#include <stdint.h>
#include <string.h>

#include <tvm/runtime/c_runtime_api.h>

typedef struct {
  const char* name;
  const int64_t* shape;
  int64_t num_shape;
  DLDataType dtype;
} TensorInfo;

typedef struct {
  int64_t version;
  const TensorInfo* inputs;
  int64_t num_inputs;
  const TensorInfo* outputs;
  int64_t num_outputs;
  const TensorInfo* workspace_pools;
  int64_t num_workspace_pools;
  const void* constant_pools;
  int64_t num_constant_pools;
  const char* mod_name;
} Metadata;

static int64_t g_shape[2] = {2, 3};
static int64_t g_spoiled[2] = {2, -3};
static int64_t g_huge[2] = {1LL << 30, 1LL << 30};
static char g_long_name[5000];
static TensorInfo g_inputs[1] = {{"x", g_shape, 2, {kDLFloat, 32, 1}}};
static TensorInfo g_outputs[1] = {{"output0", g_shape, 2, {kDLFloat, 32, 1}}};
static Metadata g_meta = {1, g_inputs, 1, g_outputs, 1, NULL, 0, NULL, 0, "tvmgen_default"};

static void spoil(void) {
#if defined(META_VERSION)
  g_meta.version = 2;
#elif defined(META_POOLS)
  g_meta.num_workspace_pools = 1;
  g_meta.workspace_pools = g_inputs;
#elif defined(META_COUNT)
  g_meta.num_inputs = -1;
#elif defined(META_MANY)
  g_meta.num_outputs = 1LL << 40;
#elif defined(META_RANK)
  g_inputs[0].num_shape = 40;
#elif defined(META_DIM)
  g_outputs[0].shape = g_spoiled;
#elif defined(META_DTYPE)
  g_inputs[0].dtype.lanes = 0;
#elif defined(META_HUGE)
  g_inputs[0].shape = g_huge;
#elif defined(META_NAME)
  memset(g_long_name, 'a', sizeof(g_long_name));
  g_inputs[0].name = g_long_name;
#elif defined(META_NULL_LIST)
  g_meta.outputs = NULL;
#endif
}

int get_c_metadata(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* res) {
  (void)args, (void)codes, (void)n, (void)res;
  spoil();
#if defined(META_NULL)
  ret->v_handle = NULL;
#else
  ret->v_handle = &g_meta;
#endif
  *ret_code = kTVMOpaqueHandle;
  return 0;
}

int tvmgen_default___tvm_main__(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code,
                                void* res) {
  const DLTensor *x, *out;
  int i;
  (void)ret, (void)ret_code, (void)res;
  if (n != 2 || codes[0] != kTVMDLTensorHandle || codes[1] != kTVMDLTensorHandle) {
    TVMAPISetLastError("tvmgen_default___tvm_main__: expected two DLTensor arguments");
    return -1;
  }
  x = (const DLTensor*)args[0].v_handle;
  out = (const DLTensor*)args[1].v_handle;
  for (i = 0; i < 6; ++i) ((float*)out->data)[i] = ((const float*)x->data)[i] + 1.0f;
  return 0;
}
