/*
 * tvmrt's tvm/runtime/data_type.h: TVM <= 0.19's runtime::DataType for C++ programs,
 * header-only over DLPack's DLDataType. Type codes are TVM <= 0.20's (e4m3 = 6, e5m2 = 7).
 */
#ifndef TVMRT_TVM_RUNTIME_DATA_TYPE_H_
#define TVMRT_TVM_RUNTIME_DATA_TYPE_H_

#include <dlpack/dlpack.h>
#include <tvm/runtime/c_runtime_api.h>

#include <cstdint>
#include <cstdlib>
#include <ostream>
#include <stdexcept>
#include <string>

namespace tvm {
namespace runtime {

/*! \brief A data type: code, bits and lanes, as TVM's runtime::DataType. */
class DataType {
 public:
  enum TypeCode {
    kInt = kDLInt,
    kUInt = kDLUInt,
    kFloat = kDLFloat,
    kHandle = kTVMOpaqueHandle,
    kBFloat = kDLBfloat,
    kE4M3Float = 6U,
    kE5M2Float = 7U,
    kCustomBegin = 129
  };
  DataType() : DataType(kHandle, 0, 0) {}
  explicit DataType(DLDataType dtype) : data_(dtype) {}
  DataType(int code, int bits, int lanes) {
    data_.code = static_cast<uint8_t>(code);
    data_.bits = static_cast<uint8_t>(bits);
    data_.lanes = static_cast<uint16_t>(lanes);
  }
  int code() const { return static_cast<int>(data_.code); }
  int bits() const { return static_cast<int>(data_.bits); }
  int lanes() const { return static_cast<int>(data_.lanes); }
  int bytes() const { return (bits() + 7) / 8; }
  bool is_scalar() const { return lanes() == 1; }
  bool is_bool() const { return code() == kUInt && bits() == 1; }
  bool is_float() const { return code() == kFloat; }
  bool is_bfloat16() const { return code() == kBFloat && bits() == 16; }
  bool is_int() const { return code() == kInt; }
  bool is_uint() const { return code() == kUInt; }
  bool is_handle() const { return code() == kHandle && !is_void(); }
  bool is_void() const { return code() == kHandle && bits() == 0 && lanes() == 0; }
  bool is_vector() const { return lanes() > 1; }
  DataType with_lanes(int lanes) const { return DataType(code(), bits(), lanes); }
  DataType with_bits(int bits) const { return DataType(code(), bits, lanes()); }
  DataType element_of() const { return with_lanes(1); }
  bool operator==(const DataType& other) const {
    return data_.code == other.data_.code && data_.bits == other.data_.bits &&
           data_.lanes == other.data_.lanes;
  }
  bool operator!=(const DataType& other) const { return !operator==(other); }
  operator DLDataType() const { return data_; }

  static DataType Int(int bits, int lanes = 1) { return DataType(kInt, bits, lanes); }
  static DataType UInt(int bits, int lanes = 1) { return DataType(kUInt, bits, lanes); }
  static DataType Float(int bits, int lanes = 1) { return DataType(kFloat, bits, lanes); }
  static DataType BFloat(int bits, int lanes = 1) { return DataType(kBFloat, bits, lanes); }
  static DataType NVFloat8E4M3(int lanes = 1) { return DataType(kE4M3Float, 8, lanes); }
  static DataType NVFloat8E5M2(int lanes = 1) { return DataType(kE5M2Float, 8, lanes); }
  static DataType Bool(int lanes = 1) { return DataType::UInt(1, lanes); }
  static DataType Handle(int bits = 64, int lanes = 1) { return DataType(kHandle, bits, lanes); }
  static DataType Void() { return DataType(kHandle, 0, 0); }

