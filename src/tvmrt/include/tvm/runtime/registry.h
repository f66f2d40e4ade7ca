/*
 * tvmrt's tvm/runtime/registry.h: the global function table from C++ (Registry::Get,
 * Registry::Register, TVM_REGISTER_GLOBAL, ListNames), header-only over TVMFuncGetGlobal,
 * TVMFuncRegisterGlobal and TVMFuncListGlobalNames.
 */
#ifndef TVMRT_TVM_RUNTIME_REGISTRY_H_
#define TVMRT_TVM_RUNTIME_REGISTRY_H_

#include <tvm/runtime/packed_func.h>

/* what TVM's registry.h brings in through its own includes, which TVM's apps rely on
   (apps/bundle_deploy/bundle.cc calls strlen with no <cstring> of its own) */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tvm {
namespace runtime {

/*! \brief The runtime's global functions, looked up and registered by name. */
class Registry {
 public:
  /*! \brief The global function name, or nullptr if none is registered. The pointer stays
   *  valid for the life of the program. */
  static const PackedFunc* Get(const std::string& name) {
    TVMFunctionHandle out = nullptr;
    detail::CheckCall(TVMFuncGetGlobal(name.c_str(), &out));
    if (out == nullptr) return nullptr;
    std::lock_guard<std::mutex> lock(Mutex());
    auto& slot = Cache()[name];
    if (slot == nullptr) {
      slot = std::make_unique<PackedFunc>(PackedFunc(out, true));
    } else {
      // one entry per name, as TVM's registry: the pointer handed out before stays valid
      (void)TVMFuncFree(out);
    }
    return slot.get();
  }

  /*! \brief Register a global function under name; set_body gives its body. */
  static Registry& Register(const std::string& name, bool can_override = false) {
    auto* entry = new Registry(name, can_override);  // lives as long as the program
    return *entry;
  }

  Registry& set_body(PackedFunc f) {
    detail::CheckCall(TVMFuncRegisterGlobal(name_.c_str(), f.handle(), override_ ? 1 : 0));
    std::lock_guard<std::mutex> lock(Mutex());
    auto& slot = Cache()[name_];
    if (slot == nullptr) {
      slot = std::make_unique<PackedFunc>(f);
    } else {
      *slot = f;  // Get's earlier pointers see the new body
    }
    func_ = std::move(f);
    return *this;
  }
  template <typename TCallable>
  Registry& set_body(TCallable body) {
    return set_body(PackedFunc(std::move(body)));
  }

  /*! \brief The names of every registered global function. */
  static std::vector<std::string> ListNames() {
    int size = 0;
    const char** names = nullptr;
    detail::CheckCall(TVMFuncListGlobalNames(&size, &names));
    return std::vector<std::string>(names, names + size);
  }

 private:
  Registry(std::string name, bool can_override) : name_(std::move(name)), override_(can_override) {}
  static std::mutex& Mutex() {
    static std::mutex mutex;
    return mutex;
  }
  static std::unordered_map<std::string, std::unique_ptr<PackedFunc>>& Cache() {
    static auto* cache = new std::unordered_map<std::string, std::unique_ptr<PackedFunc>>();
    return *cache;
  }
  std::string name_;
  bool override_;
  PackedFunc func_;
};

}  // namespace runtime
}  // namespace tvm

#define TVM_STR_CONCAT_(a, b) a##b
#define TVM_STR_CONCAT(a, b) TVM_STR_CONCAT_(a, b)
/*! \brief TVM_REGISTER_GLOBAL("name").set_body(...): register a global at start-up. */
#define TVM_REGISTER_GLOBAL(OpName)                                                                \
  static ::tvm::runtime::Registry& TVM_STR_CONCAT(__mk_TVM, __COUNTER__) [[maybe_unused]] =        \
      ::tvm::runtime::Registry::Register(OpName)

#endif  // TVMRT_TVM_RUNTIME_REGISTRY_H_
