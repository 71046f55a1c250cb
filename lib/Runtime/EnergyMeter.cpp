//===- EnergyMeter.cpp - Joules from the machine's own counters -----------===//
#include "graphopt/Runtime/EnergyMeter.h"

#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Path.h>

#include <dlfcn.h>

#ifdef GRAPHOPT_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

#include <cstdlib>
#include <optional>
#include <vector>

namespace graphopt {

namespace {

std::optional<double> readNumber(const std::string &path) {
  auto file = llvm::MemoryBuffer::getFileAsStream(path);
  if (!file)
    return std::nullopt;
  double v = 0;
  if (llvm::StringRef((*file)->getBuffer()).trim().getAsDouble(v))
    return std::nullopt;
  return v;
}

std::string readText(const std::string &path) {
  auto file = llvm::MemoryBuffer::getFileAsStream(path);
  return file ? llvm::StringRef((*file)->getBuffer()).trim().str() : "";
}

/// RAPL package domains: intel-rapl:N (not the sub-domains intel-rapl:N:M,
/// which the package already counts).
class RaplMeter : public EnergyMeter {
public:
  struct Domain {
    std::string dir, name;
    double rangeMicrojoules = 0;
    double last = 0, wrapped = 0;
  };
  explicit RaplMeter(std::vector<Domain> domains) : domains_(std::move(domains)) {}

  absl::StatusOr<double> joules() override {
    double total = 0;
    for (Domain &d : domains_) {
      auto now = readNumber(d.dir + "/energy_uj");
      if (!now)
        return absl::UnavailableError(absl::StrCat("cannot read ", d.dir, "/energy_uj"));
      // The counter wraps at max_energy_range_uj; reads come often enough
      // (around every timed loop) that it wraps at most once in between.
      if (*now < d.last && d.rangeMicrojoules > 0)
        d.wrapped += d.rangeMicrojoules;
      d.last = *now;
      total += (*now + d.wrapped) * 1e-6;
    }
    return total;
  }
  std::string source() const override {
    std::vector<std::string> names;
    for (const Domain &d : domains_)
      names.push_back(d.name);
    return absl::StrCat("RAPL: ", absl::StrJoin(names, ", "));
  }

private:
  std::vector<Domain> domains_;
};

std::unique_ptr<EnergyMeter> findRapl(std::string *why) {
  const char *env = std::getenv("GRAPHOPT_POWERCAP_DIR");
  std::string root = env && *env ? env : "/sys/class/powercap";
  std::vector<RaplMeter::Domain> domains;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    // intel-rapl:0 (a package), not intel-rapl:0:1 (a part of it).
    if (!name.startswith("intel-rapl:") || name.drop_front(11).contains(':'))
      continue;
    RaplMeter::Domain d;
    d.dir = it->path();
    auto first = readNumber(d.dir + "/energy_uj");
    if (!first)
      continue;
    d.last = *first;
    d.name = readText(d.dir + "/name");
    if (d.name.empty())
      d.name = name.str();
    d.rangeMicrojoules = readNumber(d.dir + "/max_energy_range_uj").value_or(0);
    domains.push_back(std::move(d));
  }
  if (domains.empty()) {
    *why = absl::StrCat("no readable RAPL package domain under ", root,
                        " (intel-rapl:N/energy_uj)");
    return nullptr;
  }
  return std::make_unique<RaplMeter>(std::move(domains));
}

/// NVML, through dlopen: the few entry points it needs, declared by their C
/// signatures (nvml.h: nvmlReturn_t is an int, 0 success; nvmlDevice_t a pointer).
class NvmlMeter : public EnergyMeter {
public:
  using GetEnergy = int (*)(void *, unsigned long long *);
  NvmlMeter(void *device, GetEnergy get, std::string which)
      : device_(device), get_(get), which_(std::move(which)) {}
  absl::StatusOr<double> joules() override {
    unsigned long long millijoules = 0;
    if (int rc = get_(device_, &millijoules); rc != 0)
      return absl::UnavailableError(
          absl::StrCat("nvmlDeviceGetTotalEnergyConsumption failed (NVML error ", rc, ")"));
    return static_cast<double>(millijoules) * 1e-3;
  }
  std::string source() const override { return absl::StrCat("NVML: ", which_); }

private:
  void *device_;
  GetEnergy get_;
  std::string which_;
};

} // namespace

std::string nvmlUuidText(const unsigned char (&bytes)[16]) {
  // NVML's form: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx (nvidia-smi -L prints it).
  std::string hex = llvm::toHex(llvm::ArrayRef<uint8_t>(bytes, 16), /*LowerCase=*/true);
  return "GPU-" + hex.substr(0, 8) + "-" + hex.substr(8, 4) + "-" + hex.substr(12, 4) + "-" +
         hex.substr(16, 4) + "-" + hex.substr(20);
}

namespace {

/// The NVML name of CUDA device `index`: its UUID. CUDA numbers devices
/// fastest first and after CUDA_VISIBLE_DEVICES, NVML by PCI bus over all of
/// them, so the same index can be another GPU; the UUID is the same in both.
std::optional<std::string> cudaDeviceUuid(int index) {
#ifdef GRAPHOPT_WITH_CUDA
  cudaDeviceProp props{};
  if (cudaGetDeviceProperties(&props, index) != cudaSuccess) {
    (void)cudaGetLastError(); // clear the sticky error for the next caller
    return std::nullopt;
  }
  unsigned char bytes[16];
  for (int i = 0; i < 16; ++i)
    bytes[i] = static_cast<unsigned char>(props.uuid.bytes[i]);
  return nvmlUuidText(bytes);
#else
  (void)index;
  return std::nullopt;
#endif
}

std::unique_ptr<EnergyMeter> findNvml(int index, std::string *why) {
  void *lib = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    *why = "no NVML (libnvidia-ml.so.1 not found)";
    return nullptr;
  }
  using Init = int (*)();
  using ByUuid = int (*)(const char *, void **);
  auto init = reinterpret_cast<Init>(::dlsym(lib, "nvmlInit_v2"));
  auto byUuid = reinterpret_cast<ByUuid>(::dlsym(lib, "nvmlDeviceGetHandleByUUID"));
  auto energy =
      reinterpret_cast<NvmlMeter::GetEnergy>(::dlsym(lib, "nvmlDeviceGetTotalEnergyConsumption"));
  std::optional<std::string> uuid = cudaDeviceUuid(index);
  if (!uuid) {
    // NVML's own index is not CUDA's: without the UUID no counter is known to
    // be this device's.
    *why = absl::StrCat("CUDA gave no UUID for device cuda:", index,
                        ", so NVML's device for it is unknown");
    return nullptr;
  }
  void *device = nullptr;
  unsigned long long probe = 0;
  if (!init || !byUuid || !energy || init() != 0 || byUuid(uuid->c_str(), &device) != 0 ||
      energy(device, &probe) != 0) {
    *why = absl::StrCat("NVML has no energy counter for cuda:", index, " (", *uuid,
                        "; Volta and later report one)");
    return nullptr;
  }
  return std::make_unique<NvmlMeter>(device, energy, absl::StrCat("cuda:", index, " ", *uuid));
}

} // namespace

std::unique_ptr<EnergyMeter> findEnergyMeter(c10::Device device, std::string *whyNone) {
  std::string why;
  std::unique_ptr<EnergyMeter> meter =
      device.is_cuda() ? findNvml(device.has_index() ? device.index() : 0, &why) : findRapl(&why);
  if (!meter && whyNone)
    *whyNone = why;
  return meter;
}

} // namespace graphopt
