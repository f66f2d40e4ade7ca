/*
 * tvmrt's tvm/runtime/packed_func.h: TVM <= 0.19's PackedFunc, TVMArgs, TVMArgValue,
 * TVMRetValue and Module for C++ programs, header-only over the C API (TVMFuncCall,
 * TVMFuncCreateFromCFunc, TVMModGetFunction, ...), so programs written against TVM's C++
 * runtime compile unchanged and link with libtvmrt_runtime only.
 *
 * Ownership follows TVM's C API: handles a call returns (modules, functions, tensors) belong
 * to the caller and are freed by the last C++ object holding them; arguments are borrowed for
 * the duration of the call. Failures throw tvm::runtime::Error with TVMGetLastError()'s text.
 */
#ifndef TVMRT_TVM_RUNTIME_PACKED_FUNC_H_
#define TVMRT_TVM_RUNTIME_PACKED_FUNC_H_

#include <dlpack/dlpack.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/data_type.h>
#include <tvm/runtime/logging.h>
#include <tvm/runtime/ndarray.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

namespace tvm {
namespace runtime {

class Module;
class PackedFunc;
class TVMRetValue;

namespace detail {

/*! \brief One owned C handle, released with its free function by the last owner. */
template <int (*Free)(void*)>
struct OwnedHandle {
  void* handle;
  bool owned;
  OwnedHandle(void* h, bool own) : handle(h), owned(own) {}
  OwnedHandle(const OwnedHandle&) = delete;
  OwnedHandle& operator=(const OwnedHandle&) = delete;
  ~OwnedHandle() {
    if (owned && handle != nullptr) (void)Free(handle);
  }
};
inline int FreeFunc(void* h) { return TVMFuncFree(h); }
inline int FreeMod(void* h) { return TVMModFree(h); }
using FuncHolder = OwnedHandle<FreeFunc>;
using ModHolder = OwnedHandle<FreeMod>;

inline const char* TypeCodeName(int code) {
  switch (code) {
    case kTVMArgInt: return "int";
    case kTVMArgFloat: return "float";
    case kTVMOpaqueHandle: return "handle";
    case kTVMNullptr: return "nullptr";
    case kTVMDataType: return "DataType";
    case kDLDevice: return "Device";
    case kTVMDLTensorHandle: return "DLTensor*";
    case kTVMObjectHandle: return "Object";
    case kTVMModuleHandle: return "Module";
    case kTVMPackedFuncHandle: return "PackedFunc";
    case kTVMStr: return "str";
    case kTVMBytes: return "bytes";
    case kTVMNDArrayHandle: return "NDArray";
    case kTVMArgBool: return "bool";
    default: return "unknown";
  }
}

[[noreturn]] inline void WrongType(int code, const char* expected) {
  throw Error(std::string("expected ") + expected + " but got " + TypeCodeName(code));
}

}  // namespace detail

/*! \brief A function of the runtime, called with any number of TVM values. */
class PackedFunc {
 public:
  PackedFunc() = default;
  PackedFunc(std::nullptr_t) {}  // NOLINT(runtime/explicit)
  /*! \brief A PackedFunc whose body is body(TVMArgs args, TVMRetValue* rv). */
  template <typename TCallable, typename = std::enable_if_t<std::is_invocable_r_v<
                                    void, TCallable, class TVMArgs, TVMRetValue*>>>
  explicit PackedFunc(TCallable body);

  template <typename... Args>
  inline TVMRetValue operator()(Args&&... args) const;
  inline void CallPacked(class TVMArgs args, TVMRetValue* rv) const;

  bool defined() const { return holder_ != nullptr; }
  bool operator==(std::nullptr_t) const { return holder_ == nullptr; }
  bool operator!=(std::nullptr_t) const { return holder_ != nullptr; }
  /*! \brief The C handle (valid while this PackedFunc lives); for C API calls. */
  TVMFunctionHandle handle() const { return holder_ == nullptr ? nullptr : holder_->handle; }

