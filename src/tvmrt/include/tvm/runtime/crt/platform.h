/* The platform hooks a port implements (TVM's tvm/runtime/crt/platform.h). tvmrt's micro
 * runtime calls only TVMPlatformMemoryAllocate/Free (for TVMBackendAllocWorkspace) and
 * TVMPlatformAbort; the others are for firmware and ports that use them. */
#ifndef TVM_RUNTIME_CRT_PLATFORM_H_
#define TVM_RUNTIME_CRT_PLATFORM_H_

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "dlpack/dlpack.h"
#include "tvm/runtime/crt/error_codes.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Called on an unrecoverable error; does not return. */
void __attribute__((noreturn)) TVMPlatformAbort(tvm_crt_error_t code);

/* vsnprintf's contract: writes at most out_buf_size_bytes (with the NUL), returns the
 * length written. */
size_t TVMPlatformFormatMessage(char* out_buf, size_t out_buf_size_bytes, const char* fmt,
                                va_list args);

/* num_bytes on dev (the CPU) into *out_ptr. */
tvm_crt_error_t TVMPlatformMemoryAllocate(size_t num_bytes, DLDevice dev, void** out_ptr);
tvm_crt_error_t TVMPlatformMemoryFree(void* ptr, DLDevice dev);

tvm_crt_error_t TVMPlatformTimerStart(void);
tvm_crt_error_t TVMPlatformTimerStop(double* elapsed_time_seconds);
tvm_crt_error_t TVMPlatformBeforeMeasurement(void);
tvm_crt_error_t TVMPlatformAfterMeasurement(void);
tvm_crt_error_t TVMPlatformGenerateRandom(uint8_t* buffer, size_t num_bytes);
tvm_crt_error_t TVMPlatformInitialize(void);

#ifdef __cplusplus
}
#endif

#endif /* TVM_RUNTIME_CRT_PLATFORM_H_ */
