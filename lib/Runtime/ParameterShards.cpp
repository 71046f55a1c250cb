//===- ParameterShards.cpp - A parameter held as one rank's shard ---------===//
#include "graphopt/Runtime/ParameterShards.h"

#include <ATen/ops/constant_pad_nd.h>

namespace graphopt {

at::Tensor shardOf(const at::Tensor &whole, int64_t world, int64_t rank) {
  const int64_t chunk = shardElements(whole.numel(), world);
  at::Tensor flat = whole.reshape({-1});
  if (const int64_t pad = chunk * world - whole.numel(); pad > 0)
    flat = at::constant_pad_nd(flat, {0, pad}, 0);
  return flat.narrow(0, rank * chunk, chunk).clone();
}

} // namespace graphopt