 private:
  friend class TVMRetValue;
  friend class TVMArgValue;
  friend class Module;
  friend class Registry;
  PackedFunc(TVMFunctionHandle handle, bool owned)
      : holder_(handle == nullptr ? nullptr : std::make_shared<detail::FuncHolder>(handle, owned)) {
  }
  std::shared_ptr<detail::FuncHolder> holder_;
};

/*! \brief The small facade Module's operator-> gives: GetFunction and Import. */
class ModuleNode {
 public:
  inline PackedFunc GetFunction(const std::string& name, bool query_imports = false);
  inline void Import(Module other);

 private:
  friend class Module;
  explicit ModuleNode(TVMModuleHandle h) : handle_(h) {}
  TVMModuleHandle handle_;
};

/*! \brief A runtime module: a library of functions, or an executor. */
class Module {
 public:
  Module() = default;
  Module(std::nullptr_t) {}  // NOLINT(runtime/explicit)

  /*! \brief Load a module from a file (a TVM-exported library); format is guessed if empty. */
  static Module LoadFromFile(const std::string& file_name, const std::string& format = "") {
    TVMModuleHandle out = nullptr;
    detail::CheckCall(TVMModLoadFromFile(file_name.c_str(), format.c_str(), &out));
    return Module(out, true);
  }
  /*! \brief The function name of this module; a null PackedFunc if there is none. */
  PackedFunc GetFunction(const std::string& name, bool query_imports = false) const {
    TVMFunctionHandle out = nullptr;
    detail::CheckCall(TVMModGetFunction(handle(), name.c_str(), query_imports ? 1 : 0, &out));
    return PackedFunc(out, true);
  }
  /*! \brief Make other's functions visible to this module's code. */
  void Import(Module other) { detail::CheckCall(TVMModImport(handle(), other.handle())); }
  ModuleNode* operator->() {
    node_ = ModuleNode(handle());
    return &node_;
  }

  bool defined() const { return holder_ != nullptr; }
  bool operator==(std::nullptr_t) const { return holder_ == nullptr; }
  bool operator!=(std::nullptr_t) const { return holder_ != nullptr; }
  /*! \brief The C handle (valid while this Module lives); for C API calls. */
  TVMModuleHandle handle() const {
    if (holder_ == nullptr) throw Error("Module is null (expected a loaded module)");
    return holder_->handle;
  }

 private:
  friend class TVMRetValue;
  friend class TVMArgValue;
  friend class ModuleNode;
  Module(TVMModuleHandle handle, bool owned)
      : holder_(handle == nullptr ? nullptr : std::make_shared<detail::ModHolder>(handle, owned)) {}
  std::shared_ptr<detail::ModHolder> holder_;
  ModuleNode node_{nullptr};
};

inline PackedFunc ModuleNode::GetFunction(const std::string& name, bool query_imports) {
  return Module(handle_, false).GetFunction(name, query_imports);
}
inline void ModuleNode::Import(Module other) { Module(handle_, false).Import(other); }

/*! \brief One argument of a call; borrowed: valid during the call only. */
class TVMArgValue {
 public:
  TVMArgValue(TVMValue value, int type_code) : value_(value), type_code_(type_code) {}
  int type_code() const { return type_code_; }
  const TVMValue& value() const { return value_; }