 private:
  DLDataType data_;
};

/*! \brief The name of a type code, as TVM's DLDataTypeCode2Str. */
inline const char* DLDataTypeCode2Str(int code) {
  switch (code) {
    case kDLInt: return "int";
    case kDLUInt: return "uint";
    case kDLFloat: return "float";
    case kTVMOpaqueHandle: return "handle";
    case kDLBfloat: return "bfloat";
    case DataType::kE4M3Float: return "e4m3_float";
    case DataType::kE5M2Float: return "e5m2_float";
    default:
      throw std::invalid_argument("unknown DLDataType code " + std::to_string(code) +
                                  " (expected 0 int, 1 uint, 2 float, 3 handle, 4 bfloat, "
                                  "6 e4m3_float, 7 e5m2_float)");
  }
}

/*! \brief "float32", "int8x4", "bool", "void", as TVM prints a DLDataType. */
inline std::string DLDataType2String(DLDataType t) {
  if (t.bits == 1 && t.lanes == 1 && t.code == kDLUInt) return "bool";
  if (t.code == kTVMOpaqueHandle && t.bits == 0 && t.lanes == 0) return "void";
  std::string out = DLDataTypeCode2Str(t.code);
  if (t.code == kTVMOpaqueHandle) return out;
  out += std::to_string(static_cast<int>(t.bits));
  if (t.lanes != 1) out += "x" + std::to_string(static_cast<int>(t.lanes));
  return out;
}

/*! \brief Parse "float32", "int8x4", "uint1", "bool", "handle", "void". */
inline DLDataType String2DLDataType(const std::string& s) {
  DLDataType t;
  t.bits = 32;
  t.lanes = 1;
  if (s.empty() || s == "void") {
    t.code = kTVMOpaqueHandle;
    t.bits = 0;
    t.lanes = 0;
    return t;
  }
  if (s == "bool") {
    t.code = kDLUInt;
    t.bits = 1;
    return t;
  }
  const char* scan = nullptr;
  if (s.compare(0, 3, "int") == 0) {
    t.code = kDLInt;
    scan = s.c_str() + 3;
  } else if (s.compare(0, 4, "uint") == 0) {
    t.code = kDLUInt;
    scan = s.c_str() + 4;
  } else if (s.compare(0, 5, "float") == 0) {
    t.code = kDLFloat;
    scan = s.c_str() + 5;
  } else if (s.compare(0, 6, "bfloat") == 0) {
    t.code = kDLBfloat;
    scan = s.c_str() + 6;
  } else if (s.compare(0, 10, "e4m3_float") == 0) {
    t.code = DataType::kE4M3Float;
    scan = s.c_str() + 10;
  } else if (s.compare(0, 10, "e5m2_float") == 0) {
    t.code = DataType::kE5M2Float;
    scan = s.c_str() + 10;
  } else if (s.compare(0, 6, "handle") == 0) {
    t.code = kTVMOpaqueHandle;
    t.bits = 64;
    scan = s.c_str() + 6;
  } else {
    throw std::invalid_argument("unknown data type '" + s +
                                "' (expected e.g. float32, int8, uint1, bool, handle, void)");
  }
  char* end = const_cast<char*>(scan);
  if (*scan >= '0' && *scan <= '9') {
    unsigned long bits = std::strtoul(scan, &end, 10);
    if (bits == 0 || bits > 255) throw std::invalid_argument("bad bit width in '" + s + "'");
    t.bits = static_cast<uint8_t>(bits);
  }
  if (*end == 'x') {
    char* after = nullptr;
    unsigned long lanes = std::strtoul(end + 1, &after, 10);
    if (after == end + 1 || lanes == 0 || lanes > 65535)
      throw std::invalid_argument("bad lane count in '" + s + "'");
    t.lanes = static_cast<uint16_t>(lanes);
    end = after;
  }
  if (*end != '\0') throw std::invalid_argument("unknown data type '" + s + "'");
  return t;
}

inline std::ostream& operator<<(std::ostream& os, DLDataType t) {
  return os << DLDataType2String(t);
}

inline std::ostream& operator<<(std::ostream& os, const DataType& t) {
  return os << DLDataType2String(t);
}

}  // namespace runtime

using DataType = runtime::DataType;

}  // namespace tvm

#endif  // TVMRT_TVM_RUNTIME_DATA_TYPE_H_
