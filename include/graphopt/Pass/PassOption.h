//===- PassOption.h - Typed pass options, declared once ----------*- C++ -*-===//
//
// A pass declares each option once, as a member (MLIR's Option<T> is the model):
//
//   PassOption<bool> verbose{this, "verbose", "print what was done", false};
//   PassOption<Scratch> scratch{this, "scratch", "operator scratch memory", Scratch::None,
//                               {{"none", Scratch::None}, {"measured", Scratch::Measured}}};
//   PassOption<MemoryAmount> budget{this, "budget", "peak memory allowed",
//                                   MemoryAmount::percent(100)};
//
// The infrastructure parses `pass{key=value,...}` into them, validates (an
// error names the pass and the option and says what it accepts), prints the
// options back (non-default ones, in declaration order) for pipelines and
// reproducers, and lists them with their defaults in `graph-opt --list-passes`.
// `PassOption<std::optional<double>>` is an option that may be left unset
// (listed as "default unset"): for a default that depends on another option,
// or to tell an option that was given from one that was not.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <absl/status/statusor.h>
#include <llvm/ADT/StringRef.h>

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace graphopt {

class OptimizationPass;

/// An amount of memory given as bytes ("2GiB", "1.5GB", "512KiB", "4096") or as
/// a share of some whole ("60%"), parsed in one place for every pass.
class MemoryAmount {
public:
  static MemoryAmount bytes(int64_t b) { return MemoryAmount(false, static_cast<double>(b)); }
  static MemoryAmount percent(double p) { return MemoryAmount(true, p); }
  /// "1.5GiB", "2 GB", "100MiB", "4096", "4096B", "60%". Binary (KiB, MiB,
  /// GiB, TiB) and decimal (KB, MB, GB, TB) units; a share is 0-100% or more.
  static absl::StatusOr<MemoryAmount> parse(llvm::StringRef text);

  bool isPercent() const { return percent_; }
  double percentValue() const { return value_; }
  int64_t byteValue() const { return static_cast<int64_t>(value_); }
  /// Bytes: given ones, or the share of `whole`.
  int64_t resolve(int64_t whole) const;
  /// Back to text that parses to the same amount ("60%", "1.5GiB", "1000").
  std::string str() const;
  bool operator==(const MemoryAmount &o) const { return percent_ == o.percent_ && value_ == o.value_; }

private:
  MemoryAmount(bool percent, double value) : percent_(percent), value_(value) {}
  bool percent_;
  double value_;
};

/// A copy bandwidth: bytes per second, written as an amount of bytes,
/// optionally followed by "/s" ("12GB/s", "25GiB/s", "1000000000").
struct Bandwidth {
  double bytesPerSecond = 0;
  static absl::StatusOr<Bandwidth> parse(llvm::StringRef text);
  std::string str() const;
  bool operator==(const Bandwidth &o) const { return bytesPerSecond == o.bytesPerSecond; }
};

/// What every option has, whatever its type.
class PassOptionBase {
public:
  PassOptionBase(OptimizationPass *owner, llvm::StringRef name, llvm::StringRef help);
  virtual ~PassOptionBase() = default;
  PassOptionBase(const PassOptionBase &) = delete;
  PassOptionBase &operator=(const PassOptionBase &) = delete;

  llvm::StringRef name() const { return name_; }
  llvm::StringRef help() const { return help_; }
  /// Sets the value from text; the message says what is accepted (the caller
  /// adds the pass and option names).
  virtual absl::Status parse(llvm::StringRef text) = 0;
  /// The current value, as the pipeline would write it.
  virtual std::string print() const = 0;
  virtual std::string printDefault() const = 0;
  /// What the option accepts: "bool", "integer", "none|measured", ...
  virtual std::string accepts() const = 0;
  virtual bool isDefault() const = 0;
  virtual void reset() = 0;

private:
  std::string name_, help_;
};

namespace detail {
/// Text <-> value for the plain option types.
template <typename T> struct OptionText;
template <> struct OptionText<bool> {
  static absl::StatusOr<bool> parse(llvm::StringRef s);
  static std::string print(bool v) { return v ? "true" : "false"; }
  static std::string accepts() { return "true|false"; }
};
template <> struct OptionText<int64_t> {
  static absl::StatusOr<int64_t> parse(llvm::StringRef s);
  static std::string print(int64_t v) { return std::to_string(v); }
  static std::string accepts() { return "an integer"; }
};
template <> struct OptionText<unsigned> {
  static absl::StatusOr<unsigned> parse(llvm::StringRef s);
  static std::string print(unsigned v) { return std::to_string(v); }
  static std::string accepts() { return "a non-negative integer"; }
};
template <> struct OptionText<double> {
  static absl::StatusOr<double> parse(llvm::StringRef s);
  static std::string print(double v);
  static std::string accepts() { return "a number"; }
};
template <> struct OptionText<std::string> {
  static absl::StatusOr<std::string> parse(llvm::StringRef s) { return s.str(); }
  static std::string print(const std::string &v) { return v; }
  static std::string accepts() { return "text"; }
};
template <> struct OptionText<MemoryAmount> {
  static absl::StatusOr<MemoryAmount> parse(llvm::StringRef s) { return MemoryAmount::parse(s); }
  static std::string print(const MemoryAmount &v) { return v.str(); }
  static std::string accepts() { return "bytes (e.g. 2GiB, 512MB, 4096) or a share (60%)"; }
};
template <> struct OptionText<Bandwidth> {
  static absl::StatusOr<Bandwidth> parse(llvm::StringRef s) { return Bandwidth::parse(s); }
  static std::string print(const Bandwidth &v) { return v.str(); }
  static std::string accepts() { return "bytes per second (e.g. 12GB/s)"; }
};
/// An option that may be left unset (its default): the pass decides what an
/// unset one means, e.g. a default that depends on another option, and can
/// tell an option given in the pipeline from one left out.
template <typename T> struct OptionText<std::optional<T>> {
  static absl::StatusOr<std::optional<T>> parse(llvm::StringRef s) {
    auto v = OptionText<T>::parse(s);
    if (!v.ok())
      return v.status();
    return std::optional<T>(std::move(*v));
  }
  static std::string print(const std::optional<T> &v) {
    return v ? OptionText<T>::print(*v) : "unset";
  }
  static std::string accepts() { return OptionText<T>::accepts(); }
};
std::string joinChoices(const std::vector<std::string> &names);
} // namespace detail

/// An option of type T. Enums (and strings limited to some words) take a list
/// of choices: name -> value.
template <typename T> class PassOption : public PassOptionBase {
public:
  using Choices = std::vector<std::pair<std::string, T>>;

  PassOption(OptimizationPass *owner, llvm::StringRef name, llvm::StringRef help, T defaultValue,
             Choices choices = {})
      : PassOptionBase(owner, name, help), value_(defaultValue), default_(std::move(defaultValue)),
        choices_(std::move(choices)) {
    if constexpr (std::is_enum_v<T>)
      assertHasChoices();
  }

  const T &get() const { return value_; }
  operator const T &() const { return value_; }
  PassOption &operator=(T v) {
    value_ = std::move(v);
    return *this;
  }

  absl::Status parse(llvm::StringRef text) override {
    if (!choices_.empty()) {
      for (const auto &[name, v] : choices_)
        if (text == name) {
          value_ = v;
          return absl::OkStatus();
        }
      return absl::InvalidArgumentError("must be " + accepts());
    }
    if constexpr (std::is_enum_v<T>) {
      return absl::InternalError("an enum option without choices");
    } else {
      auto v = detail::OptionText<T>::parse(text);
      if (!v.ok())
        return v.status();
      value_ = std::move(*v);
      return absl::OkStatus();
    }
  }
  std::string print() const override { return printValue(value_); }
  std::string printDefault() const override { return printValue(default_); }
  std::string accepts() const override {
    if (choices_.empty()) {
      if constexpr (!std::is_enum_v<T>)
        return detail::OptionText<T>::accepts();
    }
    std::vector<std::string> names;
    for (const auto &c : choices_)
      names.push_back(c.first);
    return detail::joinChoices(names);
  }
  bool isDefault() const override { return value_ == default_; }
  void reset() override { value_ = default_; }

private:
  void assertHasChoices() const {
    // An enum cannot be read from text without its names.
    if (choices_.empty())
      std::abort();
  }
  std::string printValue(const T &v) const {
    for (const auto &[name, c] : choices_)
      if (c == v)
        return name;
    if constexpr (std::is_enum_v<T>)
      return "?";
    else
      return detail::OptionText<T>::print(v);
  }

  T value_;
  T default_;
  Choices choices_;
};

} // namespace graphopt