  operator int64_t() const { return AsInt(); }
  operator int() const { return static_cast<int>(AsInt()); }
  operator uint64_t() const { return static_cast<uint64_t>(AsInt()); }
  operator bool() const { return AsInt() != 0; }
  operator double() const {
    if (type_code_ == kTVMArgFloat) return value_.v_float64;
    if (type_code_ == kTVMArgInt || type_code_ == kTVMArgBool)
      return static_cast<double>(value_.v_int64);
    detail::WrongType(type_code_, "float");
  }
  operator std::string() const {
    if (type_code_ == kTVMStr) return value_.v_str;
    if (type_code_ == kTVMBytes) {
      const auto* arr = static_cast<const TVMByteArray*>(value_.v_handle);
      return std::string(arr->data, arr->size);
    }
    detail::WrongType(type_code_, "str");
  }
  operator DLTensor*() const {
    if (type_code_ == kTVMDLTensorHandle || type_code_ == kTVMNDArrayHandle)
      return static_cast<DLTensor*>(value_.v_handle);
    if (type_code_ == kTVMNullptr) return nullptr;
    detail::WrongType(type_code_, "DLTensor*");
  }
  operator void*() const {
    if (type_code_ == kTVMOpaqueHandle || type_code_ == kTVMDLTensorHandle) return value_.v_handle;
    if (type_code_ == kTVMNullptr) return nullptr;
    detail::WrongType(type_code_, "handle");
  }
  operator DLDevice() const {
    if (type_code_ == kDLDevice) return value_.v_device;
    detail::WrongType(type_code_, "Device");
  }
  operator DLDataType() const {
    if (type_code_ == kTVMDataType) return value_.v_type;
    if (type_code_ == kTVMStr) return String2DLDataType(value_.v_str);
    detail::WrongType(type_code_, "DataType");
  }
  operator DataType() const { return DataType(operator DLDataType()); }
  /*! \brief A borrowed view: valid during the call only. */
  operator NDArray() const {
    if (type_code_ == kTVMNDArrayHandle || type_code_ == kTVMDLTensorHandle)
      return NDArray(static_cast<DLTensor*>(value_.v_handle), false);
    if (type_code_ == kTVMNullptr) return NDArray();
    detail::WrongType(type_code_, "NDArray");
  }
  /*! \brief A borrowed view: valid during the call only. */
  operator Module() const {
    if (type_code_ == kTVMModuleHandle) return Module(value_.v_handle, false);
    if (type_code_ == kTVMNullptr) return Module();
    detail::WrongType(type_code_, "Module");
  }
  /*! \brief A borrowed view: valid during the call only. */
  operator PackedFunc() const {
    if (type_code_ == kTVMPackedFuncHandle) return PackedFunc(value_.v_handle, false);
    if (type_code_ == kTVMNullptr) return PackedFunc();
    detail::WrongType(type_code_, "PackedFunc");
  }

 private:
  int64_t AsInt() const {
    if (type_code_ == kTVMArgInt || type_code_ == kTVMArgBool) return value_.v_int64;
    detail::WrongType(type_code_, "int");
  }
  TVMValue value_;
  int type_code_;
};

/*! \brief The arguments of a call, as a PackedFunc body sees them. */
class TVMArgs {
 public:
  const TVMValue* values;
  const int* type_codes;
  int num_args;
  TVMArgs(const TVMValue* arg_values, const int* arg_type_codes, int arg_count)
      : values(arg_values), type_codes(arg_type_codes), num_args(arg_count) {}
  int size() const { return num_args; }
  TVMArgValue operator[](int i) const {
    if (i < 0 || i >= num_args) {
      throw Error("argument index " + std::to_string(i) + " out of range (the call has " +
                  std::to_string(num_args) + " arguments)");
    }
    return TVMArgValue(values[i], type_codes[i]);
  }
};

/*! \brief A call's result; owns what it holds (a string, a module, a function, a tensor). */
class TVMRetValue {
 public:
  TVMRetValue() { value_.v_handle = nullptr; }
  int type_code() const { return type_code_; }

