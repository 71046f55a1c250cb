//===- Exceptions.h - What LibTorch and its backends threw -------*- C++ -*-===//
//
// graph-opt reports failures as absl::Status. LibTorch, oneDNN, nlohmann and
// the standard library throw; the boundaries that call into them (the
// executor, the importers, the stand-in makers, the driver) catch everything
// and describe it with this, so no input ends in an abort.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>

namespace graphopt {

/// The message of the exception being handled: c10::Error without its C++
/// backtrace, "out of memory" for std::bad_alloc, what() for any other
/// std::exception. Call only inside a catch block.
std::string describeCurrentException();

} // namespace graphopt
