/*
 * tvmrt's tvm/runtime/logging.h: the exceptions the C++ layer throws (tvm::runtime::Error, a
 * std::runtime_error carrying the runtime's TVMGetLastError() text, and InternalError) and
 * TVM's logging and check macros, as TVM's apps use them:
 *
 *   LOG(INFO|WARNING|ERROR|DEBUG) << ...   a line "[HH:MM:SS] file:line: ..." on stderr
 *                                          (DEBUG only with TVM_LOG_DEBUG set in the
 *                                          environment)
 *   LOG(FATAL) << ...                      throws InternalError with the message
 *   CHECK(x), CHECK_EQ/NE/LT/LE/GT/GE(x, y), CHECK_NOTNULL(x)     throw InternalError
 *   ICHECK(x) and its family, the same with "InternalError: " before the message
 *   DLOG, DLOG_IF, VLOG, DCHECK*           compiled out (TVM's release build)
 *   LOG_IF(severity, condition)
 *
 * A failed check's message is TVM's: "Check failed: (x) is false: ...", or
 * "Check failed: a == b (1 vs. 2) : ...".
 */
#ifndef TVMRT_TVM_RUNTIME_LOGGING_H_
#define TVMRT_TVM_RUNTIME_LOGGING_H_

#include <tvm/runtime/c_runtime_api.h>

#include <cstdlib>
#include <ctime>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>

namespace tvm {
namespace runtime {

/*! \brief An error from the runtime; what() is the message TVMGetLastError() gave. */
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

/*! \brief An error a check or LOG(FATAL) raised (TVM's name); what() is the message. */
class InternalError : public Error {
 public:
  InternalError(std::string file, int lineno, const std::string& message)
      : Error(message), file_(std::move(file)), lineno_(lineno), message_(message) {}
  /*! \brief The file and line of the check or LOG(FATAL). */
  const std::string& file() const { return file_; }
  int lineno() const { return lineno_; }
  /*! \brief The message alone (TVM's what() adds a backtrace; tvmrt has none). */
  const std::string& message() const { return message_; }

 private:
  std::string file_;
  int lineno_;
  std::string message_;
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

/*! \brief One LOG(severity) line: written to stderr when the statement ends. */
class LogMessage {
 public:
  LogMessage(const char* file, int line, bool shown) : shown_(shown) {
    if (!shown_) return;
    char stamp[16] = "";
    std::time_t now = std::time(nullptr);
    std::tm parts{};
    if (localtime_r(&now, &parts) != nullptr)
      std::strftime(stamp, sizeof(stamp), "%H:%M:%S", &parts);
    stream_ << "[" << stamp << "] " << file << ":" << line << ": ";
  }
  ~LogMessage() {
    if (shown_) std::cerr << stream_.str() << std::endl;
  }
  LogMessage(const LogMessage&) = delete;
  LogMessage& operator=(const LogMessage&) = delete;
  std::ostringstream& stream() { return stream_; }

 private:
  bool shown_;
  std::ostringstream stream_;
};

/*! \brief LOG(FATAL) or a failed check: throws InternalError when the statement ends. */
class LogFatal {
 public:
  LogFatal(const char* file, int line) : file_(file), line_(line) {}
  ~LogFatal() noexcept(false) { throw InternalError(file_, line_, stream_.str()); }
  LogFatal(const LogFatal&) = delete;
  LogFatal& operator=(const LogFatal&) = delete;
  std::ostringstream& stream() { return stream_; }

 private:
  const char* file_;
  int line_;
  std::ostringstream stream_;
};

/*! \brief Makes `cond ? (void)0 : voidify & stream` an expression of type void. */
class LogMessageVoidify {
 public:
  void operator&(std::ostream&) {}
};

/*! \brief Whether LOG(DEBUG) prints: TVM_LOG_DEBUG set to something other than 0. */
inline bool DebugLoggingEnabled() {
  const char* env = std::getenv("TVM_LOG_DEBUG");
  return env != nullptr && env[0] != '\0' && !(env[0] == '0' && env[1] == '\0');
}

/* " (x vs. y) " for a failed binary check, or nullptr when it holds */
#define TVMRT_DEFINE_CHECK_FUNC(name, op)                                                          \
  template <typename X, typename Y>                                                                \
  inline std::unique_ptr<std::string> LogCheck##name(const X& x, const Y& y) {                     \
    if (x op y) return nullptr;                                                                    \
    std::ostringstream os;                                                                         \
    os << " (" << x << " vs. " << y << ") ";                                                       \
    return std::make_unique<std::string>(os.str());                                                \
  }                                                                                                \
  inline std::unique_ptr<std::string> LogCheck##name(int x, int y) {                               \
    return LogCheck##name<int, int>(x, y);                                                         \
  }
TVMRT_DEFINE_CHECK_FUNC(_LT, <)
TVMRT_DEFINE_CHECK_FUNC(_GT, >)
TVMRT_DEFINE_CHECK_FUNC(_LE, <=)
TVMRT_DEFINE_CHECK_FUNC(_GE, >=)
TVMRT_DEFINE_CHECK_FUNC(_EQ, ==)
TVMRT_DEFINE_CHECK_FUNC(_NE, !=)
#undef TVMRT_DEFINE_CHECK_FUNC

}  // namespace detail
}  // namespace runtime

