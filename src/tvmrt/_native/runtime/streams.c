/*
 * TVM's stream API: TVMStreamCreate/Free, TVMSetStream, TVMSynchronize,
 * TVMStreamStreamSynchronize. The CPU has no streams (they succeed and do nothing); a device's
 * are its backend's (devices.c; a CUDA GPU's are CUstreams, the current one per thread).
 */
#include "rt.h"

TVM_DLL int TVMStreamCreate(int device_type, int device_id, TVMStreamHandle* out) {
  const tvmrt_device_backend* b;
  if (tvmrt_device_ready(device_type, device_id, "TVMStreamCreate") != 0) return -1;
  if (out == NULL) return tvmrt_fail("InvalidArgumentError", "TVMStreamCreate: out is required");
  *out = NULL;
  b = tvmrt_device_backend_of(device_type);
  return b != NULL ? b->stream_create(device_id, out) : 0;
}

TVM_DLL int TVMStreamFree(int device_type, int device_id, TVMStreamHandle stream) {
  const tvmrt_device_backend* b;
  if (tvmrt_device_ready(device_type, device_id, "TVMStreamFree") != 0) return -1;
  b = tvmrt_device_backend_of(device_type);
  return b != NULL ? b->stream_free(device_id, stream) : 0;
}

TVM_DLL int TVMSetStream(int device_type, int device_id, TVMStreamHandle handle) {
  const tvmrt_device_backend* b;
  if (tvmrt_device_ready(device_type, device_id, "TVMSetStream") != 0) return -1;
  b = tvmrt_device_backend_of(device_type);
  return b != NULL ? b->set_stream(device_id, handle) : 0;
}

TVM_DLL int TVMSynchronize(int device_type, int device_id, TVMStreamHandle stream) {
  const tvmrt_device_backend* b;
  if (tvmrt_device_ready(device_type, device_id, "TVMSynchronize") != 0) return -1;
  b = tvmrt_device_backend_of(device_type);
  return b != NULL ? b->sync(device_id, stream) : 0;
}

TVM_DLL int TVMStreamStreamSynchronize(int device_type, int device_id, TVMStreamHandle src,
                                       TVMStreamHandle dst) {
  const tvmrt_device_backend* b;
  (void)dst; /* dst waits for src: waiting for src on the host orders them */
  if (tvmrt_device_ready(device_type, device_id, "TVMStreamStreamSynchronize") != 0) return -1;
  b = tvmrt_device_backend_of(device_type);
  return b != NULL ? b->sync(device_id, src) : 0;
}
