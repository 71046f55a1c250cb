//===- CudaBackendTest.cpp - LibTorch's CUDA backend loaded on demand -----------===//
#include "graphopt/Runtime/CudaBackend.h"

#include <ATen/Context.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>

#include <dlfcn.h>

using namespace graphopt;

// graph-opt does not link libtorch_cuda.so (CudaBackend.h): the test binary,
// like graph-opt, starts without it where no GPU driver is, and it loads from
// beside libtorch_cpu.so when asked, registering its kernels.
TEST(CudaBackendTest, LoadsBesideLibTorchWhenAskedAndAgreesWithHasCuda) {
#ifndef GRAPHOPT_WITH_CUDA
  GTEST_SKIP() << "built without CUDA";
#endif
  auto add = c10::Dispatcher::singleton().findSchema({"aten::add", "Tensor"});
  ASSERT_TRUE(add.has_value());
  std::string before = cudaBackendStatus();
  // Without a driver nothing was loaded: no CUDA kernels yet.
  if (before == "no NVIDIA driver") {
    EXPECT_FALSE(add->hasKernelForDispatchKey(c10::DispatchKey::CUDA));
    EXPECT_FALSE(cudaAvailable());
  }
  ASSERT_TRUE(loadCudaBackendForTesting()) << cudaBackendStatus();
  EXPECT_NE(::dlopen("libtorch_cuda.so", RTLD_NOW | RTLD_NOLOAD), nullptr);
  // Its kernels registered themselves as it loaded.
  EXPECT_TRUE(add->hasKernelForDispatchKey(c10::DispatchKey::CUDA));
  // Asked again: loaded once, the status stays.
  std::string status = cudaBackendStatus();
  EXPECT_TRUE(loadCudaBackendForTesting());
  EXPECT_EQ(cudaBackendStatus(), status);
}
