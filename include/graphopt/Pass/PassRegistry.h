//===- PassRegistry.h - Passes by name, one registration line each -*- C++ -*-===//
//
//   GRAPHOPT_REGISTER_PASS(LivenessPass);   // in the pass's .cpp
//
// The pass class needs a default constructor and static `passName()` and
// `passDescription()`, and may declare a static `passTraits()` (PassTraits.h:
// whether it runs inside torch.compile, the pipelines it is fuzzed in). Passes live in an OBJECT library (passes/), so their
// registrations are always linked in.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/Pass/Pass.h"
#include "graphopt/Pass/PassTraits.h"

#include <functional>
#include <type_traits>
#include <vector>

namespace graphopt {

class PassRegistry {
public:
  using Factory = std::function<std::unique_ptr<OptimizationPass>()>;
  struct Entry {
    std::string name;
    std::string description;
    Factory create;
    bool hidden; ///< test-only passes: not listed by --list-passes
    PassTraits traits;
  };

  static PassRegistry &instance();

  void add(Entry entry);
  /// Takes a pass out again (a test's, a plugin's that is unloaded); false
  /// where none has the name.
  bool remove(llvm::StringRef name);
  /// The named pass's entry, or null.
  const Entry *find(llvm::StringRef name) const;
  /// A new instance of the named pass; an unknown name lists the known ones.
  absl::StatusOr<std::unique_ptr<OptimizationPass>> create(llvm::StringRef name) const;
  /// Registered passes sorted by name (hidden ones only when asked).
  std::vector<const Entry *> entries(bool includeHidden = false) const;

private:
  std::vector<Entry> entries_;
};

namespace detail {
template <typename PassT, typename = void> struct DeclaredTraits {
  static PassTraits get() { return {}; }
};
template <typename PassT>
struct DeclaredTraits<PassT, std::void_t<decltype(PassT::passTraits())>> {
  static PassTraits get() { return PassT::passTraits(); }
};
template <typename PassT> struct PassRegistration {
  explicit PassRegistration(bool hidden) {
    PassRegistry::instance().add({std::string(PassT::passName()),
                                  std::string(PassT::passDescription()),
                                  [] { return std::make_unique<PassT>(); }, hidden,
                                  DeclaredTraits<PassT>::get()});
  }
};
} // namespace detail

#define GRAPHOPT_REGISTER_PASS(PassT)                                                              \
  static ::graphopt::detail::PassRegistration<PassT> graphoptRegistration##PassT(false)
#define GRAPHOPT_REGISTER_TEST_PASS(PassT)                                                         \
  static ::graphopt::detail::PassRegistration<PassT> graphoptRegistration##PassT(true)

} // namespace graphopt
