//===- Constant.h - Literal (non-tensor) operator arguments -------*- C++ -*-===//
//
// Every non-tensor argument of an ATen operator call is a Constant: none, bool,
// int, float, string, int/float/bool lists, dtype, layout, memory format and
// device. Tensor arguments (including optional tensors and tensor lists) are
// Values; see Argument in Graph.h.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Layout.h>
#include <c10/core/MemoryFormat.h>
#include <c10/core/ScalarType.h>
#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/Hashing.h>
#include <llvm/ADT/StringRef.h>

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace graphopt {

/// The order matches the alternatives of Constant's variant.
enum class ConstantKind : uint8_t {
  None,
  Bool,
  Int,
  Float,
  String,
  IntList,
  FloatList,
  BoolList,
  Dtype,
  Layout,
  MemoryFormat,
  Device,
};

llvm::StringRef constantKindName(ConstantKind kind);

class Constant {
public:
  Constant() = default; ///< None.

  static Constant none() { return Constant(); }
  static Constant ofBool(bool v) { return Constant(Payload(std::in_place_index<1>, v)); }
  static Constant ofInt(int64_t v) { return Constant(Payload(std::in_place_index<2>, v)); }
  static Constant ofFloat(double v) { return Constant(Payload(std::in_place_index<3>, v)); }
  static Constant ofString(std::string v) {
    return Constant(Payload(std::in_place_index<4>, std::move(v)));
  }
  static Constant ofIntList(llvm::ArrayRef<int64_t> v) {
    return Constant(Payload(std::in_place_index<5>, v.vec()));
  }
  static Constant ofFloatList(llvm::ArrayRef<double> v) {
    return Constant(Payload(std::in_place_index<6>, v.vec()));
  }
  static Constant ofBoolList(std::vector<bool> v) {
    return Constant(Payload(std::in_place_index<7>, std::move(v)));
  }
  static Constant ofDtype(c10::ScalarType v) { return Constant(Payload(std::in_place_index<8>, v)); }
  static Constant ofLayout(c10::Layout v) { return Constant(Payload(std::in_place_index<9>, v)); }
  static Constant ofMemoryFormat(c10::MemoryFormat v) {
    return Constant(Payload(std::in_place_index<10>, v));
  }
  static Constant ofDevice(c10::Device v) {
    return Constant(Payload(std::in_place_index<11>, DeviceValue{v, false}));
  }
  /// The symbolic execution device: "whatever device the graph runs on". The
  /// executor passes the device it runs on wherever this appears; an explicit
  /// device (ofDevice) is passed as written. `modelDevice` is the device the
  /// graph's types assume (the device the model was exported on, normally cpu):
  /// type inference and asDevice() use it. Its kind is Device.
  static Constant ofExecutionDevice(c10::Device modelDevice = c10::Device(c10::DeviceType::CPU)) {
    return Constant(Payload(std::in_place_index<11>, DeviceValue{modelDevice, true}));
  }

  ConstantKind kind() const { return static_cast<ConstantKind>(payload_.index()); }
  bool isNone() const { return kind() == ConstantKind::None; }

  bool asBool() const { return std::get<1>(payload_); }
  int64_t asInt() const { return std::get<2>(payload_); }
  double asFloat() const { return std::get<3>(payload_); }
  const std::string &asString() const { return std::get<4>(payload_); }
  llvm::ArrayRef<int64_t> asIntList() const { return std::get<5>(payload_); }
  llvm::ArrayRef<double> asFloatList() const { return std::get<6>(payload_); }
  const std::vector<bool> &asBoolList() const { return std::get<7>(payload_); }
  c10::ScalarType asDtype() const { return std::get<8>(payload_); }
  c10::Layout asLayout() const { return std::get<9>(payload_); }
  c10::MemoryFormat asMemoryFormat() const { return std::get<10>(payload_); }
  /// The device; for the execution device, the model's device it stands for.
  c10::Device asDevice() const { return std::get<11>(payload_).device; }
  /// Whether this is the symbolic execution device (see ofExecutionDevice).
  bool isExecutionDevice() const {
    return kind() == ConstantKind::Device && std::get<11>(payload_).symbolic;
  }

  /// Structural equality; floats compare by bit pattern, so NaN equals NaN and
  /// 0.0 differs from -0.0 (what CSE and exact round trips need).
  bool operator==(const Constant &other) const;
  bool operator!=(const Constant &other) const { return !(*this == other); }

private:
  struct DeviceValue {
    c10::Device device;
    bool symbolic;
    bool operator==(const DeviceValue &o) const {
      return device == o.device && symbolic == o.symbolic;
    }
  };
  using Payload =
      std::variant<std::monostate, bool, int64_t, double, std::string, std::vector<int64_t>,
                   std::vector<double>, std::vector<bool>, c10::ScalarType, c10::Layout,
                   c10::MemoryFormat, DeviceValue>;
  explicit Constant(Payload p) : payload_(std::move(p)) {}
  Payload payload_;
};

/// Consistent with Constant::operator==: floats hash by bit pattern (value
/// numbering, CSE).
llvm::hash_code hash_value(const Constant &c);

} // namespace graphopt
