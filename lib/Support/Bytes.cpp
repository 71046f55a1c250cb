//===- Bytes.cpp - Amounts of memory for people ---------------------------===//
#include "graphopt/Support/Bytes.h"

#include <absl/strings/str_cat.h>

#include <cmath>
#include <cstdio>

namespace graphopt {

std::string formatBytes(int64_t bytes) {
  static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  if (std::fabs(v) < 1024)
    return absl::StrCat(bytes, " B");
  int unit = -1;
  while (std::fabs(v) >= 1024 && unit < 3) {
    v /= 1024;
    ++unit;
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.2f %s", v, units[unit]);
  return buf;
}

std::string formatMiB(int64_t bytes) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

} // namespace graphopt
