//===- Bytes.h - Amounts of memory for people ---------------------*- C++ -*-===//
#pragma once

#include <cstdint>
#include <string>

namespace graphopt {

/// Bytes in the largest binary unit that keeps the number at least 1, two
/// decimals: "512 B", "1.50 KiB", "12.34 MiB", "1.20 GiB".
std::string formatBytes(int64_t bytes);
/// Always in MiB, two decimals ("49.81 MiB"): for columns that compare.
std::string formatMiB(int64_t bytes);

} // namespace graphopt
