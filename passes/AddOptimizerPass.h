//===- AddOptimizerPass.h - The optimizer update inside the graph --*- C++ -*-===//
//
// add-optimizer{kind=sgd|adamw,lr=...}: turns a joint forward+backward graph
// (outputs: loss and one gradient per parameter) into a complete training
// step by appending, in the optimizer phase, the update torch.optim's fused
// path makes:
//
//   adamw: aten::_foreach_add_.Scalar(steps, 1)      (torch.optim increments
//          aten::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, [], steps, ...)
//                                                     the steps before the op)
//   sgd:   aten::_fused_sgd_(params, grads, momentum_buffers, ...)
//
// one group of nodes per (dtype, device) of the parameters, as torch.optim
// groups tensors for the fused kernels. Optimizer state becomes new graph
// inputs of role optimizer_state, named after the parameter
// (`<param>.exp_avg`, `<param>.exp_avg_sq`, `<param>.step`,
// `<param>.momentum_buffer`); the executor creates missing ones as zeros, as
// torch.optim does on its first step. Parameters and state are written in
// place; gradient outputs stay outputs. docs/Optimizer.md has the details:
// tied parameters, gradient layouts, what the pass refuses.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/Pass/Pass.h"

#include <optional>

namespace graphopt {

class AddOptimizerPass : public OptimizationPass {
public:
  enum class Kind { Sgd, AdamW };

  /// The hyperparameters in effect: the options given, the kind's defaults
  /// (torch.optim's, except lr) for the others.
  struct Hyperparameters {
    Kind kind = Kind::AdamW;
    double lr = 1e-3;
    double weightDecay = 1e-2;
    double momentum = 0.9; ///< sgd
    double beta1 = 0.9;    ///< adamw
    double beta2 = 0.999;  ///< adamw
    double eps = 1e-8;     ///< adamw
  };

  static llvm::StringRef passName() { return "add-optimizer"; }
  static llvm::StringRef passDescription() {
    return "append the optimizer update (fused SGD with momentum or AdamW) to a training graph";
  }
  /// Fuzzed at its defaults, after the default pipeline, and at settings
  /// other than the defaults (held to torch.optim's kernels at the same).
  static PassTraits passTraits() {
    return {/*insideCompile=*/false,
            "",
            {{"add-optimizer"},
             {"add-optimizer{kind=adamw},repeat{cse,canonicalize,dce},reinplace"},
             {"add-optimizer{kind=adamw,lr=0.01,weight-decay=0.1,beta1=0.8,beta2=0.99,eps=1e-6}"},
             {"add-optimizer{kind=sgd,lr=0.05,momentum=0.5,weight-decay=0.01}"}}};
  }
  llvm::StringRef name() const override { return passName(); }
  /// The step now also updates the parameters: later passes are verified
  /// against this pass's output (add-optimizer itself against torch.optim).
  bool changesWhatTheStepComputes() const override { return true; }
  llvm::StringRef description() const override { return passDescription(); }

  absl::StatusOr<bool> transform(Graph &graph, AnalysisManager &analyses) override;
  absl::Status verify(const Graph &graph) override;

  Hyperparameters hyperparameters() const;

protected:
  absl::Status validateOptions() override;

private:
  PassOption<Kind> kind_{this, "kind", "the update rule", Kind::AdamW,
                         {{"sgd", Kind::Sgd}, {"adamw", Kind::AdamW}}};
  PassOption<double> lr_{this, "lr", "learning rate (>= 0)", 1e-3};
  PassOption<std::optional<double>> weightDecay_{
      this, "weight-decay",
      "sgd: L2 penalty added to the gradient (unset: 0); adamw: decoupled weight decay "
      "(unset: 0.01); >= 0",
      std::nullopt};
  PassOption<std::optional<double>> momentum_{
      this, "momentum", "sgd only: momentum factor (unset: 0.9; 0: no momentum buffers); >= 0",
      std::nullopt};
  PassOption<std::optional<double>> beta1_{
      this, "beta1", "adamw only: first-moment decay (unset: 0.9); in [0, 1)", std::nullopt};
  PassOption<std::optional<double>> beta2_{
      this, "beta2", "adamw only: second-moment decay (unset: 0.999); in [0, 1)", std::nullopt};
  PassOption<std::optional<double>> eps_{
      this, "eps", "adamw only: added to the denominator (unset: 1e-8); >= 0", std::nullopt};
};

} // namespace graphopt
