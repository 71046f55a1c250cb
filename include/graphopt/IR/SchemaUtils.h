//===- SchemaUtils.h - Matching IR arguments to operator schemas --*- C++ -*-===//
//
// Shared by the parser (filling defaults, coercing literals), the printer
// (omitting defaults) and the verifier (checking argument kinds), so the three
// agree on what each schema argument type accepts.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/Graph.h"

#include <ATen/core/function_schema.h>

#include <optional>
#include <vector>

namespace graphopt {

/// How an IR argument must look for a given schema argument type.
enum class ArgForm : uint8_t {
  Tensor,             ///< Tensor: a tensor value
  OptionalTensor,     ///< Tensor?: a tensor value or None
  TensorList,         ///< Tensor[]: a list of tensor values
  OptionalTensorList, ///< Tensor?[]: a list of tensor values or None
  Scalar,             ///< everything else: a Constant (or a scalar value)
  Unsupported,        ///< Dimname, Storage, Stream, tuples, ...
};

ArgForm argFormOf(const c10::TypePtr &type);

/// Checks `arg` against schema argument `schemaArg`; the message says what was
/// expected and what was found (it does not name the node: callers add that).
absl::Status checkArgument(const Argument &arg, const c10::Argument &schemaArg);

/// Checks that `value` may be the output for schema return `ret`.
absl::Status checkReturnValue(const Value &value, const c10::Argument &ret);

/// Converts `c` to what a scalar-form schema type expects where the conversion
/// is lossless and conventional (int -> float, int list -> float list), or
/// returns an error saying what was expected.
absl::StatusOr<Constant> coerceConstant(const Constant &c, const c10::TypePtr &type);

/// The schema default of `schemaArg` as a Constant, if it has one (dtype,
/// layout and memory format defaults are stored as ints in the schema).
std::optional<Constant> schemaDefault(const c10::Argument &schemaArg);

/// True when `arg` equals the schema default of `schemaArg`.
bool isSchemaDefault(const Argument &arg, const c10::Argument &schemaArg);

/// The kind of Value a schema return produces (Tensor for Tensor and Tensor[]).
std::optional<ValueKind> returnValueKind(const c10::Argument &ret);

/// True for a single `Tensor[]` return: the node has any number of tensor outputs.
bool returnsTensorList(const c10::FunctionSchema &schema);

/// Builds the one-Argument-per-schema-argument list a Node needs, the same way
/// for the parser, the importers and passes: positional arguments fill the
/// schema in order (not its keyword-only ones), named ones go by name, each at
/// most once; constants are coerced to their argument's type where lossless
/// (coerceConstant); arguments not given take their schema default.
///
///   ArgumentSlots slots(op.schema());
///   slots.set(*slots.positional(), Argument::value(x));
///   slots.set(*slots.named("dim"), Argument::constant(Constant::ofInt(1)));
///   auto args = slots.finish(); // dim's neighbours from their defaults
///
/// Errors say what is wrong and print the schema; callers add the location.
class ArgumentSlots {
public:
  explicit ArgumentSlots(const c10::FunctionSchema &schema);

  /// The slot of the next positional argument.
  absl::StatusOr<unsigned> positional();
  /// The slot of the argument called `name`.
  absl::StatusOr<unsigned> named(llvm::StringRef name);
  /// Puts `arg` in `slot` (coercing a constant where lossless).
  void set(unsigned slot, Argument arg);

  /// Every argument in schema order, the ones not given from their defaults.
  absl::StatusOr<std::vector<Argument>> finish() const;

private:
  std::string opName() const;
  const c10::FunctionSchema &schema_;
  std::vector<std::optional<Argument>> slots_;
  unsigned nextPositional_ = 0;
};

} // namespace graphopt
