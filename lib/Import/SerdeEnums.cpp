//===- SerdeEnums.cpp - torch.export serde enums to c10 -------------------===//
#include "SerdeEnums.h"

namespace graphopt::serde {

std::optional<c10::ScalarType> toScalarType(ts::ScalarType t) {
  using S = ts::ScalarType;
  using C = c10::ScalarType;
  switch (t) {
  case S::BYTE: return C::Byte;
  case S::CHAR: return C::Char;
  case S::SHORT: return C::Short;
  case S::INT: return C::Int;
  case S::LONG: return C::Long;
  case S::HALF: return C::Half;
  case S::FLOAT: return C::Float;
  case S::DOUBLE: return C::Double;
  case S::COMPLEXHALF: return C::ComplexHalf;
  case S::COMPLEXFLOAT: return C::ComplexFloat;
  case S::COMPLEXDOUBLE: return C::ComplexDouble;
  case S::BOOL: return C::Bool;
  case S::BFLOAT16: return C::BFloat16;
  case S::UINT16: return C::UInt16;
  case S::FLOAT8E4M3FN: return C::Float8_e4m3fn;
  case S::FLOAT8E5M2: return C::Float8_e5m2;
  case S::FLOAT8E4M3FNUZ: return C::Float8_e4m3fnuz;
  case S::FLOAT8E5M2FNUZ: return C::Float8_e5m2fnuz;
  case S::UNKNOWN: break;
  }
  return std::nullopt;
}

std::optional<c10::Layout> toLayout(ts::Layout l) {
  using L = ts::Layout;
  switch (l) {
  case L::Strided: return c10::kStrided;
  case L::SparseCoo: return c10::kSparse;
  case L::SparseCsr: return c10::kSparseCsr;
  case L::SparseCsc: return c10::kSparseCsc;
  case L::SparseBsr: return c10::kSparseBsr;
  case L::SparseBsc: return c10::kSparseBsc;
  case L::_mkldnn: return c10::kMkldnn;
  case L::Unknown: break;
  }
  return std::nullopt;
}

std::optional<c10::MemoryFormat> toMemoryFormat(ts::MemoryFormat m) {
  using M = ts::MemoryFormat;
  switch (m) {
  case M::ContiguousFormat: return c10::MemoryFormat::Contiguous;
  case M::ChannelsLast: return c10::MemoryFormat::ChannelsLast;
  case M::ChannelsLast3d: return c10::MemoryFormat::ChannelsLast3d;
  case M::PreserveFormat: return c10::MemoryFormat::Preserve;
  case M::Unknown: break;
  }
  return std::nullopt;
}

std::optional<c10::Device> toDevice(const ts::Device &d) {
  try {
    c10::Device dev(d.get_type());
    if (d.get_index())
      dev.set_index(static_cast<c10::DeviceIndex>(*d.get_index()));
    return dev;
  } catch (const c10::Error &) {
    return std::nullopt;
  }
}

// The inverse maps search the forward ones, so the two cannot disagree.
std::optional<ts::ScalarType> fromScalarType(c10::ScalarType t) {
  for (int i = 0; i <= static_cast<int>(ts::ScalarType::FLOAT8E5M2FNUZ); ++i)
    if (toScalarType(static_cast<ts::ScalarType>(i)) == t)
      return static_cast<ts::ScalarType>(i);
  return std::nullopt;
}

std::optional<ts::Layout> fromLayout(c10::Layout l) {
  for (int i = 0; i <= static_cast<int>(ts::Layout::Strided); ++i)
    if (toLayout(static_cast<ts::Layout>(i)) == l)
      return static_cast<ts::Layout>(i);
  return std::nullopt;
}

std::optional<ts::MemoryFormat> fromMemoryFormat(c10::MemoryFormat m) {
  for (int i = 0; i <= static_cast<int>(ts::MemoryFormat::PreserveFormat); ++i)
    if (toMemoryFormat(static_cast<ts::MemoryFormat>(i)) == m)
      return static_cast<ts::MemoryFormat>(i);
  return std::nullopt;
}

ts::Device fromDevice(c10::Device d) {
  ts::Device out;
  out.set_type(c10::DeviceTypeName(d.type(), /*lower_case=*/true));
  if (d.has_index())
    out.set_index(static_cast<int64_t>(d.index()));
  return out;
}

} // namespace graphopt::serde
