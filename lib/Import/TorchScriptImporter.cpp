#include "graphopt/Import/Importer.h"
#include <absl/strings/str_cat.h>
namespace graphopt {
absl::StatusOr<ImportedModel> importTorchScript(llvm::StringRef path) {
  return absl::UnimplementedError(absl::StrCat(path.str(), ": TorchScript import is being written"));
}
}
