//===- TestSupport.h - Helpers the unit tests share ---------------*- C++ -*-===//
#pragma once

#include "graphopt/IR/Parser.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

/// Expects `needle` in `haystack` (strings or string views), printing the haystack when not.
#define EXPECT_CONTAINS(haystack, needle)                                                          \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

namespace graphopt::test {

/// Parses .gir text, failing the test (and returning null) on a parse error.
inline std::unique_ptr<Graph> parseOrFail(const std::string &text) {
  auto g = parseGraph(text, "test.gir");
  EXPECT_TRUE(g.ok()) << g.status().message();
  return g.ok() ? std::move(*g) : nullptr;
}

/// The value named `name` in `g`, failing the test (and returning null) when there is none.
inline Value *valueNamed(const Graph &g, llvm::StringRef name) {
  for (Value *v : g.allValues())
    if (v->name() == name)
      return v;
  ADD_FAILURE() << "no value %" << name.str();
  return nullptr;
}

} // namespace graphopt::test
