//===- CudaBackend.cpp - LibTorch's CUDA backend, loaded where a GPU can be -----===//
//
// dlopen of libtorch_cuda.so from the directory libtorch_cpu.so was loaded
// from (found with dladdr), RTLD_GLOBAL so that what loads later resolves
// against it, as a plain link would. The driver check is a file test:
// /proc/driver/nvidia/version (the kernel module), /dev/nvidiactl, or
// /dev/dxg (WSL).
//
//===----------------------------------------------------------------------===//
#include "graphopt/Runtime/CudaBackend.h"

#include <ATen/Context.h>

#include <dlfcn.h>
#include <unistd.h>

#include <mutex>

namespace graphopt {
namespace {

#ifdef GRAPHOPT_WITH_CUDA
bool driverPresent() {
  for (const char *path : {"/proc/driver/nvidia/version", "/dev/nvidiactl", "/dev/dxg"})
    if (::access(path, F_OK) == 0)
      return true;
  return false;
}

/// The directory of the shared object that holds `symbol` ("" if unknown).
std::string directoryOf(const void *symbol) {
  Dl_info info;
  if (::dladdr(symbol, &info) == 0 || !info.dli_fname)
    return "";
  std::string path = info.dli_fname;
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}
#endif

std::mutex loadMutex;
bool tried = false;
bool loaded = false;
std::string status = "not tried";

/// Tries once (again when forced, unless loaded); callers hold loadMutex.
void load(bool force) {
  if (loaded || (tried && !force))
    return;
  tried = true;
#ifdef GRAPHOPT_WITH_CUDA
  const char *name = "libtorch_cuda.so";
  if (::dlopen(name, RTLD_NOW | RTLD_NOLOAD)) {
    status = "linked";
    loaded = true;
    return;
  }
  if (!force && !driverPresent()) {
    status = "no NVIDIA driver";
    return;
  }
  std::string path =
      directoryOf(reinterpret_cast<const void *>(&at::globalContext)) + name;
  if (::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
    status = "loaded " + path;
    loaded = true;
    return;
  }
  const char *error = ::dlerror();
  status = std::string("cannot load ") + path + ": " + (error ? error : "unknown error");
#else
  (void)force;
  status = "not built with CUDA";
#endif
}

} // namespace

bool cudaAvailable() {
  {
    std::lock_guard<std::mutex> lock(loadMutex);
    load(/*force=*/false);
  }
  return at::hasCUDA();
}

std::string cudaBackendStatus() {
  std::lock_guard<std::mutex> lock(loadMutex);
  load(/*force=*/false);
  return status;
}

c10::Device defaultDevice() {
  return cudaAvailable() ? c10::Device(c10::DeviceType::CUDA, 0)
                         : c10::Device(c10::DeviceType::CPU);
}

absl::StatusOr<c10::Device> deviceFromOption(const std::string &value, const std::string &option) {
  if (value.empty())
    return defaultDevice();
  if (value == "cpu")
    return c10::Device(c10::DeviceType::CPU);
  if (value == "cuda" || value.rfind("cuda:", 0) == 0) {
    if (!cudaAvailable())
      return absl::InvalidArgumentError(option + "=" + value +
                                        ": no GPU is present on this machine");
    return c10::Device(value);
  }
  return absl::InvalidArgumentError(option + ": expected cpu or cuda, got '" + value + "'");
}

bool loadCudaBackendForTesting() {
  std::lock_guard<std::mutex> lock(loadMutex);
  load(/*force=*/true);
  return loaded;
}

} // namespace graphopt