using runtime::Error;
using runtime::InternalError;

}  // namespace tvm

#define LOG(level) LOG_##level
#define LOG_INFO ::tvm::runtime::detail::LogMessage(__FILE__, __LINE__, true).stream()
#define LOG_WARNING ::tvm::runtime::detail::LogMessage(__FILE__, __LINE__, true).stream()
#define LOG_ERROR ::tvm::runtime::detail::LogMessage(__FILE__, __LINE__, true).stream()
#define LOG_DEBUG                                                                                  \
  ::tvm::runtime::detail::LogMessage(__FILE__, __LINE__,                                           \
                                     ::tvm::runtime::detail::DebugLoggingEnabled())                \
      .stream()
#define LOG_FATAL ::tvm::runtime::detail::LogFatal(__FILE__, __LINE__).stream()
#define LOG_DFATAL LOG_ERROR
#define LOG_IF(severity, condition)                                                                \
  !(condition) ? (void)0 : ::tvm::runtime::detail::LogMessageVoidify() & LOG(severity)
#define DLOG(severity) true ? (void)0 : ::tvm::runtime::detail::LogMessageVoidify() & LOG(severity)
#define DLOG_IF(severity, condition)                                                               \
  (true || !(condition)) ? (void)0 : ::tvm::runtime::detail::LogMessageVoidify() & LOG(severity)
#define VLOG(level) DLOG(INFO)
#define VLOG_CONTEXT true ? (void)0 : ::tvm::runtime::detail::LogMessageVoidify() & LOG(INFO)

#define TVMRT_CHECK_BINARY_OP(prefix, name, op, x, y)                                              \
  if (auto __tvm__log__err = ::tvm::runtime::detail::LogCheck##name(x, y))                         \
  ::tvm::runtime::detail::LogFatal(__FILE__, __LINE__).stream()                                    \
      << prefix "Check failed: " << #x " " #op " " #y << *__tvm__log__err << ": "
#define TVMRT_CHECK(prefix, x)                                                                     \
  if (!(x))                                                                                        \
  ::tvm::runtime::detail::LogFatal(__FILE__, __LINE__).stream()                                    \
      << prefix "Check failed: (" #x << ") is false: "
#define TVMRT_CHECK_NOTNULL(prefix, x)                                                             \
  ((x) == nullptr ? ::tvm::runtime::detail::LogFatal(__FILE__, __LINE__).stream()                  \
                        << prefix "Check not null: " #x << ' ',                                    \
   (x)            : (x))

#define CHECK(x) TVMRT_CHECK("", x)
#define CHECK_LT(x, y) TVMRT_CHECK_BINARY_OP("", _LT, <, x, y)
#define CHECK_GT(x, y) TVMRT_CHECK_BINARY_OP("", _GT, >, x, y)
#define CHECK_LE(x, y) TVMRT_CHECK_BINARY_OP("", _LE, <=, x, y)
#define CHECK_GE(x, y) TVMRT_CHECK_BINARY_OP("", _GE, >=, x, y)
#define CHECK_EQ(x, y) TVMRT_CHECK_BINARY_OP("", _EQ, ==, x, y)
#define CHECK_NE(x, y) TVMRT_CHECK_BINARY_OP("", _NE, !=, x, y)
#define CHECK_NOTNULL(x) TVMRT_CHECK_NOTNULL("", x)
#define ICHECK(x) TVMRT_CHECK("InternalError: ", x)
#define ICHECK_LT(x, y) TVMRT_CHECK_BINARY_OP("InternalError: ", _LT, <, x, y)
#define ICHECK_GT(x, y) TVMRT_CHECK_BINARY_OP("InternalError: ", _GT, >, x, y)
#define ICHECK_LE(x, y) TVMRT_CHECK_BINARY_OP("InternalError: ", _LE, <=, x, y)
#define ICHECK_GE(x, y) TVMRT_CHECK_BINARY_OP("InternalError: ", _GE, >=, x, y)
#define ICHECK_EQ(x, y) TVMRT_CHECK_BINARY_OP("InternalError: ", _EQ, ==, x, y)
#define ICHECK_NE(x, y) TVMRT_CHECK_BINARY_OP("InternalError: ", _NE, !=, x, y)
#define ICHECK_NOTNULL(x) TVMRT_CHECK_NOTNULL("InternalError: ", x)
#define DCHECK(x)                                                                                  \
  while (false) CHECK(x)
#define DCHECK_LT(x, y)                                                                            \
  while (false) CHECK((x) < (y))
#define DCHECK_GT(x, y)                                                                            \
  while (false) CHECK((x) > (y))
#define DCHECK_LE(x, y)                                                                            \
  while (false) CHECK((x) <= (y))
#define DCHECK_GE(x, y)                                                                            \
  while (false) CHECK((x) >= (y))
#define DCHECK_EQ(x, y)                                                                            \
  while (false) CHECK((x) == (y))
#define DCHECK_NE(x, y)                                                                            \
  while (false) CHECK((x) != (y))

#endif  // TVMRT_TVM_RUNTIME_LOGGING_H_
