//===- CudaBackend.h - LibTorch's CUDA backend, loaded where a GPU can be -*- C++ -*-===//
//
// graph-opt does not link libtorch_cuda.so: loading it (with cuBLAS, cuDNN
// and the rest it needs) costs about 0.15 s of every start, on machines that
// have no GPU as much as on those that do. Instead it is loaded here, once,
// where an NVIDIA driver is present; its kernels register themselves with the
// dispatcher as it loads, and at::hasCUDA() holds from then on. Where torch
// is already loaded (graph-opt's Python package imports it) nothing is done.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <absl/status/statusor.h>
#include <c10/core/Device.h>

#include <string>

namespace graphopt {

/// Whether a CUDA device can be used: loads LibTorch's CUDA backend first
/// where an NVIDIA driver is present (once), then asks at::hasCUDA().
bool cudaAvailable();

/// What loading the CUDA backend did (for tests and diagnostics):
/// "linked" (already loaded), "loaded PATH", "no NVIDIA driver", "not built
/// with CUDA", or the loader's error.
std::string cudaBackendStatus();

/// The device graph-opt runs on unless told: CUDA device 0 where a GPU can be
/// used, else the CPU.
c10::Device defaultDevice();

/// The device a --device option's value names: "" (defaultDevice), "cpu",
/// "cuda" or "cuda:N" (an error without a GPU). Errors start with `option`.
absl::StatusOr<c10::Device> deviceFromOption(const std::string &value,
                                             const std::string &option = "--device");

/// Loads the backend even without a driver (tests: the library is found and
/// loads; at::hasCUDA() stays false without a device). True when loaded.
bool loadCudaBackendForTesting();

} // namespace graphopt
