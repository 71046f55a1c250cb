//===- Parser.cpp - Reading the .gir text form ----------------------------===//
//
// A recursive-descent parser over the Lexer's tokens. Operator arguments are
// read generically, then matched to the operator's schema: keyword arguments
// by name, missing ones filled from schema defaults, literals coerced where
// lossless (1 -> 1.0 for a float argument). Kind mismatches the schema would
// reject are left for the verifier, which names the node; syntax errors and
// unresolvable names are reported here with file:line:col.
//
//===----------------------------------------------------------------------===//
#include "graphopt/IR/Parser.h"

#include "Lexer.h"
#include "graphopt/IR/SchemaUtils.h"
#include "graphopt/Support/FileIO.h"

#include <absl/strings/str_cat.h>
#include <llvm/ADT/StringMap.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace graphopt {

namespace {

/// An argument as written, before it is matched to the schema.
struct ParsedArg {
  enum Kind { Value, Constant, List } kind = Constant;
  graphopt::Value *value = nullptr;
  graphopt::Constant constant;
  /// List elements: a value, None (value == null, isNone), or a constant.
  struct Elem {
    graphopt::Value *value = nullptr;
    graphopt::Constant constant;
  };
  std::vector<Elem> elems;
  Token loc;
};

class Parser {
public:
  Parser(llvm::StringRef text, llvm::StringRef bufferName) : lex_(text), bufferName_(bufferName) {
    tok_ = lex_.next();
  }

  absl::StatusOr<std::unique_ptr<Graph>> parse();
  absl::StatusOr<std::vector<ValueType>> parseTypes();

private:
  // --- token helpers ---------------------------------------------------------
  void consume() { tok_ = lex_.next(); }
  bool isIdent(llvm::StringRef s) const { return tok_.kind == Token::Ident && tok_.text == s; }
  absl::Status errorAt(const Token &at, llvm::StringRef message) const;
  absl::Status expected(llvm::StringRef what) const;
  absl::Status expect(Token::Kind kind, llvm::StringRef what);
  static std::string describe(const Token &t);

  // --- grammar ---------------------------------------------------------------
  absl::Status parseItem();
  absl::Status parseInput();
  absl::Status parseOutput();
  absl::Status parseNode();
  // parseNode's steps.
  /// `%a, %b =` before an operator (none without it).
  absl::StatusOr<std::vector<Token>> parseResultNames();
  /// `(positional, name=value)`, into `slots` (of `schema`); stops at the ')'.
  absl::Status parseArguments(const c10::FunctionSchema &schema, ArgumentSlots &slots);
  /// `: type, type` after the call, or the schema's return kinds; checks
  /// that `numResults` names fit what `opTok`'s `schema` returns.
  absl::StatusOr<std::vector<ValueType>> parseResultTypes(const Token &opTok,
                                                          const c10::FunctionSchema &schema,
                                                          size_t numResults);
  absl::StatusOr<ValueType> parseType();
  absl::StatusOr<std::vector<int64_t>> parseIntList();
  absl::StatusOr<int64_t> parseIntToken();
  absl::StatusOr<double> parseFloatToken();
  absl::StatusOr<ParsedArg> parseArgValue();
  absl::StatusOr<graphopt::Constant> parseScalarConstant();
  absl::StatusOr<c10::Device> parseDeviceRest(const Token &t);
  absl::StatusOr<std::vector<Node::Attribute>> parseAttrDict();
  absl::StatusOr<graphopt::Constant> constantList(const ParsedArg &parsed);
  absl::StatusOr<Argument> toArgument(ParsedArg parsed, const c10::Argument &schemaArg);
  absl::StatusOr<graphopt::Value *> lookupValue(const Token &ref);
  absl::Status checkNewName(const Token &ref);