  operator int64_t() const { return AsInt(); }
  operator int() const { return static_cast<int>(AsInt()); }
  operator uint64_t() const { return static_cast<uint64_t>(AsInt()); }
  operator bool() const { return AsInt() != 0; }
  operator double() const {
    if (type_code_ == kTVMArgFloat) return value_.v_float64;
    if (type_code_ == kTVMArgInt || type_code_ == kTVMArgBool)
      return static_cast<double>(value_.v_int64);
    detail::WrongType(type_code_, "float");
  }
  operator std::string() const {
    if (type_code_ == kTVMStr || type_code_ == kTVMBytes) return str_;
    detail::WrongType(type_code_, "str");
  }
  operator void*() const {
    if (type_code_ == kTVMOpaqueHandle) return value_.v_handle;
    if (type_code_ == kTVMNullptr) return nullptr;
    detail::WrongType(type_code_, "handle");
  }
  operator DLTensor*() const {
    if (type_code_ == kTVMNDArrayHandle) return nd_.get_tensor();
    if (type_code_ == kTVMDLTensorHandle) return static_cast<DLTensor*>(value_.v_handle);
    if (type_code_ == kTVMNullptr) return nullptr;
    detail::WrongType(type_code_, "DLTensor*");
  }
  operator DLDevice() const {
    if (type_code_ == kDLDevice) return value_.v_device;
    detail::WrongType(type_code_, "Device");
  }
  operator DLDataType() const {
    if (type_code_ == kTVMDataType) return value_.v_type;
    if (type_code_ == kTVMStr) return String2DLDataType(str_);
    detail::WrongType(type_code_, "DataType");
  }
  operator DataType() const { return DataType(operator DLDataType()); }
  operator NDArray() const {
    if (type_code_ == kTVMNDArrayHandle || type_code_ == kTVMNullptr) return nd_;
    detail::WrongType(type_code_, "NDArray");
  }
  operator Module() const {
    if (type_code_ == kTVMModuleHandle || type_code_ == kTVMNullptr) return mod_;
    detail::WrongType(type_code_, "Module");
  }
  operator PackedFunc() const {
    if (type_code_ == kTVMPackedFuncHandle || type_code_ == kTVMNullptr) return func_;
    detail::WrongType(type_code_, "PackedFunc");
  }

  // Setting a result inside a PackedFunc body written in C++.
  TVMRetValue& operator=(std::nullptr_t) { return Reset(kTVMNullptr); }
  TVMRetValue& operator=(int64_t v) {
    Reset(kTVMArgInt).value_.v_int64 = v;
    return *this;
  }
  TVMRetValue& operator=(int v) { return operator=(static_cast<int64_t>(v)); }
  TVMRetValue& operator=(bool v) { return operator=(static_cast<int64_t>(v)); }
  TVMRetValue& operator=(double v) {
    Reset(kTVMArgFloat).value_.v_float64 = v;
    return *this;
  }
  TVMRetValue& operator=(std::string v) {
    Reset(kTVMStr).str_ = std::move(v);
    return *this;
  }
  TVMRetValue& operator=(const char* v) { return operator=(std::string(v)); }
  TVMRetValue& operator=(void* v) {
    Reset(kTVMOpaqueHandle).value_.v_handle = v;
    return *this;
  }
  TVMRetValue& operator=(DLDevice v) {
    Reset(kDLDevice).value_.v_device = v;
    return *this;
  }
  TVMRetValue& operator=(DLDataType v) {
    Reset(kTVMDataType).value_.v_type = v;
    return *this;
  }
  TVMRetValue& operator=(DataType v) { return operator=(static_cast<DLDataType>(v)); }
  TVMRetValue& operator=(Module v) {
    Reset(v.defined() ? kTVMModuleHandle : kTVMNullptr).mod_ = std::move(v);
    return *this;
  }
  TVMRetValue& operator=(PackedFunc v) {
    Reset(v.defined() ? kTVMPackedFuncHandle : kTVMNullptr).func_ = std::move(v);
    return *this;
  }
  TVMRetValue& operator=(NDArray v) {
    Reset(v.defined() ? kTVMNDArrayHandle : kTVMNullptr).nd_ = std::move(v);
    return *this;
  }

