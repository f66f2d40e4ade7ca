/*
 * tvmrt's tvm/runtime/ndarray.h: TVM <= 0.19's runtime::NDArray for C++ programs,
 * header-only over the C API (TVMArrayAlloc/Free/CopyFromBytes/CopyToBytes/CopyFromTo,
 * TVMArrayFromDLPack/ToDLPack).
 * An NDArray shares one reference-counted tensor; the last copy frees it.
 */
#ifndef TVMRT_TVM_RUNTIME_NDARRAY_H_
#define TVMRT_TVM_RUNTIME_NDARRAY_H_

#include <dlpack/dlpack.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/data_type.h>
#include <tvm/runtime/logging.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tvm {

/*! \brief A device (type and id), as TVM's Device. */
using Device = DLDevice;

namespace runtime {

using tvm::Device;

/*! \brief A tensor shape, as TVM's ShapeTuple (built from a braced list or a vector). */
class ShapeTuple {
 public:
  using index_type = int64_t;
  ShapeTuple() = default;
  ShapeTuple(std::initializer_list<int64_t> dims) : dims_(dims) {}
  ShapeTuple(std::vector<int64_t> dims) : dims_(std::move(dims)) {}  // NOLINT(runtime/explicit)
  template <typename It>
  ShapeTuple(It begin, It end) : dims_(begin, end) {}
  size_t size() const { return dims_.size(); }
  int64_t operator[](size_t i) const { return dims_[i]; }
  int64_t at(size_t i) const { return dims_.at(i); }
  const int64_t* data() const { return dims_.data(); }
  const int64_t* begin() const { return dims_.data(); }
  const int64_t* end() const { return dims_.data() + dims_.size(); }
  bool empty() const { return dims_.empty(); }
  int64_t Product() const {
    int64_t n = 1;
    for (int64_t d : dims_) n *= d;
    return n;
  }
  operator std::vector<int64_t>() const { return dims_; }

 private:
  std::vector<int64_t> dims_;
};

class TVMRetValue;
class TVMArgValue;

/*! \brief A tensor owned by the runtime (TVMArrayAlloc), shared by every copy of it. */
class NDArray {
 public:
  NDArray() = default;
  NDArray(std::nullptr_t) {}  // NOLINT(runtime/explicit)

  /*! \brief An uninitialised tensor of this shape and type on dev. */
  static NDArray Empty(ShapeTuple shape, DLDataType dtype, Device dev) {
    TVMArrayHandle out = nullptr;
    detail::CheckCall(TVMArrayAlloc(shape.data(), static_cast<int>(shape.size()), dtype.code,
                                    dtype.bits, dtype.lanes, dev.device_type, dev.device_id, &out));
    return NDArray(out, true);
  }

  /*! \brief A tensor over another framework's DLPack tensor, no copy: it owns `tensor`
   *  (its deleter runs once, when the last copy goes); on an error the caller keeps it. */
  static NDArray FromDLPack(DLManagedTensor* tensor) {
    TVMArrayHandle out = nullptr;
    detail::CheckCall(TVMArrayFromDLPack(tensor, &out));
    return NDArray(out, true);
  }

  /*! \brief A DLPack tensor viewing this one, keeping it alive until its deleter runs. */
  DLManagedTensor* ToDLPack() const {
    DLManagedTensor* out = nullptr;
    detail::CheckCall(TVMArrayToDLPack(get_tensor(), &out));
    return out;
  }

  bool defined() const { return holder_ != nullptr; }
  bool operator==(std::nullptr_t) const { return holder_ == nullptr; }
  bool operator!=(std::nullptr_t) const { return holder_ != nullptr; }
  int use_count() const { return static_cast<int>(holder_.use_count()); }
  const DLTensor* operator->() const { return get_tensor(); }

  ShapeTuple Shape() const {
    const DLTensor* t = get_tensor();
    return ShapeTuple(t->shape, t->shape + t->ndim);
  }
  runtime::DataType DataType() const { return runtime::DataType(get_tensor()->dtype); }
  bool IsContiguous() const {
    const DLTensor* t = get_tensor();
    if (t->strides == nullptr) return true;
    int64_t expected = 1;
    for (int i = t->ndim - 1; i >= 0; --i) {
      if (t->shape[i] != 1 && t->strides[i] != expected) return false;
      expected *= t->shape[i];
    }
    return true;
  }

  /*! \brief Copy nbytes (the tensor's whole size) from host memory into the tensor. */
  void CopyFromBytes(const void* data, size_t nbytes) {
    detail::CheckCall(TVMArrayCopyFromBytes(get_tensor(), const_cast<void*>(data), nbytes));
  }
  /*! \brief Copy the tensor (nbytes, its whole size) to host memory. */
  void CopyToBytes(void* data, size_t nbytes) const {
    detail::CheckCall(TVMArrayCopyToBytes(get_tensor(), data, nbytes));
  }
  void CopyFrom(const DLTensor* other) {
    detail::CheckCall(TVMArrayCopyFromTo(const_cast<DLTensor*>(other), get_tensor(), nullptr));
  }
  void CopyFrom(const NDArray& other) { CopyFrom(other.get_tensor()); }
  void CopyTo(DLTensor* other) const {
    detail::CheckCall(TVMArrayCopyFromTo(get_tensor(), other, nullptr));
  }
  void CopyTo(const NDArray& other) const { CopyTo(other.get_tensor()); }
  /*! \brief A new tensor on dev with this one's contents. */
  NDArray CopyTo(const Device& dev) const {
    const DLTensor* t = get_tensor();
    NDArray out = Empty(Shape(), t->dtype, dev);
    CopyTo(out);
    return out;
  }

  /*! \brief The underlying handle (valid while this NDArray lives); for C API calls. */
  DLTensor* get_tensor() const {
    if (holder_ == nullptr) throw Error("NDArray is null (expected an allocated tensor)");
    return holder_->tensor;
  }

 private:
  friend class TVMRetValue;
  friend class TVMArgValue;
  struct Holder {
    DLTensor* tensor;
    bool owned;
    Holder(DLTensor* t, bool own) : tensor(t), owned(own) {}
    Holder(const Holder&) = delete;
    Holder& operator=(const Holder&) = delete;
    ~Holder() {
      if (owned && tensor != nullptr) (void)TVMArrayFree(tensor);
    }
  };
  /*! \brief Wrap a handle; owned ones are freed with TVMArrayFree by the last copy. */
  NDArray(DLTensor* handle, bool owned) : holder_(std::make_shared<Holder>(handle, owned)) {}

  std::shared_ptr<Holder> holder_;
};

}  // namespace runtime
}  // namespace tvm

#endif  // TVMRT_TVM_RUNTIME_NDARRAY_H_
