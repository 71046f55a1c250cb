//===- Printer.cpp - Writing the .gir text form ---------------------------===//
#include "graphopt/IR/Printer.h"

#include "graphopt/IR/SchemaUtils.h"

#include <llvm/Support/Format.h>

#include <cctype>
#include <charconv>
#include <cmath>

namespace graphopt {

namespace {

void printString(llvm::raw_ostream &os, llvm::StringRef s) {
  os << '"';
  for (unsigned char c : s) {
    switch (c) {
    case '"': os << "\\\""; break;
    case '\\': os << "\\\\"; break;
    case '\n': os << "\\n"; break;
    case '\t': os << "\\t"; break;
    default:
      if (c < 0x20 || c >= 0x7f)
        os << "\\x" << llvm::format_hex_no_prefix(c, 2);
      else
        os << c;
    }
  }
  os << '"';
}

template <typename T, typename F>
void printList(llvm::raw_ostream &os, llvm::ArrayRef<T> items, F printItem) {
  os << '[';
  for (size_t i = 0; i < items.size(); ++i) {
    if (i)
      os << ", ";
    printItem(items[i]);
  }
  os << ']';
}

void printArgument(llvm::raw_ostream &os, const Argument &a) {
  switch (a.kind()) {
  case Argument::Kind::Value:
    if (a.getValue())
      os << '%' << a.getValue()->name();
    else
      os << "<null>";
    return;
  case Argument::Kind::Constant:
    printConstant(os, a.getConstant());
    return;
  case Argument::Kind::ValueList:
    printList<Value *>(os, a.getList(), [&](Value *v) {
      if (v)
        os << '%' << v->name();
      else
        os << "None";
    });
    return;
  }
}

/// An attribute key: bare when it reads back as one identifier token, quoted otherwise.
void printAttrKey(llvm::raw_ostream &os, llvm::StringRef key) {
  bool bare = !key.empty() && (std::isalpha(static_cast<unsigned char>(key[0])) || key[0] == '_');
  for (char c : key)
    bare &= std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
  if (bare)
    os << key;
  else
    printString(os, key);
}

void printInts(llvm::raw_ostream &os, llvm::ArrayRef<int64_t> ints) {
  printList<int64_t>(os, ints, [&](int64_t v) { os << v; });
}

} // namespace

void printFloat(llvm::raw_ostream &os, double value) {
  if (std::isnan(value)) {
    os << "nan";
    return;
  }
  if (std::isinf(value)) {
    os << (value < 0 ? "-inf" : "inf");
    return;
  }
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), value);
  llvm::StringRef text(buf, res.ptr - buf);
  os << text;
  if (text.find_first_of(".e") == llvm::StringRef::npos)
    os << ".0";
}

void printConstant(llvm::raw_ostream &os, const Constant &c) {
  switch (c.kind()) {
  case ConstantKind::None: os << "None"; return;
  case ConstantKind::Bool: os << (c.asBool() ? "true" : "false"); return;
  case ConstantKind::Int: os << c.asInt(); return;
  case ConstantKind::Float: printFloat(os, c.asFloat()); return;
  case ConstantKind::String: printString(os, c.asString()); return;
  case ConstantKind::IntList: printInts(os, c.asIntList()); return;
  case ConstantKind::FloatList:
    printList<double>(os, c.asFloatList(), [&](double v) { printFloat(os, v); });
    return;
  case ConstantKind::BoolList: {
    std::vector<int> bits(c.asBoolList().begin(), c.asBoolList().end());
    printList<int>(os, bits, [&](int b) { os << (b ? "true" : "false"); });
    return;
  }
  case ConstantKind::Dtype: os << dtypeName(c.asDtype()); return;
  case ConstantKind::Layout: os << layoutName(c.asLayout()); return;
  case ConstantKind::MemoryFormat: os << memoryFormatName(c.asMemoryFormat()); return;
  case ConstantKind::Device:
    if (!c.isExecutionDevice())
      os << c.asDevice().str();
    else if (c.asDevice().is_cpu())
      os << "exec_device";
    else
      os << "exec_device(" << c.asDevice().str() << ')';
    return;
  }
}