  /*! \brief Take the result a C call returned (TVMFuncCall's ret_val/ret_type_code). */
  void TakeFromC(TVMValue value, int type_code) {
    Reset(type_code);
    value_ = value;
    switch (type_code) {
      case kTVMStr: str_ = value.v_str != nullptr ? value.v_str : ""; break;
      case kTVMBytes: {
        const auto* arr = static_cast<const TVMByteArray*>(value.v_handle);
        str_.assign(arr->data, arr->size);
        break;
      }
      case kTVMModuleHandle: mod_ = Module(value.v_handle, true); break;
      case kTVMPackedFuncHandle: func_ = PackedFunc(value.v_handle, true); break;
      case kTVMNDArrayHandle: nd_ = NDArray(static_cast<DLTensor*>(value.v_handle), true); break;
      default: break;
    }
  }
  /*! \brief This value as a C (value, type code) pair, valid while this TVMRetValue lives. */
  void AsC(TVMValue* value, int* type_code) const {
    *type_code = type_code_;
    *value = value_;
    switch (type_code_) {
      case kTVMStr: value->v_str = str_.c_str(); break;
      case kTVMModuleHandle: value->v_handle = mod_.handle(); break;
      case kTVMPackedFuncHandle: value->v_handle = func_.handle(); break;
      case kTVMNDArrayHandle: value->v_handle = nd_.get_tensor(); break;
      default: break;
    }
  }

 private:
  TVMRetValue& Reset(int code) {
    type_code_ = code;
    value_.v_handle = nullptr;
    str_.clear();
    mod_ = Module();
    func_ = PackedFunc();
    nd_ = NDArray();
    return *this;
  }
  int64_t AsInt() const {
    if (type_code_ == kTVMArgInt || type_code_ == kTVMArgBool) return value_.v_int64;
    detail::WrongType(type_code_, "int");
  }
  TVMValue value_;
  int type_code_{kTVMNullptr};
  std::string str_;
  Module mod_;
  PackedFunc func_;
  NDArray nd_;
};

namespace detail {

/*! \brief Fills TVMValue/type-code arrays from C++ arguments (borrowed, not copied). */
class ArgsSetter {
 public:
  ArgsSetter(TVMValue* values, int* codes) : values_(values), codes_(codes) {}
  /* integers, and enums (kDLCPU, a DLDeviceType, passed as it is) */
  template <typename T, typename = std::enable_if_t<std::is_integral_v<T> || std::is_enum_v<T>>>
  void operator()(int i, T v) const {
    values_[i].v_int64 = static_cast<int64_t>(v);
    codes_[i] = kTVMArgInt;
  }
  void operator()(int i, double v) const {
    values_[i].v_float64 = v;
    codes_[i] = kTVMArgFloat;
  }
  void operator()(int i, float v) const { operator()(i, static_cast<double>(v)); }
  void operator()(int i, std::nullptr_t) const {
    values_[i].v_handle = nullptr;
    codes_[i] = kTVMNullptr;
  }
  void operator()(int i, const char* v) const {
    values_[i].v_str = v;
    codes_[i] = kTVMStr;
  }
  void operator()(int i, const std::string& v) const { operator()(i, v.c_str()); }
  void operator()(int i, const TVMByteArray& v) const {
    values_[i].v_handle = const_cast<TVMByteArray*>(&v);
    codes_[i] = kTVMBytes;
  }
  void operator()(int i, DLTensor* v) const {
    values_[i].v_handle = v;
    codes_[i] = v == nullptr ? kTVMNullptr : kTVMDLTensorHandle;
  }
  void operator()(int i, void* v) const {
    values_[i].v_handle = v;
    codes_[i] = v == nullptr ? kTVMNullptr : kTVMOpaqueHandle;
  }
  void operator()(int i, DLDevice v) const {
    values_[i].v_device = v;
    codes_[i] = kDLDevice;
  }
  void operator()(int i, DLDataType v) const {
    values_[i].v_type = v;
    codes_[i] = kTVMDataType;
  }
  void operator()(int i, const DataType& v) const { operator()(i, static_cast<DLDataType>(v)); }
  void operator()(int i, const NDArray& v) const {
    values_[i].v_handle = v.defined() ? v.get_tensor() : nullptr;
    codes_[i] = v.defined() ? kTVMNDArrayHandle : kTVMNullptr;
  }
  void operator()(int i, const Module& v) const {
    values_[i].v_handle = v.defined() ? v.handle() : nullptr;
    codes_[i] = v.defined() ? kTVMModuleHandle : kTVMNullptr;
  }
  void operator()(int i, const PackedFunc& v) const {
    values_[i].v_handle = v.handle();
    codes_[i] = v.defined() ? kTVMPackedFuncHandle : kTVMNullptr;
  }
  void operator()(int i, const TVMArgValue& v) const {
    values_[i] = v.value();
    codes_[i] = v.type_code();
  }
  void operator()(int i, const TVMRetValue& v) const { v.AsC(&values_[i], &codes_[i]); }

