//===- SchemaUtils.cpp - Matching IR arguments to operator schemas --------===//
#include "graphopt/IR/SchemaUtils.h"

#include "graphopt/IR/IValueConversion.h"

#include <ATen/core/jit_type.h>
#include <absl/strings/str_cat.h>

#include <algorithm>

namespace graphopt {

namespace {

using c10::TypeKind;

/// Strips one level of Optional; sets `optional` when it did.
c10::TypePtr unwrapOptional(const c10::TypePtr &type, bool &optional) {
  if (auto opt = type->cast<c10::OptionalType>()) {
    optional = true;
    return opt->getElementType();
  }
  optional = false;
  return type;
}

bool isTensorType(const c10::TypePtr &t) { return t->kind() == TypeKind::TensorType; }

std::string describeArgument(const Argument &a) {
  switch (a.kind()) {
  case Argument::Kind::Value:
    if (!a.getValue())
      return "a null value";
    return a.getValue()->isTensor() ? absl::StrCat("tensor %", a.getValue()->name().str())
                                    : absl::StrCat("scalar %", a.getValue()->name().str());
  case Argument::Kind::ValueList:
    return "a list of values";
  case Argument::Kind::Constant:
    return absl::StrCat("a constant of kind ", constantKindName(a.getConstant().kind()).str());
  }
  return "?";
}

/// Which constant kinds (and which scalar value kinds) a non-tensor type accepts.
bool scalarTypeAccepts(const c10::TypePtr &type, ConstantKind k) {
  switch (type->kind()) {
  case TypeKind::IntType:
  case TypeKind::SymIntType:
    return k == ConstantKind::Int;
  case TypeKind::FloatType:
  case TypeKind::SymFloatType:
    return k == ConstantKind::Float;
  case TypeKind::BoolType:
  case TypeKind::SymBoolType:
    return k == ConstantKind::Bool;
  case TypeKind::NumberType:
    return k == ConstantKind::Int || k == ConstantKind::Float || k == ConstantKind::Bool;
  case TypeKind::StringType:
    return k == ConstantKind::String;
  case TypeKind::ScalarTypeType:
    return k == ConstantKind::Dtype;
  case TypeKind::LayoutType:
    return k == ConstantKind::Layout;
  case TypeKind::MemoryFormatType:
    return k == ConstantKind::MemoryFormat;
  case TypeKind::DeviceObjType:
    return k == ConstantKind::Device;
  case TypeKind::ListType: {
    auto elem = type->castRaw<c10::ListType>()->getElementType();
    switch (elem->kind()) {
    case TypeKind::IntType:
    case TypeKind::SymIntType:
      return k == ConstantKind::IntList;
    case TypeKind::FloatType:
      return k == ConstantKind::FloatList;
    case TypeKind::BoolType:
      return k == ConstantKind::BoolList;
    default:
      return false;
    }
  }
  default:
    return false;
  }
}

bool scalarTypeAcceptsValue(const c10::TypePtr &type, ValueKind k) {
  switch (type->kind()) {
  case TypeKind::IntType:
  case TypeKind::SymIntType:
    return k == ValueKind::Int;
  case TypeKind::FloatType:
  case TypeKind::SymFloatType:
    return k == ValueKind::Float;
  case TypeKind::BoolType:
  case TypeKind::SymBoolType:
    return k == ValueKind::Bool;
  case TypeKind::NumberType:
    return k != ValueKind::Tensor;
  default:
    return false;
  }
}

} // namespace

ArgForm argFormOf(const c10::TypePtr &type) {
  bool optional;
  c10::TypePtr inner = unwrapOptional(type, optional);
  if (isTensorType(inner))
    return optional ? ArgForm::OptionalTensor : ArgForm::Tensor;
  if (auto list = inner->cast<c10::ListType>()) {
    bool elemOptional;
    c10::TypePtr elem = unwrapOptional(list->getElementType(), elemOptional);
    if (isTensorType(elem))
      return elemOptional ? ArgForm::OptionalTensorList : ArgForm::TensorList;
    if (elemOptional)
      return ArgForm::Unsupported;
    switch (elem->kind()) {
    case TypeKind::IntType:
    case TypeKind::SymIntType:
    case TypeKind::FloatType:
    case TypeKind::BoolType:
      return ArgForm::Scalar;
    default:
      return ArgForm::Unsupported;
    }
  }
  switch (inner->kind()) {
  case TypeKind::IntType:
  case TypeKind::SymIntType:
  case TypeKind::FloatType:
  case TypeKind::SymFloatType:
  case TypeKind::BoolType:
  case TypeKind::SymBoolType:
  case TypeKind::NumberType:
  case TypeKind::StringType:
  case TypeKind::ScalarTypeType:
  case TypeKind::LayoutType:
  case TypeKind::MemoryFormatType:
  case TypeKind::DeviceObjType:
    return ArgForm::Scalar;
  case TypeKind::GeneratorType:
    // Only `Generator? generator=None` is expressible: the executor seeds the RNG.
    return optional ? ArgForm::Scalar : ArgForm::Unsupported;
  default:
    return ArgForm::Unsupported;
  }
}

absl::Status checkArgument(const Argument &arg, const c10::Argument &schemaArg) {
  const c10::TypePtr &type = schemaArg.real_type();
  auto mismatch = [&](llvm::StringRef expected) {
    return absl::InvalidArgumentError(absl::StrCat("argument '", schemaArg.name(), "' (",
                                                   type->str(), ") expects ", expected.str(),
                                                   ", got ", describeArgument(arg)));
  };
  auto isTensorValue = [](Value *v) { return v && v->isTensor(); };
  // A Python number where a Tensor is expected (torch.export writes
  // aten::add.Tensor(%x, 1)) is a "wrapped number": a 0-d tensor that does not
  // take part in type promotion as a tensor would.
  auto isWrappedNumber = [&] {
    if (!arg.isConstant())
      return false;
    ConstantKind k = arg.getConstant().kind();
    return k == ConstantKind::Int || k == ConstantKind::Float || k == ConstantKind::Bool;
  };

  switch (argFormOf(type)) {
  case ArgForm::Tensor:
    if ((arg.isValue() && isTensorValue(arg.getValue())) || isWrappedNumber())
      return absl::OkStatus();
    return mismatch("a tensor value (or a number)");
  case ArgForm::OptionalTensor:
    if ((arg.isValue() && isTensorValue(arg.getValue())) ||
        (arg.isConstant() && arg.getConstant().isNone()) || isWrappedNumber())
      return absl::OkStatus();
    return mismatch("a tensor value, a number or None");
  case ArgForm::TensorList:
  case ArgForm::OptionalTensorList: {
    bool allowNone = argFormOf(type) == ArgForm::OptionalTensorList;
    if (!arg.isList())
      return mismatch(allowNone ? "a list of tensors or None" : "a list of tensors");
    for (Value *v : arg.getList())
      if (v ? !v->isTensor() : !allowNone)
        return mismatch(allowNone ? "a list of tensors or None" : "a list of tensors");
    return absl::OkStatus();
  }
  case ArgForm::Scalar: {
    bool optional;
    c10::TypePtr inner = unwrapOptional(type, optional);
    if (arg.isConstant()) {
      ConstantKind k = arg.getConstant().kind();
      if ((k == ConstantKind::None && optional) || scalarTypeAccepts(inner, k))
        return absl::OkStatus();
    } else if (arg.isValue() && arg.getValue() &&
               scalarTypeAcceptsValue(inner, arg.getValue()->type().kind)) {
      return absl::OkStatus();
    }
    return mismatch(absl::StrCat("a constant of type ", type->str()));
  }
  case ArgForm::Unsupported:
    return absl::UnimplementedError(absl::StrCat("argument '", schemaArg.name(), "' has type ",
                                                 type->str(),
                                                 ", which graph-opt does not support"));
  }
  return absl::OkStatus();
}

std::optional<ValueKind> returnValueKind(const c10::Argument &ret) {
  const c10::TypePtr &t = ret.real_type();
  if (isTensorType(t))
    return ValueKind::Tensor;
  if (auto list = t->cast<c10::ListType>())
    if (isTensorType(list->getElementType()))
      return ValueKind::Tensor;
  switch (t->kind()) {
  case TypeKind::IntType:
  case TypeKind::SymIntType:
    return ValueKind::Int;
  case TypeKind::FloatType:
  case TypeKind::SymFloatType:
    return ValueKind::Float;
  case TypeKind::BoolType:
  case TypeKind::SymBoolType:
    return ValueKind::Bool;
  default:
    return std::nullopt;
  }
}

bool returnsTensorList(const c10::FunctionSchema &schema) {
  if (schema.returns().size() != 1)
    return false;
  auto list = schema.returns()[0].real_type()->cast<c10::ListType>();
  return list && isTensorType(list->getElementType());
}

absl::Status checkReturnValue(const Value &value, const c10::Argument &ret) {
  if (ret.real_type()->kind() == TypeKind::NumberType) {
    if (!value.isTensor())
      return absl::OkStatus();
  } else if (auto kind = returnValueKind(ret)) {
    if (*kind == value.type().kind)
      return absl::OkStatus();
    // An operator may leave a Tensor result undefined (not for a Tensor[] element).
    if (value.type().kind == ValueKind::None && ret.real_type()->kind() == c10::TypeKind::TensorType)
      return absl::OkStatus();
  } else {
    return absl::UnimplementedError(absl::StrCat("return type ", ret.real_type()->str(),
                                                 " is not supported by graph-opt"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("output %", value.name().str(), " is ",
                   value.isTensor() ? "a tensor" : value.type().kind == ValueKind::None ? "none" : "a scalar",
                   " but the schema returns ", ret.real_type()->str()));
}

absl::StatusOr<Constant> coerceConstant(const Constant &c, const c10::TypePtr &type) {
  bool optional;
  c10::TypePtr inner = unwrapOptional(type, optional);
  ConstantKind k = c.kind();
  if ((k == ConstantKind::None && optional) || scalarTypeAccepts(inner, k))
    return c;
  if (k == ConstantKind::Int && scalarTypeAccepts(inner, ConstantKind::Float))
    return Constant::ofFloat(static_cast<double>(c.asInt()));
  if (k == ConstantKind::IntList && scalarTypeAccepts(inner, ConstantKind::FloatList)) {
    std::vector<double> v(c.asIntList().begin(), c.asIntList().end());
    return Constant::ofFloatList(v);
  }
  // An empty list literal parses as an int list; it fits any list type.
  if (k == ConstantKind::IntList && c.asIntList().empty()) {
    if (scalarTypeAccepts(inner, ConstantKind::FloatList))
      return Constant::ofFloatList({});
    if (scalarTypeAccepts(inner, ConstantKind::BoolList))
      return Constant::ofBoolList({});
  }
  return absl::InvalidArgumentError(absl::StrCat("expected a constant of type ", type->str(),
                                                 ", found a ", constantKindName(k).str()));
}

std::optional<Constant> schemaDefault(const c10::Argument &schemaArg) {
  if (!schemaArg.default_value())
    return std::nullopt;
  return constantFromIValue(*schemaArg.default_value(), schemaArg.real_type());
}

bool isSchemaDefault(const Argument &arg, const c10::Argument &schemaArg) {
  if (!arg.isConstant())
    return false;
  auto def = schemaDefault(schemaArg);
  return def && *def == arg.getConstant();
}

// --- ArgumentSlots ---------------------------------------------------------------

ArgumentSlots::ArgumentSlots(const c10::FunctionSchema &schema)
    : schema_(schema), slots_(schema.arguments().size()) {}

std::string ArgumentSlots::opName() const {
  const auto &n = schema_.operator_name();
  return n.overload_name.empty() ? n.name : absl::StrCat(n.name, ".", n.overload_name);
}

absl::StatusOr<unsigned> ArgumentSlots::positional() {
  const auto &args = schema_.arguments();
  if (nextPositional_ >= args.size() || args[nextPositional_].kwarg_only())
    return absl::InvalidArgumentError(absl::StrCat("too many positional arguments for ", opName(),
                                                   "; its schema is ", c10::toString(schema_)));
  unsigned slot = nextPositional_++;
  if (slots_[slot])
    return absl::InvalidArgumentError(
        absl::StrCat("argument '", args[slot].name(), "' given twice"));
  return slot;
}

absl::StatusOr<unsigned> ArgumentSlots::named(llvm::StringRef name) {
  const auto &args = schema_.arguments();
  auto it = std::find_if(args.begin(), args.end(),
                         [&](const c10::Argument &a) { return a.name() == name; });
  if (it == args.end())
    return absl::InvalidArgumentError(absl::StrCat(opName(), " has no argument named '", name.str(),
                                                   "'; its schema is ", c10::toString(schema_)));
  unsigned slot = static_cast<unsigned>(it - args.begin());
  if (slots_[slot])
    return absl::InvalidArgumentError(absl::StrCat("argument '", name.str(), "' given twice"));
  return slot;
}

void ArgumentSlots::set(unsigned slot, Argument arg) {
  if (arg.isConstant()) {
    auto coerced = coerceConstant(arg.getConstant(), schema_.arguments()[slot].real_type());
    if (coerced.ok())
      arg = Argument::constant(std::move(*coerced));
  }
  slots_[slot] = std::move(arg);
}

absl::StatusOr<std::vector<Argument>> ArgumentSlots::finish() const {
  const auto &args = schema_.arguments();
  std::vector<Argument> out;
  out.reserve(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    if (slots_[i]) {
      out.push_back(*slots_[i]);
      continue;
    }
    if (!args[i].default_value())
      return absl::InvalidArgumentError(absl::StrCat("missing argument '", args[i].name(), "' of ",
                                                     opName(), "; its schema is ",
                                                     c10::toString(schema_)));
    auto def = schemaDefault(args[i]);
    if (!def)
      return absl::InvalidArgumentError(absl::StrCat("the default of argument '", args[i].name(),
                                                     "' of ", opName(),
                                                     " cannot be represented; write it out"));
    out.push_back(Argument::constant(std::move(*def)));
  }
  return out;
}

} // namespace graphopt
