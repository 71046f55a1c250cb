//===- Constant.cpp -------------------------------------------------------===//
#include "graphopt/IR/Constant.h"

#include <cstring>

namespace graphopt {

llvm::StringRef constantKindName(ConstantKind kind) {
  switch (kind) {
  case ConstantKind::None: return "None";
  case ConstantKind::Bool: return "bool";
  case ConstantKind::Int: return "int";
  case ConstantKind::Float: return "float";
  case ConstantKind::String: return "string";
  case ConstantKind::IntList: return "int list";
  case ConstantKind::FloatList: return "float list";
  case ConstantKind::BoolList: return "bool list";
  case ConstantKind::Dtype: return "dtype";
  case ConstantKind::Layout: return "layout";
  case ConstantKind::MemoryFormat: return "memory format";
  case ConstantKind::Device: return "device";
  }
  return "?";
}

namespace {
bool sameBits(double a, double b) { return std::memcmp(&a, &b, sizeof(double)) == 0; }
} // namespace

bool Constant::operator==(const Constant &other) const {
  if (kind() != other.kind())
    return false;
  switch (kind()) {
  case ConstantKind::Float:
    return sameBits(asFloat(), other.asFloat());
  case ConstantKind::FloatList: {
    auto a = asFloatList(), b = other.asFloatList();
    if (a.size() != b.size())
      return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!sameBits(a[i], b[i]))
        return false;
    return true;
  }
  default:
    return payload_ == other.payload_;
  }
}

} // namespace graphopt
