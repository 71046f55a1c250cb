//===- CudaBackendTest.cpp - LibTorch's CUDA backend loaded on demand -----------===//
#include "graphopt/Runtime/CudaBackend.h"

#include <ATen/Context.h>
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
  std::string before = cudaBackendStatus();
  ASSERT_TRUE(loadCudaBackendForTesting()) << cudaBackendStatus();
  EXPECT_NE(::dlopen("libtorch_cuda.so", RTLD_NOW | RTLD_NOLOAD), nullptr);
  // The CUDA hooks are registered now: hasCUDA() is true exactly where a device is.
  EXPECT_EQ(cudaAvailable(), at::hasCUDA());
  if (before == "no NVIDIA driver")
    EXPECT_FALSE(at::hasCUDA());
  // Asked again: loaded once, the status stays.
  std::string status = cudaBackendStatus();
  EXPECT_TRUE(loadCudaBackendForTesting());
  EXPECT_EQ(cudaBackendStatus(), status);
}
