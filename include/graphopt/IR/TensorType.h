//===- TensorType.h - Types of IR values --------------------------*- C++ -*-===//
//
// A Value in the IR is either a tensor, described by TensorType (dtype, sizes,
// strides, device), or a scalar an operator returned (aten::sym_size.int gives
// an int). Strides are always stored explicitly, so views and permutes keep
// their real layout; the text form omits them when they are contiguous.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <absl/status/status.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringRef.h>

#include <cstdint>
#include <optional>
#include <utility>

namespace graphopt {

struct TensorType {
  /// Undefined means "no type known": the verifier reports it.
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  llvm::SmallVector<int64_t, 4> sizes;
  llvm::SmallVector<int64_t, 4> strides;
  c10::Device device{c10::DeviceType::CPU};
  /// Where the tensor starts in its storage, in elements of `dtype` (torch's
  /// storage_offset): non-zero for views into the middle of a storage. The
  /// importers and type inference record it; `.gir` prints it when non-zero.
  int64_t storageOffset = 0;

  TensorType() = default;
  TensorType(c10::ScalarType dtype, llvm::ArrayRef<int64_t> sizes,
             llvm::ArrayRef<int64_t> strides,
             c10::Device device = c10::Device(c10::DeviceType::CPU));

  /// A row-major contiguous tensor.
  static TensorType contiguous(c10::ScalarType dtype, llvm::ArrayRef<int64_t> sizes,
                               c10::Device device = c10::Device(c10::DeviceType::CPU));
  static llvm::SmallVector<int64_t, 4> contiguousStrides(llvm::ArrayRef<int64_t> sizes);

  bool isKnown() const { return dtype != c10::ScalarType::Undefined; }
  int64_t rank() const { return static_cast<int64_t>(sizes.size()); }
  bool isContiguous() const;
  int64_t numel() const;
  /// Bytes of storage the tensor spans given its strides (0 for an empty tensor).
  int64_t storageBytes() const;
  /// The bytes of its storage the tensor may touch, [first, end) from the
  /// storage's start: its offset and span (empty for an empty tensor).
  std::pair<int64_t, int64_t> storageByteRange() const;

  bool operator==(const TensorType &other) const;
  bool operator!=(const TensorType &other) const { return !(*this == other); }
};

/// What every tensor type must satisfy before anything sizes or makes a tensor
/// of it, checked where types enter (the parser, the importers, the verifier):
/// as many strides as sizes, sizes and strides non-negative, and its element
/// count and the bytes its strides span (from its storage offset, which is
/// non-negative) fit in int64. The message names the
/// dimension at fault; the caller adds the file, line or value.
absl::Status validateTensorType(const TensorType &t);

/// What a Value holds. None is a result an operator leaves undefined (an
/// undefined tensor: convolution_backward's grad_bias when output_mask says so).
enum class ValueKind : uint8_t { Tensor, Int, Float, Bool, None };

struct ValueType {
  ValueKind kind = ValueKind::Tensor;
  TensorType tensor; ///< Meaningful only when kind == Tensor.

  static ValueType ofTensor(TensorType t) { return ValueType{ValueKind::Tensor, std::move(t)}; }
  static ValueType ofScalar(ValueKind k) { return ValueType{k, TensorType()}; }
  /// A tensor whose dtype, sizes and strides are not known yet.
  static ValueType unknownTensor() { return ValueType{}; }

  bool isTensor() const { return kind == ValueKind::Tensor; }
  bool isKnown() const { return !isTensor() || tensor.isKnown(); }
  bool operator==(const ValueType &o) const {
    return kind == o.kind && (!isTensor() || tensor == o.tensor);
  }
  bool operator!=(const ValueType &o) const { return !(*this == o); }
};

/// Short dtype names used by the text form: f32, bf16, i64, bool, c64, ...
llvm::StringRef dtypeName(c10::ScalarType dtype);
/// Inverse of dtypeName; also accepts c10's own names (Float, Long, ...).
std::optional<c10::ScalarType> parseDtypeName(llvm::StringRef name);

/// Text-form names of layouts and memory formats (strided, channels_last, ...).
llvm::StringRef layoutName(c10::Layout layout);
std::optional<c10::Layout> parseLayoutName(llvm::StringRef name);
llvm::StringRef memoryFormatName(c10::MemoryFormat format);
std::optional<c10::MemoryFormat> parseMemoryFormatName(llvm::StringRef name);

} // namespace graphopt