 private:
  TVMValue* values_;
  int* codes_;
};

/*! \brief The C entry of a PackedFunc made from a C++ callable. */
template <typename TCallable>
int CallCxxBody(TVMValue* args, int* type_codes, int num_args, TVMRetValueHandle ret,
                void* resource_handle) {
  try {
    TVMRetValue rv;
    (*static_cast<TCallable*>(resource_handle))(TVMArgs(args, type_codes, num_args), &rv);
    TVMValue value;
    int code;
    rv.AsC(&value, &code);
    if (code == kTVMStr) {
      // a string result must outlive this frame: the caller copies it after the call
      // returns (TVM's C API keeps returned strings per thread until the next call)
      thread_local std::string last_string;
      last_string = static_cast<std::string>(rv);
      value.v_str = last_string.c_str();
    }
    return TVMCFuncSetReturn(ret, &value, &code, 1);
  } catch (const std::exception& e) {
    TVMAPISetLastError(e.what());
    return -1;
  }
}

template <typename TCallable>
void DeleteCxxBody(void* resource_handle) {
  delete static_cast<TCallable*>(resource_handle);
}

}  // namespace detail

template <typename TCallable, typename>
PackedFunc::PackedFunc(TCallable body) {
  auto* resource = new TCallable(std::move(body));
  TVMFunctionHandle out = nullptr;
  if (TVMFuncCreateFromCFunc(detail::CallCxxBody<TCallable>, resource,
                             detail::DeleteCxxBody<TCallable>, &out) != 0) {
    delete resource;
    detail::ThrowLastError();
  }
  holder_ = std::make_shared<detail::FuncHolder>(out, true);
}

template <typename... Args>
inline TVMRetValue PackedFunc::operator()(Args&&... args) const {
  constexpr int kNumArgs = static_cast<int>(sizeof...(Args));
  TVMValue values[kNumArgs > 0 ? kNumArgs : 1];
  int codes[kNumArgs > 0 ? kNumArgs : 1];
  detail::ArgsSetter setter(values, codes);
  int i = 0;
  (setter(i++, std::forward<Args>(args)), ...);
  (void)setter;
  (void)i;
  TVMRetValue rv;
  CallPacked(TVMArgs(values, codes, kNumArgs), &rv);
  return rv;
}

inline void PackedFunc::CallPacked(TVMArgs args, TVMRetValue* rv) const {
  if (holder_ == nullptr) throw Error("calling a null PackedFunc (the function was not found)");
  TVMValue ret_value;
  ret_value.v_handle = nullptr;
  int ret_code = kTVMNullptr;
  detail::CheckCall(TVMFuncCall(holder_->handle, const_cast<TVMValue*>(args.values),
                                const_cast<int*>(args.type_codes), args.num_args, &ret_value,
                                &ret_code));
  rv->TakeFromC(ret_value, ret_code);
}

}  // namespace runtime
}  // namespace tvm

#endif  // TVMRT_TVM_RUNTIME_PACKED_FUNC_H_
