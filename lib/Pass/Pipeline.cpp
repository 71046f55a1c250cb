//===- Pipeline.cpp - Textual pass pipelines ------------------------------===//
#include "graphopt/Pass/Pipeline.h"

#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include <cctype>

namespace graphopt {

namespace {

class PipelineParser {
public:
  explicit PipelineParser(llvm::StringRef text) : text_(text) {}

  absl::StatusOr<std::vector<PipelineEntry>> parse() {
    std::vector<PipelineEntry> entries;
    skipSpace();
    if (atEnd())
      return error("expected a pass name; the pipeline is empty");
    for (;;) {
      auto entry = parseEntry(word());
      if (!entry.ok())
        return entry.status();
      entries.push_back(std::move(*entry));
      if (atEnd())
        return entries;
      if (peek() != ',')
        return error("expected ',' between passes");
      ++pos_;
      skipSpace();
    }
  }

private:
  /// The rest of an entry whose name was just read: its braces, if any, hold
  /// options (KEY=VALUE) and nested entries, in any order.
  absl::StatusOr<PipelineEntry> parseEntry(std::string name) {
    PipelineEntry entry;
    entry.name = std::move(name);
    if (entry.name.empty())
      return error("expected a pass name");
    skipSpace();
    if (peek() != '{')
      return entry;
    ++pos_;
    for (;;) {
      skipSpace();
      std::string key = word();
      if (key.empty())
        return error(absl::StrCat("expected an option or a pass in the braces of '", entry.name, "'"));
      skipSpace();
      if (peek() == '=') {
        ++pos_;
        std::string value;
        while (!atEnd() && peek() != ',' && peek() != '}' && peek() != '{')
          value.push_back(text_[pos_++]);
        value = llvm::StringRef(value).trim().str();
        if (value.empty())
          return error(absl::StrCat("expected a value for option '", key, "'"));
        entry.options.emplace_back(key, value);
      } else {
        auto nested = parseEntry(std::move(key));
        if (!nested.ok())
          return nested.status();
        entry.nested.push_back(std::move(*nested));
      }
      skipSpace();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') {
        ++pos_;
        skipSpace();
        return entry;
      }
      return error(absl::StrCat("expected ',' or '}' in the braces of '", entry.name, "'"));
    }
  }

  bool atEnd() const { return pos_ >= text_.size(); }
  char peek() const { return atEnd() ? '\0' : text_[pos_]; }
  void skipSpace() {
    while (!atEnd() && std::isspace(static_cast<unsigned char>(peek())))
      ++pos_;
  }
  std::string word() {
    std::string w;
    while (!atEnd() && (std::isalnum(static_cast<unsigned char>(peek())) || peek() == '-' ||
                        peek() == '_' || peek() == '.'))
      w.push_back(text_[pos_++]);
    return w;
  }
  absl::Status error(llvm::StringRef message) const {
    std::string found = atEnd() ? "end of pipeline" : absl::StrCat("'", std::string(1, peek()), "'");
    return absl::InvalidArgumentError(absl::StrCat("pipeline column ", pos_ + 1, ": ", message.str(),
                                                   ", found ", found, " in \"", text_.str(), "\""));
  }

  llvm::StringRef text_;
  size_t pos_ = 0;
};

} // namespace

absl::StatusOr<std::vector<PipelineEntry>> parsePipeline(llvm::StringRef text) {
  return PipelineParser(text).parse();
}

std::string printPipeline(const std::vector<PipelineEntry> &entries) {
  std::string out;
  for (size_t i = 0; i < entries.size(); ++i) {
    const PipelineEntry &e = entries[i];
    absl::StrAppend(&out, i ? "," : "", e.name);
    if (e.options.empty() && e.nested.empty())
      continue;
    std::vector<std::string> items;
    for (const auto &[key, value] : e.options)
      items.push_back(absl::StrCat(key, "=", value));
    for (const PipelineEntry &n : e.nested)
      items.push_back(printPipeline({n}));
    absl::StrAppend(&out, "{", absl::StrJoin(items, ","), "}");
  }
  return out;
}

} // namespace graphopt
