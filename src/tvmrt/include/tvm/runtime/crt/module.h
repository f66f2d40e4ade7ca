/* A CRT module (TVM's tvm/runtime/crt/module.h): a system library's function table, as
 * its generated TVMSystemLibEntryPoint returns it. */
#ifndef TVM_RUNTIME_CRT_MODULE_H_
#define TVM_RUNTIME_CRT_MODULE_H_

#include "tvm/runtime/c_backend_api.h"
#include "tvm/runtime/crt/func_registry.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct TVMModule {
  const TVMFuncRegistry* registry;
} TVMModule;

const TVMModule* TVMSystemLibEntryPoint(void);

#ifdef __cplusplus
}
#endif

#endif /* TVM_RUNTIME_CRT_MODULE_H_ */
