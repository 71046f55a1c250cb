//===- OffloadKernels.cpp - graphopt::offload, reload and reload_wait -----===//
//
// The kernels of checkpoint's offload (GraphoptOps.h has the schemas). On
// CUDA: one copy stream per device, pinned host buffers, and events, so that
// the copies overlap the compute stream's work:
//
//   offload(x)       the copy stream waits for the compute stream's work so
//                    far (x is made), copies x to a pinned host buffer, and
//                    x's device buffer is marked in use by the copy stream
//                    (recordStream), so the allocator reuses it only once
//                    the copy is done;
//   reload(h, dev)   a device buffer, filled from h on the copy stream (after
//                    h's own offload, same stream); an event marks the end;
//   reload_wait(y)   the compute stream waits for y's event: nodes between
//                    reload and reload_wait run while the copy does.
//
// None of it runs on this project's CI machine (no GPU): it compiles
// everywhere CUDA is built, and is untested until a GPU runs it. On the CPU
// the three refuse, with the reason: an offload plan is simulated there.
//
//===----------------------------------------------------------------------===//
#include "graphopt/IR/GraphoptOps.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#ifdef GRAPHOPT_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#endif

namespace graphopt {
namespace {

[[noreturn]] void refuseOn(const char *op, c10::Device device) {
  TORCH_CHECK(false, op, " moves activations between a GPU's memory and the host's; on ", device,
              " there is no device memory to free: an offload plan is planned and simulated "
              "there (checkpoint{offload-bandwidth=...}), and runs only on CUDA");
}

#ifdef GRAPHOPT_WITH_CUDA
/// One copy stream per device, made on first use.
c10::cuda::CUDAStream copyStream(c10::DeviceIndex device) {
  static std::mutex mutex;
  static std::map<c10::DeviceIndex, c10::cuda::CUDAStream> streams;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = streams.find(device);
  if (it == streams.end())
    it = streams.emplace(device, c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device))
             .first;
  return it->second;
}

/// The end of each reload in flight, by its device buffer.
std::mutex reloadsMutex;
std::map<const void *, std::shared_ptr<at::cuda::CUDAEvent>> reloadsInFlight;

at::Tensor offloadCuda(const at::Tensor &self) {
  c10::cuda::CUDAGuard guard(self.device());
  c10::cuda::CUDAStream compute = c10::cuda::getCurrentCUDAStream(self.device().index());
  c10::cuda::CUDAStream copy = copyStream(self.device().index());
  at::cuda::CUDAEvent made;
  made.record(compute);
  made.block(copy);
  at::Tensor host = at::empty_strided(self.sizes(), self.strides(),
                                      self.options().device(at::kCPU).pinned_memory(true));
  {
    c10::cuda::CUDAStreamGuard onCopy(copy);
    host.copy_(self, /*non_blocking=*/true);
  }
  c10::cuda::CUDACachingAllocator::recordStream(self.storage().data_ptr(), copy);
  return host;
}

at::Tensor reloadWaitCuda(const at::Tensor &self) {
  std::shared_ptr<at::cuda::CUDAEvent> done;
  {
    std::lock_guard<std::mutex> lock(reloadsMutex);
    auto it = reloadsInFlight.find(self.storage().data());
    if (it != reloadsInFlight.end()) {
      done = it->second;
      reloadsInFlight.erase(it);
    }
  }
  if (done)
    done->block(c10::cuda::getCurrentCUDAStream(self.device().index()));
  return self.alias();
}
#endif

at::Tensor reload(const at::Tensor &host, c10::Device device) {
#ifdef GRAPHOPT_WITH_CUDA
  if (device.is_cuda()) {
    TORCH_CHECK(host.device().is_cpu(), "graphopt::reload: expected a host tensor, got one on ",
                host.device());
    c10::cuda::CUDAGuard guard(device);
    c10::cuda::CUDAStream copy = copyStream(guard.current_device().index());
    at::Tensor out;
    {
      c10::cuda::CUDAStreamGuard onCopy(copy);
      out = at::empty_strided(host.sizes(), host.strides(), host.options().device(device));
      out.copy_(host, /*non_blocking=*/true);
    }
    // Allocated on the copy stream, read on the compute stream.
    c10::cuda::CUDACachingAllocator::recordStream(
        out.storage().data_ptr(), c10::cuda::getCurrentCUDAStream(guard.current_device().index()));
    auto done = std::make_shared<at::cuda::CUDAEvent>();
    done->record(copy);
    std::lock_guard<std::mutex> lock(reloadsMutex);
    reloadsInFlight[out.storage().data()] = std::move(done);
    return out;
  }
#endif
  refuseOn("graphopt::reload", device);
}

at::Tensor offloadCpu(const at::Tensor &self) { refuseOn("graphopt::offload", self.device()); }
at::Tensor reloadWaitCpu(const at::Tensor &self) {
  refuseOn("graphopt::reload_wait", self.device());
}

} // namespace

void linkOffloadKernels() {}

} // namespace graphopt

// reload's input is a host tensor, so it dispatches on the CPU key whatever
// its target: one kernel for every backend, which branches on `device`.
TORCH_LIBRARY_IMPL(graphopt, CompositeExplicitAutograd, m) {
  m.impl("reload", graphopt::reload);
}

TORCH_LIBRARY_IMPL(graphopt, CPU, m) {
  m.impl("offload", graphopt::offloadCpu);
  m.impl("reload_wait", graphopt::reloadWaitCpu);
}

#ifdef GRAPHOPT_WITH_CUDA
TORCH_LIBRARY_IMPL(graphopt, CUDA, m) {
  m.impl("offload", graphopt::offloadCuda);
  m.impl("reload_wait", graphopt::reloadWaitCuda);
}
#endif