void printType(llvm::raw_ostream &os, const ValueType &type) {
  switch (type.kind) {
  case ValueKind::Int: os << "int"; return;
  case ValueKind::Float: os << "float"; return;
  case ValueKind::Bool: os << "bool"; return;
  case ValueKind::None: os << "none"; return;
  case ValueKind::Tensor: break;
  }
  const TensorType &t = type.tensor;
  if (!t.isKnown()) {
    os << '?';
    return;
  }
  os << dtypeName(t.dtype);
  printInts(os, t.sizes);
  bool showStrides = !t.isContiguous();
  bool showOffset = t.storageOffset != 0;
  bool showDevice = !t.device.is_cpu();
  if (!showStrides && !showOffset && !showDevice)
    return;
  const char *separator = "";
  os << '{';
  if (showStrides) {
    os << "strides=";
    printInts(os, t.strides);
    separator = ", ";
  }
  if (showOffset) {
    os << separator << "offset=" << t.storageOffset;
    separator = ", ";
  }
  if (showDevice)
    os << separator << "device=" << t.device.str();
  os << '}';
}

void printNode(llvm::raw_ostream &os, const Node &node) {
  for (unsigned i = 0; i < node.numOutputs(); ++i)
    os << (i ? ", %" : "%") << node.output(i)->name();
  if (node.numOutputs())
    os << " = ";
  os << node.opName() << '(';

  // Arguments equal to their schema default are left out: trailing positional
  // ones, and keyword-only ones (printed as name=value when they differ).
  const auto &schemaArgs = node.schema().arguments();
  bool schemaMatches = schemaArgs.size() == node.numArgs();
  auto isDefault = [&](unsigned i) {
    return schemaMatches && isSchemaDefault(node.arg(i), schemaArgs[i]);
  };
  int lastPositional = -1;
  for (unsigned i = 0; i < node.numArgs(); ++i)
    if ((!schemaMatches || !schemaArgs[i].kwarg_only()) && !isDefault(i))
      lastPositional = static_cast<int>(i);
  bool first = true;
  for (unsigned i = 0; i < node.numArgs(); ++i) {
    bool kwarg = schemaMatches && schemaArgs[i].kwarg_only();
    if (kwarg ? isDefault(i) : static_cast<int>(i) > lastPositional)
      continue;
    os << (first ? "" : ", ");
    first = false;
    if (kwarg)
      os << schemaArgs[i].name() << '=';
    printArgument(os, node.arg(i));
  }
  os << ')';

  if (!node.attrs().empty()) {
    os << " {";
    bool firstAttr = true;
    for (const auto &[key, value] : node.attrs()) {
      os << (firstAttr ? "" : ", ");
      firstAttr = false;
      printAttrKey(os, key);
      os << " = ";
      printConstant(os, value);
    }
    os << '}';
  }

  if (node.numOutputs()) {
    os << " : ";
    for (unsigned i = 0; i < node.numOutputs(); ++i) {
      if (i)
        os << ", ";
      printType(os, node.output(i)->type());
    }
  }
}

void printGraph(llvm::raw_ostream &os, const Graph &graph) {
  os << "graph @" << graph.name() << " {\n";
  for (const GraphInput &in : graph.inputs()) {
    os << "  input %" << in.value->name() << " : ";
    printType(os, in.value->type());
    os << ' ' << inputRoleName(in.role);
    if (!in.target.empty()) {
      os << ' ';
      printString(os, in.target);
    }
    if (in.tiedTo)
      os << " tied %" << in.tiedTo->name();
    os << '\n';
  }
  std::optional<Phase> current;
  for (const Node &n : graph.nodes()) {
    if (current != n.phase()) {
      current = n.phase();
      os << phaseName(n.phase()) << ":\n";
    }
    os << "  ";
    printNode(os, n);
    os << '\n';
  }
  for (const GraphOutput &out : graph.outputs()) {
    os << "  output %" << (out.value ? out.value->name() : llvm::StringRef("<null>")) << ' '
       << outputRoleName(out.role);
    if (!out.target.empty()) {
      os << ' ';
      printString(os, out.target);
    }
    os << '\n';
  }
  os << "}\n";
}

namespace {
/// What `print(os, x)` writes, as a string.
template <typename T, typename Print> std::string printToString(const T &x, Print print) {
  std::string s;
  llvm::raw_string_ostream os(s);
  print(os, x);
  return os.str();
}
} // namespace

std::string printGraphToString(const Graph &graph) { return printToString(graph, printGraph); }
std::string printTypeToString(const ValueType &type) { return printToString(type, printType); }
std::string printConstantToString(const Constant &constant) {
  return printToString(constant, printConstant);
}

} // namespace graphopt
