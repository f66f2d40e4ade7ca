/*
 * tvmrt's tvm/runtime/logging.h: the exception the C++ layer throws, tvm::runtime::Error
 * (a std::runtime_error, as TVM's), carrying the runtime's TVMGetLastError() text.
 * TVM's LOG/ICHECK macros are not provided.
 */
#ifndef TVMRT_TVM_RUNTIME_LOGGING_H_
#define TVMRT_TVM_RUNTIME_LOGGING_H_

#include <tvm/runtime/c_runtime_api.h>

#include <stdexcept>
#include <string>

namespace tvm {
namespace runtime {

/*! \brief An error from the runtime; what() is the message TVMGetLastError() gave. */
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

namespace detail {

/*! \brief Throw the runtime's last error as an Error. */
[[noreturn]] inline void ThrowLastError() {
  const char* msg = TVMGetLastError();
  throw Error(msg != nullptr && msg[0] != '\0' ? msg
                                               : "tvmrt: a C API call failed with no message");
}

/*! \brief Check a C API return code: 0 is success, anything else throws. */
inline void CheckCall(int rc) {
  if (rc != 0) ThrowLastError();
}

}  // namespace detail
}  // namespace runtime
}  // namespace tvm

#endif  // TVMRT_TVM_RUNTIME_LOGGING_H_
