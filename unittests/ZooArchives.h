//===- ZooArchives.h - The tiny zoo archives the tests run over ---*- C++ -*-===//
//
// tools/export/export_zoo.py writes them into $GRAPHOPT_ZOO_DIR (the
// `export_zoo` ctest fixture): <model>-eval.pt2, <model>-train.pt2, and
// <model>-train-nodrop.pt2 for the models with dropout.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <absl/strings/str_cat.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

namespace graphopt::test {

inline const std::vector<std::string> &zooModels() {
  static const std::vector<std::string> models = {
      "mlp", "cnn", "resnet18", "resnet50", "resnet152", "bert", "bert-mlm", "gpt2", "llama", "t5"};
  return models;
}

/// The models whose training graphs hold dropout (exported also without it).
inline bool hasDropout(const std::string &model) {
  return model == "bert" || model == "bert-mlm" || model == "gpt2" || model == "t5";
}

/// "<model>-<suffix>" for every zoo model.
inline std::vector<std::string> zooArchives(const std::vector<std::string> &suffixes) {
  std::vector<std::string> names;
  for (const std::string &m : zooModels())
    for (const std::string &s : suffixes)
      names.push_back(absl::StrCat(m, "-", s));
  return names;
}

/// The archive directory, or "" (tests assert on it).
inline std::string zooDir() {
  const char *dir = std::getenv("GRAPHOPT_ZOO_DIR");
  return dir ? dir : "";
}

/// gtest parameter names: "resnet18-train" -> "resnet18_train".
struct ArchiveName {
  std::string operator()(const testing::TestParamInfo<std::string> &info) const {
    std::string n = info.param;
    std::replace(n.begin(), n.end(), '-', '_');
    return n;
  }
};

} // namespace graphopt::test
