//===- PassOption.cpp - Typed pass options, memory amounts, bytes ---------===//
#include "graphopt/Pass/PassOption.h"
#include "graphopt/Pass/Pass.h"

#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <llvm/ADT/StringSwitch.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace graphopt {

namespace {

/// A finite number: all of `s`, nothing left over.
std::optional<double> parseNumber(llvm::StringRef s) {
  std::string text = s.trim().str();
  if (text.empty())
    return std::nullopt;
  char *end = nullptr;
  errno = 0;
  double v = std::strtod(text.c_str(), &end);
  if (errno || *end || !std::isfinite(v))
    return std::nullopt;
  return v;
}

/// The shortest text that reads back to `v`.
std::string shortest(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : std::to_string(v);
}

} // namespace

absl::StatusOr<MemoryAmount> MemoryAmount::parse(llvm::StringRef text) {
  llvm::StringRef s = text.trim();
  if (s.consume_back("%")) {
    auto v = parseNumber(s);
    if (!v || *v < 0)
      return absl::InvalidArgumentError(
          absl::StrCat("'", text.str(), "' is not a share: expected a non-negative number before '%'"));
    return percent(*v);
  }
  // The unit: the trailing letters.
  size_t unitStart = s.size();
  while (unitStart > 0 && std::isalpha(static_cast<unsigned char>(s[unitStart - 1])))
    --unitStart;
  llvm::StringRef unit = s.substr(unitStart);
  llvm::StringRef number = s.substr(0, unitStart);
  std::optional<double> scale = llvm::StringSwitch<std::optional<double>>(unit.lower())
                                    .Cases("", "b", 1.0)
                                    .Case("kib", 1024.0)
                                    .Case("mib", 1024.0 * 1024)
                                    .Case("gib", 1024.0 * 1024 * 1024)
                                    .Case("tib", 1024.0 * 1024 * 1024 * 1024)
                                    .Case("kb", 1e3)
                                    .Case("mb", 1e6)
                                    .Case("gb", 1e9)
                                    .Case("tb", 1e12)
                                    .Default(std::nullopt);
  if (!scale)
    return absl::InvalidArgumentError(absl::StrCat("'", text.str(), "': unknown unit '", unit.str(),
                                                   "' (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB or %)"));
  auto v = parseNumber(number);
  if (!v || *v < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("'", text.str(), "' is not an amount of memory (e.g. 2GiB, 512MB, 4096 or 60%)"));
  double b = std::round(*v * *scale);
  if (b > static_cast<double>(std::numeric_limits<int64_t>::max() / 2))
    return absl::InvalidArgumentError(absl::StrCat("'", text.str(), "' is too large"));
  return bytes(static_cast<int64_t>(b));
}

absl::StatusOr<Bandwidth> Bandwidth::parse(llvm::StringRef text) {
  llvm::StringRef amount = text.trim();
  amount.consume_back("/s");
  auto bytes = MemoryAmount::parse(amount);
  if (!bytes.ok() || bytes->isPercent() || bytes->byteValue() <= 0)
    return absl::InvalidArgumentError("must be bytes per second (12GB/s, 25GiB/s)");
  return Bandwidth{static_cast<double>(bytes->byteValue())};
}

std::string Bandwidth::str() const {
  return MemoryAmount::bytes(static_cast<int64_t>(bytesPerSecond)).str() + "/s";
}

int64_t MemoryAmount::resolve(int64_t whole) const {
  if (!percent_)
    return static_cast<int64_t>(value_);
  return static_cast<int64_t>(std::llround(static_cast<double>(whole) * value_ / 100.0));
}

std::string MemoryAmount::str() const {
  if (percent_)
    return shortest(value_) + "%";
  // The largest binary unit that divides exactly; else plain bytes.
  int64_t b = static_cast<int64_t>(value_);
  static const char *const units[] = {"TiB", "GiB", "MiB", "KiB"};
  for (int i = 0; i < 4; ++i) {
    int64_t unit = int64_t(1) << (10 * (4 - i));
    if (b >= unit && b % unit == 0)
      return absl::StrCat(b / unit, units[i]);
  }
  return std::to_string(b);
}

// --- options -------------------------------------------------------------------

PassOptionBase::PassOptionBase(OptimizationPass *owner, llvm::StringRef name, llvm::StringRef help)
    : name_(name.str()), help_(help.str()) {
  owner->declaredOptions_.push_back(this);
}

namespace detail {

absl::StatusOr<bool> OptionText<bool>::parse(llvm::StringRef s) {
  if (s == "true" || s == "1")
    return true;
  if (s == "false" || s == "0")
    return false;
  return absl::InvalidArgumentError("must be true or false");
}

absl::StatusOr<int64_t> OptionText<int64_t>::parse(llvm::StringRef s) {
  int64_t v;
  if (s.trim().getAsInteger(10, v))
    return absl::InvalidArgumentError("must be an integer");
  return v;
}

absl::StatusOr<unsigned> OptionText<unsigned>::parse(llvm::StringRef s) {
  unsigned v;
  if (s.trim().getAsInteger(10, v))
    return absl::InvalidArgumentError("must be a non-negative integer");
  return v;
}

absl::StatusOr<double> OptionText<double>::parse(llvm::StringRef s) {
  auto v = parseNumber(s);
  if (!v)
    return absl::InvalidArgumentError("must be a number");
  return *v;
}

std::string OptionText<double>::print(double v) { return shortest(v); }

std::string joinChoices(const std::vector<std::string> &names) {
  if (names.size() <= 1)
    return names.empty() ? "" : names[0];
  return absl::StrCat(absl::StrJoin(names.begin(), names.end() - 1, ", "), " or ", names.back());
}

} // namespace detail

} // namespace graphopt
