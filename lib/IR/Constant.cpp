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
uint64_t bitsOf(double d) {
  uint64_t bits;
  std::memcpy(&bits, &d, sizeof bits);
  return bits;
}
bool sameBits(double a, double b) { return bitsOf(a) == bitsOf(b); }
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

llvm::hash_code hash_value(const Constant &c) {
  auto kind = static_cast<unsigned>(c.kind());
  switch (c.kind()) {
  case ConstantKind::None:
    return llvm::hash_combine(kind);
  case ConstantKind::Bool:
    return llvm::hash_combine(kind, c.asBool());
  case ConstantKind::Int:
    return llvm::hash_combine(kind, c.asInt());
  case ConstantKind::Float:
    return llvm::hash_combine(kind, bitsOf(c.asFloat()));
  case ConstantKind::String:
    return llvm::hash_combine(kind, llvm::StringRef(c.asString()));
  case ConstantKind::IntList:
    return llvm::hash_combine(kind, llvm::hash_combine_range(c.asIntList().begin(), c.asIntList().end()));
  case ConstantKind::FloatList: {
    llvm::hash_code h = llvm::hash_combine(kind, c.asFloatList().size());
    for (double d : c.asFloatList())
      h = llvm::hash_combine(h, bitsOf(d));
    return h;
  }
  case ConstantKind::BoolList: {
    llvm::hash_code h = llvm::hash_combine(kind, c.asBoolList().size());
    for (bool b : c.asBoolList())
      h = llvm::hash_combine(h, b);
    return h;
  }
  case ConstantKind::Dtype:
    return llvm::hash_combine(kind, static_cast<int>(c.asDtype()));
  case ConstantKind::Layout:
    return llvm::hash_combine(kind, static_cast<int>(c.asLayout()));
  case ConstantKind::MemoryFormat:
    return llvm::hash_combine(kind, static_cast<int>(c.asMemoryFormat()));
  case ConstantKind::Device:
    return llvm::hash_combine(kind, static_cast<int>(c.asDevice().type()),
                              static_cast<int>(c.asDevice().index()), c.isExecutionDevice());
  default:
    // A kind added later: equal constants have equal kinds, so this stays consistent.
    return llvm::hash_combine(kind);
  }
}

} // namespace graphopt
