//===- IValueConversion.cpp -----------------------------------------------===//
#include "graphopt/IR/IValueConversion.h"

#include "graphopt/IR/SchemaUtils.h"

#include <ATen/ScalarOps.h>
#include <absl/strings/str_cat.h>

namespace graphopt {

c10::IValue constantToIValue(const Constant &c) {
  switch (c.kind()) {
  case ConstantKind::None: return c10::IValue();
  case ConstantKind::Bool: return c.asBool();
  case ConstantKind::Int: return c.asInt();
  case ConstantKind::Float: return c.asFloat();
  case ConstantKind::String: return c.asString();
  case ConstantKind::IntList: return c10::List<int64_t>(c.asIntList().vec());
  case ConstantKind::FloatList: return c10::List<double>(c.asFloatList().vec());
  case ConstantKind::BoolList: {
    c10::List<bool> l;
    for (bool b : c.asBoolList())
      l.push_back(b);
    return l;
  }
  case ConstantKind::Dtype: return c.asDtype();
  case ConstantKind::Layout: return c.asLayout();
  case ConstantKind::MemoryFormat: return c.asMemoryFormat();
  case ConstantKind::Device: return c.asDevice();
  }
  return c10::IValue();
}

std::optional<Constant> constantFromIValue(const c10::IValue &v, const c10::TypePtr &type) {
  c10::TypePtr inner = type;
  if (auto opt = type->cast<c10::OptionalType>())
    inner = opt->getElementType();
  if (v.isNone())
    return Constant::none();
  if (v.isInt()) {
    switch (inner->kind()) {
    case c10::TypeKind::ScalarTypeType:
      return Constant::ofDtype(static_cast<c10::ScalarType>(v.toInt()));
    case c10::TypeKind::LayoutType:
      return Constant::ofLayout(static_cast<c10::Layout>(v.toInt()));
    case c10::TypeKind::MemoryFormatType:
      return Constant::ofMemoryFormat(static_cast<c10::MemoryFormat>(v.toInt()));
    default:
      return Constant::ofInt(v.toInt());
    }
  }
  if (v.isDouble())
    return Constant::ofFloat(v.toDouble());
  if (v.isBool())
    return Constant::ofBool(v.toBool());
  if (v.isString())
    return Constant::ofString(v.toStringRef());
  if (v.isDevice())
    return Constant::ofDevice(v.toDevice());
  if (v.isIntList())
    return Constant::ofIntList(v.toIntVector());
  if (v.isDoubleList())
    return Constant::ofFloatList(v.toDoubleVector());
  if (v.isBoolList()) {
    std::vector<bool> b;
    for (bool x : v.toBoolList())
      b.push_back(x);
    return Constant::ofBoolList(std::move(b));
  }
  if (v.isList() && v.toListRef().empty()) {
    // An untyped empty list: take the kind from the schema type.
    if (auto list = inner->cast<c10::ListType>()) {
      switch (list->getElementType()->kind()) {
      case c10::TypeKind::IntType:
      case c10::TypeKind::SymIntType:
        return Constant::ofIntList({});
      case c10::TypeKind::FloatType:
        return Constant::ofFloatList({});
      case c10::TypeKind::BoolType:
        return Constant::ofBoolList({});
      default:
        break;
      }
    }
  }
  return std::nullopt;
}

absl::StatusOr<c10::IValue>
argumentToIValue(const Node &node, unsigned i,
                 llvm::function_ref<absl::StatusOr<c10::IValue>(const Value *)> valueOf,
                 c10::Device numberDevice, c10::Device device, DeviceConstants replace) {
  const Argument &a = node.arg(i);
  ArgForm form = argFormOf(node.schema().arguments()[i].real_type());
  switch (a.kind()) {
  case Argument::Kind::Value:
    return valueOf(a.getValue());
  case Argument::Kind::ValueList: {
    if (form == ArgForm::OptionalTensorList) {
      c10::List<std::optional<at::Tensor>> list;
      for (const Value *v : a.getList()) {
        if (!v) {
          list.push_back(std::nullopt);
          continue;
        }
        auto t = valueOf(v);
        if (!t.ok())
          return t.status();
        list.push_back(t->toTensor());
      }
      return c10::IValue(list);
    }
    c10::List<at::Tensor> list;
    for (const Value *v : a.getList()) {
      if (!v)
        return absl::FailedPreconditionError(
            absl::StrCat("node ", node.describe(), ": None in a tensor list"));
      auto t = valueOf(v);
      if (!t.ok())
        return t.status();
      list.push_back(t->toTensor());
    }
    return c10::IValue(list);
  }
  case Argument::Kind::Constant: {
    const Constant &c = a.getConstant();
    if ((form == ArgForm::Tensor || form == ArgForm::OptionalTensor) && !c.isNone()) {
      c10::Scalar s = c.kind() == ConstantKind::Int     ? c10::Scalar(c.asInt())
                      : c.kind() == ConstantKind::Float ? c10::Scalar(c.asFloat())
                                                        : c10::Scalar(c.asBool());
      at::Tensor t = c10::scalar_to_tensor(s, numberDevice);
      t.unsafeGetTensorImpl()->set_wrapped_number(true);
      return c10::IValue(t);
    }
    if (c.kind() == ConstantKind::Device &&
        (c.isExecutionDevice() || replace == DeviceConstants::All))
      return c10::IValue(device);
    return constantToIValue(c);
  }
  }
  return c10::IValue();
}

} // namespace graphopt
