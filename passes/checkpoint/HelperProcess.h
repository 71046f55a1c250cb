//===- HelperProcess.h - Planners that run in a program of their own -*- C++ -*-===//
//
// Some planners run outside graph-opt: the MILP solver (graph-opt-milp, CBC)
// and torch's own partitioner (python -m graph_opt.knapsack). A crash, a hang
// or a failure there is an error naming the planner, never the end of
// graph-opt. They talk through files: a request written here, an answer
// written there, its stderr kept for the message.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/StringRef.h>

#include <string>
#include <vector>

namespace graphopt {

/// A file of its own in $TMPDIR (else /tmp), removed with this object.
class TempFile {
public:
  /// `prefix` names it ("graph-opt-milp-request"); `suffix` ends it (".gir").
  static absl::StatusOr<TempFile> make(llvm::StringRef prefix, llvm::StringRef suffix = "");
  TempFile(TempFile &&other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }
  TempFile &operator=(TempFile &&) = delete;
  ~TempFile();
  const std::string &path() const { return path_; }

private:
  explicit TempFile(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

/// The last non-empty line of a file (a helper's stderr), or "".
std::string lastLineOf(const std::string &path);

/// Who runs, for the messages: "<planner>: the <role> <argv[0]> ...".
struct HelperProgram {
  std::string planner; ///< "checkpoint{planner=milp}"
  std::string role;    ///< "MILP solver"
  std::string hint;    ///< said when it cannot be started: " (set GRAPHOPT_MILP_SOLVER ...)"
};

/// Runs `argv` (argv[0] a path) with standard input from /dev/null, standard
/// output discarded and standard error into the file `errors`, in the
/// process's environment with `extraEnv` ("NAME=value") set over it, and
/// waits for it at most `deadline` seconds (then kills it). Then:
///   - exit 0: OK;
///   - a signal: "<planner>: the <role> <path> crashed (signal N, name)<doing>; <fallback>";
///   - another exit: "... failed (exit status N)<doing>: <its last stderr line>";
///   - not started, or stopped at the deadline: an error saying so.
absl::Status runHelper(const HelperProgram &program, llvm::ArrayRef<std::string> argv,
                       llvm::ArrayRef<std::string> extraEnv, const std::string &errors,
                       double deadline, llvm::StringRef doing, llvm::StringRef fallback);

} // namespace graphopt
