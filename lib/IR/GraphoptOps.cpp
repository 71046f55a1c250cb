//===- GraphoptOps.cpp - The operators graph-opt's rewrites insert ---------===//
#include "graphopt/IR/GraphoptOps.h"
#include "graphopt/IR/Graph.h"

#include <ATen/Context.h>
#include <ATen/core/Generator.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/native_dropout.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <cstring>
#include <mutex>
#include <optional>
#include <tuple>

namespace graphopt {
namespace {

at::Generator generatorOf(const at::Tensor &t) {
  return at::globalContext().defaultGenerator(t.device());
}

at::Tensor rngState(const at::Tensor &like) {
  at::Generator gen = generatorOf(like);
  at::Tensor state;
  {
    std::lock_guard<std::mutex> lock(gen.mutex());
    state = gen.get_state();
  }
  const int64_t n = state.numel() * static_cast<int64_t>(state.element_size());
  TORCH_CHECK(8 + n <= kRngStateBytes, "graphopt::rng_state: the ", like.device(),
              " generator's state is ", n, " bytes; at most ", kRngStateBytes - 8, " fit");
  at::Tensor packed = at::zeros({kRngStateBytes}, at::kByte);
  auto *bytes = packed.data_ptr<uint8_t>();
  std::memcpy(bytes, &n, sizeof n);
  std::memcpy(bytes + 8, state.contiguous().data_ptr(), n);
  return packed;
}

at::Tensor unpack(const at::Tensor &packed) {
  TORCH_CHECK(packed.scalar_type() == at::kByte && packed.dim() == 1 &&
                  packed.numel() == kRngStateBytes,
              "graphopt::native_dropout_replay: rng_state is not what graphopt::rng_state makes");
  at::Tensor cpu = packed.to(at::kCPU).contiguous();
  const auto *bytes = cpu.data_ptr<uint8_t>();
  int64_t n = 0;
  std::memcpy(&n, bytes, sizeof n);
  TORCH_CHECK(n > 0 && 8 + n <= kRngStateBytes,
              "graphopt::native_dropout_replay: rng_state holds a length of ", n);
  return cpu.slice(0, 8, 8 + n).clone();
}

/// Sets a generator's state for its lifetime and puts the old one back, also
/// when the dropout throws.
class GeneratorStateScope {
public:
  GeneratorStateScope(at::Generator gen, const at::Tensor &state) : gen_(std::move(gen)) {
    std::lock_guard<std::mutex> lock(gen_.mutex());
    saved_ = gen_.get_state();
    gen_.set_state(state);
  }
  ~GeneratorStateScope() {
    std::lock_guard<std::mutex> lock(gen_.mutex());
    gen_.set_state(saved_);
  }
  GeneratorStateScope(const GeneratorStateScope &) = delete;
  GeneratorStateScope &operator=(const GeneratorStateScope &) = delete;

private:
  at::Generator gen_;
  at::Tensor saved_;
};

std::tuple<at::Tensor, at::Tensor> dropoutReplay(const at::Tensor &input, double p,
                                                 std::optional<bool> train,
                                                 const at::Tensor &rngState) {
  at::Tensor state = unpack(rngState);
  // The generator's own lock is not held across the dropout, which takes it.
  GeneratorStateScope scope(generatorOf(input), state);
  return at::native_dropout(input, p, train);
}

at::Tensor rngStateMeta(const at::Tensor &like) {
  return at::empty({kRngStateBytes}, like.options().dtype(at::kByte));
}

std::tuple<at::Tensor, at::Tensor> dropoutReplayMeta(const at::Tensor &input, double,
                                                     std::optional<bool>, const at::Tensor &) {
  return {at::empty_like(input), at::empty_like(input, input.options().dtype(at::kBool))};
}

at::Tensor offloadMeta(const at::Tensor &self) { return at::empty_like(self); }

at::Tensor reloadMeta(const at::Tensor &host, c10::Device) { return at::empty_like(host); }

at::Tensor reloadWaitMeta(const at::Tensor &self) { return self.alias(); }

} // namespace

void linkGraphoptOps() {}

bool isHostCopy(const Node &node) {
  const c10::OperatorName &name = node.op().operator_name();
  return name.overload_name.empty() && name.name == kOffloadOp;
}

} // namespace graphopt

TORCH_LIBRARY(graphopt, m) {
  m.def("rng_state(Tensor like) -> Tensor", {at::Tag::nondeterministic_seeded});
  m.def("native_dropout_replay(Tensor input, float p, bool? train, Tensor rng_state) -> "
        "(Tensor, Tensor)");
  m.def("offload(Tensor self) -> Tensor");
  m.def("reload(Tensor host, Device device) -> Tensor");
  m.def("reload_wait(Tensor(a) self) -> Tensor(a)");
}

TORCH_LIBRARY_IMPL(graphopt, CPU, m) {
  m.impl("rng_state", graphopt::rngState);
  m.impl("native_dropout_replay", graphopt::dropoutReplay);
}

TORCH_LIBRARY_IMPL(graphopt, CUDA, m) {
  m.impl("rng_state", graphopt::rngState);
  m.impl("native_dropout_replay", graphopt::dropoutReplay);
}

TORCH_LIBRARY_IMPL(graphopt, Meta, m) {
  m.impl("rng_state", graphopt::rngStateMeta);
  m.impl("native_dropout_replay", graphopt::dropoutReplayMeta);
  m.impl("offload", graphopt::offloadMeta);
  m.impl("reload", graphopt::reloadMeta);
  m.impl("reload_wait", graphopt::reloadWaitMeta);
}