  Lexer lex_;
  std::string bufferName_;
  Token tok_;
  std::unique_ptr<Graph> graph_;
  llvm::StringMap<graphopt::Value *> values_;
  Phase phase_ = Phase::Forward;
};

std::string Parser::describe(const Token &t) {
  switch (t.kind) {
  case Token::Eof: return "end of file";
  case Token::Error: return t.text;
  case Token::ValueRef: return "'%" + t.text + "'";
  case Token::GlobalRef: return "'@" + t.text + "'";
  case Token::String: return "a string";
  default: return "'" + t.text + "'";
  }
}

absl::Status Parser::errorAt(const Token &at, llvm::StringRef message) const {
  // Copy the line's tabs so the caret lines up however tabs are shown.
  llvm::StringRef line = lex_.lineText(at.line);
  std::string caret;
  for (unsigned i = 0; i + 1 < at.col; ++i)
    caret.push_back(i < line.size() && line[i] == '\t' ? '\t' : ' ');
  return absl::InvalidArgumentError(absl::StrCat(bufferName_, ":", at.line, ":", at.col,
                                                 ": ", message.str(), "\n",
                                                 line.str(), "\n", caret, "^"));
}

absl::Status Parser::expected(llvm::StringRef what) const {
  if (tok_.kind == Token::Error)
    return errorAt(tok_, tok_.text);
  return errorAt(tok_, absl::StrCat("expected ", what.str(), ", found ", describe(tok_)));
}

absl::Status Parser::expect(Token::Kind kind, llvm::StringRef what) {
  if (tok_.kind != kind)
    return expected(what);
  consume();
  return absl::OkStatus();
}

#define GRAPHOPT_RETURN_IF_ERROR(expr)                                                             \
  do {                                                                                             \
    absl::Status _st = (expr);                                                                     \
    if (!_st.ok())                                                                                 \
      return _st;                                                                                  \
  } while (0)

#define GRAPHOPT_ASSIGN_OR_RETURN(lhs, expr)                                                       \
  auto lhs##_or = (expr);                                                                          \
  if (!lhs##_or.ok())                                                                              \
    return lhs##_or.status();                                                                      \
  auto lhs = std::move(*lhs##_or)

absl::StatusOr<std::unique_ptr<Graph>> Parser::parse() {
  if (!isIdent("graph"))
    return expected("'graph'");
  consume();
  if (tok_.kind != Token::GlobalRef)
    return expected("a graph name like '@main'");
  graph_ = std::make_unique<Graph>(tok_.text);
  consume();
  GRAPHOPT_RETURN_IF_ERROR(expect(Token::LBrace, "'{'"));
  while (tok_.kind != Token::RBrace) {
    if (tok_.kind == Token::Eof)
      return expected("'}' to close the graph");
    GRAPHOPT_RETURN_IF_ERROR(parseItem());
  }
  consume();
  if (tok_.kind != Token::Eof)
    return expected("end of file after the graph");
  return std::move(graph_);
}

absl::StatusOr<std::vector<ValueType>> Parser::parseTypes() {
  std::vector<ValueType> types;
  while (tok_.kind != Token::Eof) {
    if (!types.empty())
      GRAPHOPT_RETURN_IF_ERROR(expect(Token::Comma, "',' between types"));
    GRAPHOPT_ASSIGN_OR_RETURN(t, parseType());
    types.push_back(std::move(t));
  }
  return types;
}

absl::Status Parser::parseItem() {
  if (isIdent("input"))
    return parseInput();
  if (isIdent("output"))
    return parseOutput();
  if (tok_.kind == Token::Ident) {
    if (auto phase = parsePhaseName(tok_.text)) {
      consume();
      phase_ = *phase;
      return expect(Token::Colon, "':' after the phase label");
    }
  }
  if (tok_.kind == Token::ValueRef ||
      (tok_.kind == Token::Ident && llvm::StringRef(tok_.text).contains("::")))
    return parseNode();
  return expected("'input', 'output', a phase label (forward:, backward:, optimizer:) or a node");
}

absl::Status Parser::checkNewName(const Token &ref) {
  if (values_.count(ref.text))
    return errorAt(ref, absl::StrCat("redefinition of value %", ref.text));
  return absl::OkStatus();
}

absl::StatusOr<Value *> Parser::lookupValue(const Token &ref) {
  auto it = values_.find(ref.text);
  if (it == values_.end())
    return errorAt(ref, absl::StrCat("use of undefined value %", ref.text));
  return it->second;
}

absl::Status Parser::parseInput() {
  consume(); // input
  Token name = tok_;
  if (name.kind != Token::ValueRef)
    return expected("a value name like '%x'");
  GRAPHOPT_RETURN_IF_ERROR(checkNewName(name));
  consume();
  GRAPHOPT_RETURN_IF_ERROR(expect(Token::Colon, "':' before the input's type"));
  GRAPHOPT_ASSIGN_OR_RETURN(type, parseType());
  if (tok_.kind != Token::Ident)
    return expected("an input role (parameter, buffer, user_input, constant, optimizer_state)");
  auto role = parseInputRoleName(tok_.text);
  if (!role)
    return expected("an input role (parameter, buffer, user_input, constant, optimizer_state)");
  consume();
  std::string target;
  if (tok_.kind == Token::String) {
    target = tok_.text;
    consume();
  }
  Value *tiedTo = nullptr;
  if (isIdent("tied")) {
    consume();
    Token ref = tok_;
    if (ref.kind != Token::ValueRef)
      return expected("the name of the earlier input it is tied to, like '%wte_weight'");
    GRAPHOPT_ASSIGN_OR_RETURN(to, lookupValue(ref));
    consume();
    if (!to->isGraphInput())
      return errorAt(ref, absl::StrCat("an input can only be tied to an earlier graph input; %",
                                       ref.text, " is a node's result"));
    tiedTo = to;
  }
  Value *v = graph_->addInput(name.text, std::move(type), *role, std::move(target));
  values_[name.text] = v;
  if (tiedTo) {
    absl::Status st = graph_->tieInput(v->index(), tiedTo);
    if (!st.ok())
      return errorAt(name, std::string(st.message()));
  }
  return absl::OkStatus();
}

absl::Status Parser::parseOutput() {
  consume(); // output
  if (tok_.kind != Token::ValueRef)
    return expected("a value name like '%loss'");
  GRAPHOPT_ASSIGN_OR_RETURN(value, lookupValue(tok_));
  consume();
  static constexpr const char *kRoles =
      "an output role (loss, gradient, input_gradient, user_output, buffer_mutation)";
  if (tok_.kind != Token::Ident)
    return expected(kRoles);
  auto role = parseOutputRoleName(tok_.text);
  if (!role)
    return expected(kRoles);
  consume();
  std::string target;
  if (tok_.kind == Token::String) {
    target = tok_.text;
    consume();
  }
  graph_->addOutput(value, *role, std::move(target));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int64_t>> Parser::parseIntList() {
  GRAPHOPT_RETURN_IF_ERROR(expect(Token::LBracket, "'['"));
  std::vector<int64_t> ints;
  while (tok_.kind != Token::RBracket) {
    if (!ints.empty())
      GRAPHOPT_RETURN_IF_ERROR(expect(Token::Comma, "',' or ']'"));
    if (tok_.kind != Token::Int)
      return expected("an integer");
    GRAPHOPT_ASSIGN_OR_RETURN(v, parseIntToken());
    ints.push_back(v);
  }
  consume();
  return ints;
}

absl::StatusOr<int64_t> Parser::parseIntToken() {
  Token t = tok_;
  consume();
  errno = 0;
  long long v = std::strtoll(t.text.c_str(), nullptr, 10);
  if (errno == ERANGE)
    return errorAt(t, "integer out of range");
  return static_cast<int64_t>(v);
}

absl::StatusOr<double> Parser::parseFloatToken() {
  Token t = tok_;
  consume();
  if (t.text == "-inf")
    return -HUGE_VAL;
  errno = 0;
  double v = std::strtod(t.text.c_str(), nullptr);
  // Overflow, or underflow all the way to zero, would change the number;
  // gradual underflow to a subnormal keeps it (and prints back the same).
  if (errno == ERANGE && (std::isinf(v) || v == 0.0))
    return errorAt(t, "float out of range");
  return v;
}

absl::StatusOr<ValueType> Parser::parseType() {
  if (tok_.kind == Token::Question) {
    consume();
    return ValueType::unknownTensor();
  }
  if (tok_.kind != Token::Ident)
    return expected("a type (e.g. f32[8, 16], int, float, bool, none or ?)");
  Token typeTok = tok_;
  consume();
  if (tok_.kind != Token::LBracket) {
    if (typeTok.text == "int")
      return ValueType::ofScalar(ValueKind::Int);
    if (typeTok.text == "float")
      return ValueType::ofScalar(ValueKind::Float);
    if (typeTok.text == "bool")
      return ValueType::ofScalar(ValueKind::Bool);
    if (typeTok.text == "none")
      return ValueType::ofScalar(ValueKind::None);
    return errorAt(typeTok, absl::StrCat("expected a type, found '", typeTok.text,
                                         "' (a tensor type needs sizes, e.g. f32[8, 16])"));
  }
  auto dtype = parseDtypeName(typeTok.text);
  if (!dtype)
    return errorAt(typeTok, absl::StrCat("unknown dtype '", typeTok.text, "'"));
  GRAPHOPT_ASSIGN_OR_RETURN(sizes, parseIntList());
  TensorType t = TensorType::contiguous(*dtype, sizes);
  if (tok_.kind == Token::LBrace) {
    consume();
    bool first = true;
    while (tok_.kind != Token::RBrace) {
      if (!first)
        GRAPHOPT_RETURN_IF_ERROR(expect(Token::Comma, "',' or '}'"));
      first = false;
      Token key = tok_;
      if (!isIdent("strides") && !isIdent("offset") && !isIdent("device"))
        return expected("'strides', 'offset' or 'device'");
      consume();
      GRAPHOPT_RETURN_IF_ERROR(expect(Token::Equal, "'='"));
      if (key.text == "strides") {
        Token at = tok_;
        GRAPHOPT_ASSIGN_OR_RETURN(strides, parseIntList());
        if (strides.size() != sizes.size())
          return errorAt(at, absl::StrCat("expected ", sizes.size(), " strides, found ",
                                          strides.size()));
        t.strides.assign(strides.begin(), strides.end());
      } else if (key.text == "offset") {
        GRAPHOPT_ASSIGN_OR_RETURN(offset, parseScalarConstant());
        if (offset.kind() != ConstantKind::Int)
          return errorAt(key, "expected a storage offset (an integer)");
        t.storageOffset = offset.asInt();
      } else {
        GRAPHOPT_ASSIGN_OR_RETURN(dev, parseScalarConstant());
        if (dev.kind() != ConstantKind::Device || dev.isExecutionDevice())
          return errorAt(key, "expected a device (cpu, cuda:0, ...)");
        t.device = dev.asDevice();
      }
    }
    consume();
  }
  if (absl::Status st = validateTensorType(t); !st.ok())
    return errorAt(typeTok, absl::StrCat("invalid tensor type: ", st.message()));
  return ValueType::ofTensor(std::move(t));
}

/// A device whose type name `t` was just read: `cpu`, `cuda`, `cuda:0`, ...
absl::StatusOr<c10::Device> Parser::parseDeviceRest(const Token &t) {
  std::string device = t.text;
  if (tok_.kind == Token::Colon) { // cuda:0
    consume();
    if (tok_.kind != Token::Int)
      return expected("a device index");
    device += ":" + tok_.text;
    consume();
  }
  try {
    return c10::Device(device);
  } catch (const c10::Error &) {
    return errorAt(t, absl::StrCat("expected a constant, found '", device, "'"));
  }
}

/// A literal that is not a list: None, true/false, numbers, strings, dtypes,
/// layouts, memory formats, devices.
absl::StatusOr<Constant> Parser::parseScalarConstant() {
  Token t = tok_;
  switch (t.kind) {
  case Token::Int: {
    GRAPHOPT_ASSIGN_OR_RETURN(v, parseIntToken());
    return Constant::ofInt(v);
  }
  case Token::Float: {
    GRAPHOPT_ASSIGN_OR_RETURN(v, parseFloatToken());
    return Constant::ofFloat(v);
  }
  case Token::String:
    consume();
    return Constant::ofString(t.text);
  case Token::Ident: {
    consume();
    llvm::StringRef s = t.text;
    if (s == "None")
      return Constant::none();
    if (s == "true" || s == "false")
      return Constant::ofBool(s == "true");
    if (s == "inf")
      return Constant::ofFloat(HUGE_VAL);
    if (s == "nan")
      return Constant::ofFloat(std::nan(""));
    if (auto d = parseDtypeName(s))
      return Constant::ofDtype(*d);
    if (auto l = parseLayoutName(s))
      return Constant::ofLayout(*l);
    if (auto m = parseMemoryFormatName(s))
      return Constant::ofMemoryFormat(*m);
    if (s == "exec_device") { // exec_device or exec_device(cuda:0)
      if (tok_.kind != Token::LParen)
        return Constant::ofExecutionDevice();
      consume();
      Token devTok = tok_;
      if (devTok.kind != Token::Ident)
        return expected("the model's device (cpu, cuda:0, ...)");
      consume();
      GRAPHOPT_ASSIGN_OR_RETURN(dev, parseDeviceRest(devTok));
      GRAPHOPT_RETURN_IF_ERROR(expect(Token::RParen, "')' after the model's device"));
      return Constant::ofExecutionDevice(dev);
    }
    GRAPHOPT_ASSIGN_OR_RETURN(dev, parseDeviceRest(t));
    return Constant::ofDevice(dev);
  }
  default:
    return expected("an argument (a %value, a list or a constant)");
  }
}

absl::StatusOr<ParsedArg> Parser::parseArgValue() {
  ParsedArg arg;
  arg.loc = tok_;
  if (tok_.kind == Token::ValueRef) {
    GRAPHOPT_ASSIGN_OR_RETURN(v, lookupValue(tok_));
    consume();
    arg.kind = ParsedArg::Value;
    arg.value = v;
    return arg;
  }
  if (tok_.kind != Token::LBracket) {
    GRAPHOPT_ASSIGN_OR_RETURN(c, parseScalarConstant());
    arg.constant = std::move(c);
    return arg;
  }
  consume();
  arg.kind = ParsedArg::List;
  while (tok_.kind != Token::RBracket) {
    if (!arg.elems.empty())
      GRAPHOPT_RETURN_IF_ERROR(expect(Token::Comma, "',' or ']'"));
    ParsedArg::Elem e;
    if (tok_.kind == Token::ValueRef) {
      GRAPHOPT_ASSIGN_OR_RETURN(v, lookupValue(tok_));
      e.value = v;
      consume();
    } else {
      GRAPHOPT_ASSIGN_OR_RETURN(c, parseScalarConstant());
      e.constant = std::move(c);
    }
    arg.elems.push_back(std::move(e));
  }
  consume();
  return arg;
}

/// Builds the IR argument for `parsed`, guided by the schema argument it fills.
absl::StatusOr<Argument> Parser::toArgument(ParsedArg parsed, const c10::Argument &schemaArg) {
  ArgForm form = argFormOf(schemaArg.real_type());
  switch (parsed.kind) {
  case ParsedArg::Value:
    return Argument::value(parsed.value);
  case ParsedArg::Constant:
    if (form == ArgForm::Scalar) {
      auto coerced = coerceConstant(parsed.constant, schemaArg.real_type());
      if (coerced.ok())
        return Argument::constant(*coerced);
    }
    return Argument::constant(std::move(parsed.constant)); // the verifier reports a mismatch
  case ParsedArg::List:
    break;
  }
  bool tensorList = form == ArgForm::TensorList || form == ArgForm::OptionalTensorList;
  bool anyValue = false;
  for (const auto &e : parsed.elems)
    anyValue |= e.value != nullptr;
  if (tensorList || anyValue) {
    std::vector<Value *> elems;
    for (const auto &e : parsed.elems) {
      if (!e.value && !e.constant.isNone())
        return errorAt(parsed.loc, "a list of values may hold only %values and None");
      elems.push_back(e.value);
    }
    return Argument::list(elems);
  }
  GRAPHOPT_ASSIGN_OR_RETURN(list, constantList(parsed));
  if (form == ArgForm::Scalar) {
    auto coerced = coerceConstant(list, schemaArg.real_type());
    if (coerced.ok())
      return Argument::constant(*coerced);
  }
  return Argument::constant(std::move(list));
}

/// A list of literals: ints, floats (ints allowed among them) or bools; `[]`
/// is an empty int list.
absl::StatusOr<Constant> Parser::constantList(const ParsedArg &parsed) {
  bool allInt = true, allNumber = true, allBool = true;
  for (const auto &e : parsed.elems) {
    ConstantKind k = e.constant.kind();
    allInt &= k == ConstantKind::Int;
    allNumber &= k == ConstantKind::Int || k == ConstantKind::Float;
    allBool &= k == ConstantKind::Bool;
  }
  Constant list;
  for (const auto &e : parsed.elems)
    if (e.value)
      return errorAt(parsed.loc, "a list of literals may not hold %values");
  if (allInt) {
    std::vector<int64_t> v;
    for (const auto &e : parsed.elems)
      v.push_back(e.constant.asInt());
    list = Constant::ofIntList(v);
  } else if (allNumber) {
    std::vector<double> v;
    for (const auto &e : parsed.elems)
      v.push_back(e.constant.kind() == ConstantKind::Int ? static_cast<double>(e.constant.asInt())
                                                         : e.constant.asFloat());
    list = Constant::ofFloatList(v);
  } else if (allBool) {
    std::vector<bool> v;
    for (const auto &e : parsed.elems)
      v.push_back(e.constant.asBool());
    list = Constant::ofBoolList(std::move(v));
  } else {
    return errorAt(parsed.loc, "a list must hold only ints, only floats or only bools");
  }
  return list;
}

/// '{' key '=' constant (',' key '=' constant)* '}' after a node's arguments.
absl::StatusOr<std::vector<Node::Attribute>> Parser::parseAttrDict() {
  consume(); // {
  std::vector<Node::Attribute> attrs;
  llvm::StringMap<bool> seen;
  while (tok_.kind != Token::RBrace) {
    if (!attrs.empty())
      GRAPHOPT_RETURN_IF_ERROR(expect(Token::Comma, "',' or '}' in the attributes"));
    Token key = tok_;
    if ((key.kind != Token::Ident && key.kind != Token::String) ||
        llvm::StringRef(key.text).contains("::"))
      return expected("an attribute name (an identifier or a string)");
    if (!seen.insert({key.text, true}).second)
      return errorAt(key, absl::StrCat("duplicate attribute '", key.text, "'"));
    consume();
    GRAPHOPT_RETURN_IF_ERROR(expect(Token::Equal, "'=' after the attribute name"));
    if (tok_.kind == Token::ValueRef)
      return errorAt(tok_, "an attribute holds a constant, not a %value");
    GRAPHOPT_ASSIGN_OR_RETURN(parsed, parseArgValue());
    if (parsed.kind == ParsedArg::List) {
      GRAPHOPT_ASSIGN_OR_RETURN(list, constantList(parsed));
      attrs.emplace_back(key.text, std::move(list));
    } else {
      attrs.emplace_back(key.text, std::move(parsed.constant));
    }
  }
  consume(); // }
  return attrs;
}

absl::Status Parser::parseNode() {
  GRAPHOPT_ASSIGN_OR_RETURN(outNames, parseResultNames());
  Token opTok = tok_;
  if (opTok.kind != Token::Ident || !llvm::StringRef(opTok.text).contains("::"))
    return expected("an operator name like 'aten::add.Tensor'");
  auto op = resolveOperator(opTok.text);
  if (!op.ok())
    return errorAt(opTok, std::string(op.status().message()));
  consume();
  const c10::FunctionSchema &schema = op->schema();

  ArgumentSlots slots(schema);
  GRAPHOPT_RETURN_IF_ERROR(parseArguments(schema, slots));
  Token closeParen = tok_;
  consume();
  std::vector<Node::Attribute> attrs;
  if (tok_.kind == Token::LBrace) {
    GRAPHOPT_ASSIGN_OR_RETURN(parsedAttrs, parseAttrDict());
    attrs = std::move(parsedAttrs);
  }
  auto filled = slots.finish();
  if (!filled.ok())
    return errorAt(closeParen, std::string(filled.status().message()));
  std::vector<Argument> args = std::move(*filled);

  GRAPHOPT_ASSIGN_OR_RETURN(types, parseResultTypes(opTok, schema, outNames.size()));
  std::vector<std::string> names;
  for (const Token &t : outNames)
    names.push_back(t.text);
  Node *node = graph_->createNode(*op, args, types, phase_, names);
  for (auto &[key, value] : attrs)
    node->setAttr(key, std::move(value));
  for (unsigned i = 0; i < node->numOutputs(); ++i)
    values_[names[i]] = node->output(i);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Token>> Parser::parseResultNames() {
  std::vector<Token> outNames;
  if (tok_.kind != Token::ValueRef)
    return outNames;
  for (;;) {
    if (tok_.kind != Token::ValueRef)
      return expected("a value name");
    GRAPHOPT_RETURN_IF_ERROR(checkNewName(tok_));
    for (const Token &prev : outNames)
      if (prev.text == tok_.text)
        return errorAt(tok_, absl::StrCat("redefinition of value %", tok_.text));
    outNames.push_back(tok_);
    consume();
    if (tok_.kind != Token::Comma)
      break;
    consume();
  }
  GRAPHOPT_RETURN_IF_ERROR(expect(Token::Equal, "'=' after the node's results"));
  return outNames;
}

// Arguments: positional ones first, then name=value.
absl::Status Parser::parseArguments(const c10::FunctionSchema &schema, ArgumentSlots &slots) {
  const auto &schemaArgs = schema.arguments();
  GRAPHOPT_RETURN_IF_ERROR(expect(Token::LParen, "'(' after the operator name"));
  bool sawKeyword = false, first = true;
  while (tok_.kind != Token::RParen) {
    if (!first) {
      GRAPHOPT_RETURN_IF_ERROR(expect(Token::Comma, "',' or ')'"));
      if (tok_.kind == Token::RParen)
        return expected("an argument after ','");
    }
    first = false;
    Token start = tok_;
    absl::StatusOr<unsigned> slot;
    // name=value: an identifier directly followed by '='.
    Lexer probe = lex_;
    Token after = probe.next();
    if (start.kind == Token::Ident && after.kind == Token::Equal) {
      sawKeyword = true;
      slot = slots.named(start.text);
      if (!slot.ok())
        return errorAt(start, std::string(slot.status().message()));
      consume();
      consume();
    } else {
      if (sawKeyword)
        return errorAt(start, "positional argument after a keyword argument");
      slot = slots.positional();
      if (!slot.ok())
        return errorAt(start, std::string(slot.status().message()));
    }
    GRAPHOPT_ASSIGN_OR_RETURN(parsed, parseArgValue());
    GRAPHOPT_ASSIGN_OR_RETURN(a, toArgument(std::move(parsed), schemaArgs[*slot]));
    slots.set(*slot, std::move(a));
  }
  return absl::OkStatus();
}

// Results: their count must fit the schema; types are optional.
absl::StatusOr<std::vector<ValueType>> Parser::parseResultTypes(const Token &opTok,
                                                                const c10::FunctionSchema &schema,
                                                                size_t numResults) {
  const auto &returns = schema.returns();
  bool listReturn = returnsTensorList(schema);
  if (!listReturn && numResults != returns.size())
    return errorAt(opTok, absl::StrCat(opTok.text, " returns ", returns.size(), " value",
                                       returns.size() == 1 ? "" : "s", ", but ", numResults,
                                       " result name", numResults == 1 ? " is" : "s are",
                                       " given"));
  std::vector<ValueType> types;
  if (tok_.kind == Token::Colon) {
    consume();
    for (size_t i = 0; i < numResults; ++i) {
      if (i)
        GRAPHOPT_RETURN_IF_ERROR(expect(Token::Comma, "',' and the next result type"));
      GRAPHOPT_ASSIGN_OR_RETURN(t, parseType());
      types.push_back(std::move(t));
    }
  } else {
    for (size_t i = 0; i < numResults; ++i) {
      auto kind = returnValueKind(returns[listReturn ? 0 : i]);
      types.push_back(kind ? ValueType::ofScalar(*kind) : ValueType::unknownTensor());
      if (types.back().isTensor())
        types.back() = ValueType::unknownTensor();
    }
  }
  return types;
}

} // namespace

absl::StatusOr<std::unique_ptr<Graph>> parseGraph(llvm::StringRef text, llvm::StringRef bufferName) {
  Parser parser(text, bufferName);
  return parser.parse();
}

absl::StatusOr<std::vector<ValueType>> parseTypeList(llvm::StringRef text, llvm::StringRef bufferName) {
  Parser parser(text, bufferName);
  return parser.parseTypes();
}

absl::StatusOr<std::unique_ptr<Graph>> parseGraphFile(llvm::StringRef path, int64_t maxBytes) {
  auto text = readFile(path, maxBytes);
  if (!text.ok())
    return text.status();
  return parseGraph(*text, path);
}

} // namespace graphopt
