/* The C metadata a packed-interface AOT build carries (TVM's tvm/runtime/metadata_types.h):
 * names, shapes and dtypes of its inputs and outputs, its pools and its constants. */
#ifndef TVM_RUNTIME_METADATA_TYPES_H_
#define TVM_RUNTIME_METADATA_TYPES_H_
#include <stdint.h>
#include "tvm/runtime/c_runtime_api.h"
struct TVMTensorInfo {
  const char* name;
  const int64_t* shape;
  int64_t num_shape;
  DLDataType dtype;
};
struct TVMConstantInfo {
  const char* name_hint;
  int64_t byte_offset;
  int64_t data_len;
  const void* data_bytes;
};
struct TVMMetadata {
  int64_t version;
  const struct TVMTensorInfo* inputs;
  int64_t num_inputs;
  const struct TVMTensorInfo* outputs;
  int64_t num_outputs;
  const struct TVMTensorInfo* workspace_pools;
  int64_t num_workspace_pools;
  const struct TVMConstantInfo* constant_pools;
  int64_t num_constant_pools;
  const char* mod_name;
};
#endif
