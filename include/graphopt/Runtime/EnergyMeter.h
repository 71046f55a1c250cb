//===- EnergyMeter.h - Joules from the machine's own counters ---*- C++ -*-===//
//
// Where the machine has an energy sensor, the cost database records each
// operator's energy per call: the counter read before and after the timed
// loop, divided by the calls.
//  - NVIDIA GPUs: NVML's total energy counter of the device
//    (nvmlDeviceGetTotalEnergyConsumption, millijoules since the driver
//    loaded), from libnvidia-ml.so.1, loaded at run time (the driver ships it;
//    nothing links it, so the build runs where there is none). The device is
//    found by its UUID, which CUDA and NVML share: their indices differ
//    (CUDA numbers fastest first and after CUDA_VISIBLE_DEVICES).
//  - CPUs: Linux powercap's RAPL package domains
//    (/sys/class/powercap/intel-rapl:N/energy_uj, summed over the packages,
//    its wrap-around at max_energy_range_uj undone). $GRAPHOPT_POWERCAP_DIR
//    replaces /sys/class/powercap (tests give a directory of their own).
// Otherwise there is no meter, and findEnergyMeter says what it looked for.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <c10/core/Device.h>

#include <absl/status/statusor.h>

#include <memory>
#include <string>

namespace graphopt {

class EnergyMeter {
public:
  virtual ~EnergyMeter() = default;
  /// The counter now, in joules (from an arbitrary origin).
  virtual absl::StatusOr<double> joules() = 0;
  /// What it reads, in words: "RAPL: package-0, package-1", "NVML: cuda:0 GPU-<uuid>".
  virtual std::string source() const = 0;
};

/// The meter for `device`, or null with `*whyNone` saying what was looked
/// for and not found.
std::unique_ptr<EnergyMeter> findEnergyMeter(c10::Device device, std::string *whyNone);

/// A CUDA device UUID's 16 bytes as NVML names the device
/// ("GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi -L prints it).
std::string nvmlUuidText(const unsigned char (&bytes)[16]);

} // namespace graphopt
