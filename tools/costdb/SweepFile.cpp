//===- SweepFile.cpp - An operator with ranges of its configuration -------===//
#include "SweepFile.h"

#include "graphopt/IR/Parser.h"
#include "graphopt/IR/TypeInference.h"

#include <absl/strings/str_cat.h>
#include <absl/strings/str_replace.h>
#include <llvm/Support/JSON.h>
#include <llvm/Support/MemoryBuffer.h>

#include <utility>

namespace graphopt {

namespace {

using Assignment = std::vector<std::pair<std::string, int64_t>>;

absl::StatusOr<std::vector<int64_t>> integers(const llvm::json::Value &value) {
  const llvm::json::Array *values = value.getAsArray();
  std::vector<int64_t> ints;
  for (size_t i = 0; values && i < values->size(); ++i)
    if (auto v = (*values)[i].getAsInteger())
      ints.push_back(*v);
  if (!values || ints.size() != values->size() || ints.empty())
    return absl::InvalidArgumentError("must be a non-empty list of integers");
  return ints;
}

/// Every combination of "ranges".
absl::StatusOr<std::vector<Assignment>> fromRanges(const llvm::json::Object &ranges,
                                                   const std::string &where, size_t max) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> axes;
  size_t combinations = 1;
  for (const auto &[key, value] : ranges) {
    auto ints = integers(value);
    if (!ints.ok())
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": range '", key.str(), "' ", ints.status().message()));
    combinations *= ints->size();
    if (combinations > max)
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": more than --max-sweep=", max, " combinations"));
    axes.emplace_back(key.str(), std::move(*ints));
  }
  std::vector<Assignment> out;
  std::vector<size_t> index(axes.size(), 0);
  for (size_t c = 0; c < combinations; ++c) {
    Assignment a;
    for (size_t i = 0; i < axes.size(); ++i)
      a.emplace_back(axes[i].first, axes[i].second[index[i]]);
    out.push_back(std::move(a));
    for (size_t i = axes.size(); i-- > 0;) {
      if (++index[i] < axes[i].second.size())
        break;
      index[i] = 0;
    }
  }
  return out;
}

/// One instance per object of "cases".
absl::StatusOr<std::vector<Assignment>> fromCases(const llvm::json::Array &cases,
                                                  const std::string &where, size_t max) {
  if (cases.size() > max)
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": more than --max-sweep=", max, " cases"));
  std::vector<Assignment> out;
  for (size_t c = 0; c < cases.size(); ++c) {
    const llvm::json::Object *object = cases[c].getAsObject();
    if (!object || object->empty())
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": case ", c, " must be an object of integers"));
    Assignment a;
    for (const auto &[key, value] : *object) {
      auto v = value.getAsInteger();
      if (!v)
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": case ", c, ": '", key.str(), "' must be an integer"));
      a.emplace_back(key.str(), *v);
    }
    out.push_back(std::move(a));
  }
  return out;
}

} // namespace

absl::StatusOr<std::vector<SweepInstance>> expandSweepFile(const std::string &path,
                                                           size_t maxInstances) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return absl::NotFoundError(absl::StrCat(path, ": ", buffer.getError().message()));
  auto json = llvm::json::parse((*buffer)->getBuffer());
  if (!json)
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not JSON: ", llvm::toString(json.takeError())));
  const llvm::json::Object *root = json->getAsObject();
  const llvm::json::Array *sweeps = root ? root->getArray("sweeps") : nullptr;
  if (!sweeps)
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": expected {\"sweeps\": [{\"name\", \"gir\", \"ranges\" or \"cases\"}, ...]}"));
  std::vector<SweepInstance> out;
  for (size_t s = 0; s < sweeps->size(); ++s) {
    const llvm::json::Object *sweep = (*sweeps)[s].getAsObject();
    llvm::Optional<llvm::StringRef> name, text;
    const llvm::json::Object *ranges = nullptr;
    const llvm::json::Array *cases = nullptr;
    if (sweep) {
      name = sweep->getString("name");
      text = sweep->getString("gir");
      ranges = sweep->getObject("ranges");
      cases = sweep->getArray("cases");
    }
    if (!name || !text || (!ranges == !cases))
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": sweep ", s,
                       ": needs \"name\", \"gir\" (a graph template) and one of \"ranges\" "
                       "(lists to combine) or \"cases\" (objects)"));
    std::string where = absl::StrCat(path, ": sweep '", name->str(), "'");
    auto assignments =
        ranges ? fromRanges(*ranges, where, maxInstances) : fromCases(*cases, where, maxInstances);
    if (!assignments.ok())
      return assignments.status();
    for (const Assignment &a : *assignments) {
      std::vector<std::pair<std::string, std::string>> subs;
      std::string label;
      for (const auto &[key, value] : a) {
        subs.emplace_back("{" + key + "}", std::to_string(value));
        absl::StrAppend(&label, label.empty() ? "" : ",", key, "=", value);
      }
      std::string instance = absl::StrReplaceAll(text->str(), subs);
      auto graph = parseGraph(instance, absl::StrCat(path, " (", name->str(), ": ", label, ")"));
      if (!graph.ok())
        return graph.status();
      if (absl::Status st = inferTypes(**graph); !st.ok())
        return absl::Status(st.code(), absl::StrCat(where, " (", label, "): ", st.message()));
      out.push_back({name->str(), label, std::move(*graph)});
    }
  }
  return out;
}

} // namespace graphopt
