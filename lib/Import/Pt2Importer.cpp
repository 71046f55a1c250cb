//===- Pt2Importer.cpp - torch.export archives (.pt2) ---------------------===//
//
// An archive written by torch.export.save is a zip (read with LibTorch's
// PyTorchStreamReader) holding, under one top-level folder:
//   models/<name>.json                     the ExportedProgram (serde schema)
//   data/weights/<name>_weights_config.json  FQN -> {path_name, tensor_meta, use_pickle}
//   data/weights/weight_N                  raw storage bytes (shared by tied weights)
//   data/constants/<name>_constants_config.json, data/constants/...  likewise
//   data/weights/<name>.pt, data/constants/<name>.pt
//                                          (older archives) pickled state dicts
// docs/Pt2ArchiveFormat.md describes the format in full.
// The JSON is read into LibTorch's generated serde types
// (torch/csrc/utils/generated_serialization_types.h).
//
//===----------------------------------------------------------------------===//
#include "Pt2Graph.h"
#include "SerdeCheck.h"
#include "SerdeEnums.h"
#include "ZipCheck.h"
#include "graphopt/IR/Exceptions.h"
#include "graphopt/Import/Importer.h"
#include "graphopt/Import/TypeCorrection.h"

#include <ATen/ops/empty.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <caffe2/serialize/inline_container.h>
#include <llvm/ADT/StringMap.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <cstring>
#include <map>

namespace graphopt {

namespace {

namespace ts = torch::_export;

/// The serde schema major version this build reads (torch 2.11 writes 8.x).
constexpr int64_t kSupportedSchemaMajor = 8;

/// The graph of an ExportedProgram's JSON (models/<name>.json); `where`
/// (file and record) starts every error.
absl::StatusOr<std::unique_ptr<Graph>> graphFromJson(const std::string &text,
                                                     const std::string &where,
                                                     const std::string &graphName) {
  auto error = [&](llvm::StringRef message) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", message.str()));
  };
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text);
  } catch (const std::exception &e) {
    return error(absl::StrCat("invalid JSON: ", e.what()));
  }
  const nlohmann::json *version = json.is_object() && json.contains("schema_version")
                                      ? &json["schema_version"] : nullptr;
  if (!version || !version->is_object() || !version->contains("major") ||
      !(*version)["major"].is_number_integer())
    return error("no schema_version; not a torch.export model");
  int64_t major = (*version)["major"].get<int64_t>();
  const nlohmann::json *minorField = version->contains("minor") ? &(*version)["minor"] : nullptr;
  if (minorField && !minorField->is_number_integer())
    return error("schema_version.minor is not an integer");
  int64_t minor = minorField ? minorField->get<int64_t>() : 0;
  if (major != kSupportedSchemaMajor)
    return error(absl::StrCat("serialization schema version ", major, ".", minor,
                              " is not supported; graph-opt reads major version ",
                              kSupportedSchemaMajor, " (torch 2.11). Re-export with that torch"));
  ts::ExportedProgram ep;
  try {
    if (absl::Status st = serde::checkExportedProgramJson(json); !st.ok())
      return error(absl::StrCat("does not match the export schema: ", st.message()));
    json.get_to(ep);
  } catch (const std::exception &e) {
    return error(absl::StrCat("does not match the export schema: ", e.what()));
  }
  // The serde types hold what the JSON said, variants included: a field of
  // the wrong kind (a size that is null or {}) throws when read.
  try {
    return serde::buildGraph(ep, graphName, where);
  } catch (const std::exception &e) {
    return error(absl::StrCat("a field holds a value of the wrong kind (", e.what(), ")"));
  }
}

absl::Status checkWeightTypes(const Graph &g, const WeightStore &store, bool requireAll,
                              const std::string &where);
void tieSharedWeights(Graph &g, const WeightStore &store);

class Pt2Reader {
public:
  explicit Pt2Reader(llvm::StringRef path) : path_(path.str()) {}

  absl::StatusOr<ImportedModel> read();

private:
  absl::Status error(llvm::StringRef message) const {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": ", message.str()));
  }
  absl::StatusOr<std::string> record(const std::string &name);
  absl::StatusOr<std::pair<at::DataPtr, size_t>> rawRecord(const std::string &name);
  absl::Status loadPayloads(const std::string &configRecord, const std::string &dir,
                            WeightStore &store);
  // loadPayloads' steps.
  absl::StatusOr<ts::PayloadConfig> readPayloadConfig(const std::string &configRecord);
  /// A weight torch.save pickled into its own record.
  absl::Status loadPickledPayload(const std::string &name, const std::string &recordName,
                                  const std::string &what, WeightStore &store);
  /// A weight whose record holds raw storage bytes, shared through `storages`
  /// (by record) with the weights naming the same record.
  absl::Status loadRawPayload(const std::string &name, const ts::PayloadMeta &meta,
                              const std::string &recordName, const std::string &what,
                              llvm::StringMap<at::Tensor> &storages, WeightStore &store);
  absl::Status loadLegacyStateDict(const std::string &record, WeightStore &store);
  absl::Status checkWeights(const Graph &g, const WeightStore &store);
  absl::Status loadExampleInputs(const std::string &record, ImportedModel &model);

  std::string path_;
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> zip_;
  uint64_t archiveBytes_ = 0;
};

absl::StatusOr<std::pair<at::DataPtr, size_t>> Pt2Reader::rawRecord(const std::string &name) {
  try {
    // The reader allocates what the record declares before reading it.
    if (absl::Status st = checkDeclaredRecordSize(name, zip_->getRecordSize(name), archiveBytes_);
        !st.ok())
      return error(std::string(st.message()));
    auto [data, size] = zip_->getRecord(name);
    return std::make_pair(std::move(data), size);
  } catch (const c10::Error &e) {
    return error(absl::StrCat("cannot read record '", name, "': ", e.what_without_backtrace()));
  }
}

absl::StatusOr<std::string> Pt2Reader::record(const std::string &name) {
  auto raw = rawRecord(name);
  if (!raw.ok())
    return raw.status();
  return std::string(static_cast<const char *>(raw->first.get()), raw->second);
}

/// What torch.save wrote into a record. LibTorch's reader trusts the zip
/// structure it is given, so the record is checked first (ZipCheck.h).
absl::StatusOr<c10::IValue> unpickle(const std::string &bytes) {
  if (absl::Status st = checkZipArchive(bytes); !st.ok())
    return absl::InvalidArgumentError(absl::StrCat("cannot unpickle: ", st.message()));
  try {
    return torch::jit::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
  } catch (...) {
    return absl::InvalidArgumentError(absl::StrCat("cannot unpickle: ", describeCurrentException()));
  }
}

absl::StatusOr<ts::PayloadConfig> Pt2Reader::readPayloadConfig(const std::string &configRecord) {
  auto text = record(configRecord);
  if (!text.ok())
    return text.status();
  ts::PayloadConfig config;
  try {
    nlohmann::json json = nlohmann::json::parse(*text);
    if (absl::Status st = serde::checkPayloadConfigJson(json); !st.ok())
      return error(absl::StrCat(configRecord, ": not a valid payload config: ", st.message()));
    json.get_to(config);
  } catch (const std::exception &e) {
    return error(absl::StrCat(configRecord, ": not a valid payload config: ", e.what()));
  }
  return config;
}

absl::Status Pt2Reader::loadPickledPayload(const std::string &name, const std::string &recordName,
                                           const std::string &what, WeightStore &store) {
  auto bytes = record(recordName);
  if (!bytes.ok())
    return bytes.status();
  auto v = unpickle(*bytes);
  if (!v.ok())
    return error(absl::StrCat(what, ": ", v.status().message()));
  if (!v->isTensor())
    return error(absl::StrCat(what, ": the pickled record is not a tensor"));
  store.set(name, v->toTensor());
  return absl::OkStatus();
}

/// A raw weight's layout, as its tensor_meta declares it.
struct PayloadLayout {
  c10::ScalarType dtype;
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
};

/// loadRawPayload's first step: the dtype, sizes, strides and storage offset
/// the tensor_meta of weight `what` declares, all concrete.
absl::StatusOr<PayloadLayout> payloadLayout(const ts::TensorMeta &tm, const std::string &what) {
  auto dtype = serde::toScalarType(tm.get_dtype());
  if (!dtype)
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": unknown dtype (serde number ", static_cast<int>(tm.get_dtype()), ")"));
  PayloadLayout out{*dtype, {}, {}, 0};
  bool concrete = true;
  auto concreteInt = [&](const ts::SymInt &s) {
    concrete &= s.tag() == ts::SymInt::Tag::AS_INT;
    return concrete ? s.get_as_int() : 0;
  };
  for (const auto &s : tm.get_sizes())
    out.sizes.push_back(concreteInt(s));
  for (const auto &s : tm.get_strides())
    out.strides.push_back(concreteInt(s));
  out.offset = concreteInt(tm.get_storage_offset());
  if (!concrete || out.sizes.size() != out.strides.size())
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": sizes, strides or storage offset are not concrete"));
  if (out.offset < 0)
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": storage offset ", out.offset, " is negative"));
  return out;
}

absl::Status Pt2Reader::loadRawPayload(const std::string &name, const ts::PayloadMeta &meta,
                                       const std::string &recordName, const std::string &what,
                                       llvm::StringMap<at::Tensor> &storages, WeightStore &store) {
  if (!meta.get_tensor_meta())
    return error(absl::StrCat(what, ": no tensor_meta for a raw weight"));
  auto layout = payloadLayout(*meta.get_tensor_meta(), what);
  if (!layout.ok())
    return error(std::string(layout.status().message()));
  const auto &[dtype, sizes, strides, offset] = *layout;

  auto &storage = storages[recordName];
  int64_t itemSize = static_cast<int64_t>(c10::elementSize(dtype));
  if (!storage.defined()) {
    auto bytes = rawRecord(recordName);
    if (!bytes.ok())
      return bytes.status();
    auto &[data, size] = *bytes;
    if (size % itemSize != 0)
      return error(absl::StrCat(what, ": the record has ", size, " bytes, not a whole number of ",
                                c10::toString(dtype), " elements"));
    // The tensor takes over the reader's buffer: no copy of the weights.
    c10::Storage bytesStorage(c10::Storage::use_byte_size_t(), size, std::move(data),
                              /*allocator=*/nullptr, /*resizable=*/false);
    storage = at::empty({0}, at::TensorOptions().dtype(dtype))
                  .set_(bytesStorage, 0, {static_cast<int64_t>(size) / itemSize}, {1});
  } else if (storage.scalar_type() != dtype) {
    storage = storage.view(dtype); // the same bytes seen as another dtype
  }
  // The tensor must lie inside the record: offset + span elements, each
  // product checked (a byte count that overflows would pass the bound).
  TensorType type(dtype, sizes, strides);
  if (absl::Status st = validateTensorType(type); !st.ok())
    return error(absl::StrCat(what, ": ", st.message()));
  int64_t needed = 0;
  if (type.numel() != 0 && (__builtin_mul_overflow(offset, itemSize, &needed) ||
                            __builtin_add_overflow(needed, type.storageBytes(), &needed)))
    return error(absl::StrCat(what, ": storage offset ", offset,
                              " puts the tensor past what int64 counts"));
  int64_t have = storage.numel() * itemSize;
  if (needed > have)
    return error(absl::StrCat(what, ": the record has ", have, " bytes, but a ",
                              c10::toString(dtype), " tensor of sizes [",
                              absl::StrJoin(sizes, ", "), "] and strides [",
                              absl::StrJoin(strides, ", "), "] at offset ", offset, " needs ",
                              needed));
  store.set(name, storage.as_strided(sizes, strides, offset));
  return absl::OkStatus();
}

absl::Status Pt2Reader::loadPayloads(const std::string &configRecord, const std::string &dir,
                                     WeightStore &store) {
  if (!zip_->hasRecord(configRecord))
    return absl::OkStatus();
  auto config = readPayloadConfig(configRecord);
  if (!config.ok())
    return config.status();
  // Raw records hold whole storages; tensors naming the same record share it.
  llvm::StringMap<at::Tensor> storages;
  std::vector<std::string> names;
  for (const auto &[name, meta] : config->get_config())
    names.push_back(name);
  std::sort(names.begin(), names.end()); // deterministic error order
  for (const std::string &name : names) {
    const ts::PayloadMeta &meta = config->get_config().at(name);
    std::string recordName = dir + meta.get_path_name();
    std::string what = absl::StrCat("weight '", name, "' (", recordName, ")");
    if (!zip_->hasRecord(recordName))
      return error(absl::StrCat(what, ": the record is missing"));
    absl::Status st = meta.get_use_pickle()
                          ? loadPickledPayload(name, recordName, what, store)
                          : loadRawPayload(name, meta, recordName, what, storages, store);
    if (!st.ok())
      return st;
  }
  return absl::OkStatus();
}

absl::Status Pt2Reader::loadLegacyStateDict(const std::string &recordName, WeightStore &store) {
  auto bytes = record(recordName);
  if (!bytes.ok())
    return bytes.status();
  auto v = unpickle(*bytes);
  if (!v.ok())
    return error(absl::StrCat(recordName, ": ", v.status().message()));
  if (!v->isGenericDict())
    return error(absl::StrCat(recordName, ": the pickled state dict is not a dict"));
  for (const auto &entry : v->toGenericDict()) {
    if (!entry.key().isString() || !entry.value().isTensor())
      return error(absl::StrCat(recordName, ": the state dict holds a non-tensor entry"));
    store.set(entry.key().toStringRef(), entry.value().toTensor());
  }
  return absl::OkStatus();
}

namespace {
void flattenTensors(const c10::IValue &v, std::vector<at::Tensor> &out) {
  if (v.isTensor()) {
    out.push_back(v.toTensor());
  } else if (v.isTuple()) {
    for (const c10::IValue &e : v.toTupleRef().elements())
      flattenTensors(e, out);
  } else if (v.isList()) {
    for (const c10::IValue &e : v.toListRef())
      flattenTensors(e, out);
  } else if (v.isGenericDict()) {
    for (const auto &entry : v.toGenericDict())
      flattenTensors(entry.value(), out);
  }
}
} // namespace

/// The archive's example inputs (torch.save of (args, kwargs)), flattened in
/// order; kept only when they fit the graph's user inputs.
absl::Status Pt2Reader::loadExampleInputs(const std::string &recordName, ImportedModel &model) {
  if (!zip_->hasRecord(recordName))
    return absl::OkStatus();
  auto bytes = record(recordName);
  if (!bytes.ok())
    return bytes.status();
  std::vector<at::Tensor> inputs;
  auto v = unpickle(*bytes);
  if (!v.ok())
    return error(absl::StrCat(recordName, ": ", v.status().message()));
  flattenTensors(*v, inputs);
  size_t next = 0;
  for (const GraphInput &in : model.graph->inputs()) {
    if (in.role != InputRole::UserInput)
      continue;
    if (next >= inputs.size() || inputs[next].scalar_type() != in.value->tensorType().dtype ||
        !llvm::equal(inputs[next].sizes(), in.value->tensorType().sizes))
      return absl::OkStatus(); // not usable as they are: leave them out
    ++next;
  }
  if (next == inputs.size())
    model.exampleInputs = std::move(inputs);
  return absl::OkStatus();
}

/// Every parameter, buffer and constant input has a weight of its type.
absl::Status Pt2Reader::checkWeights(const Graph &g, const WeightStore &store) {
  return checkWeightTypes(g, store, /*requireAll=*/true, path_);
}

absl::Status checkWeightTypes(const Graph &g, const WeightStore &store, bool requireAll,
                              const std::string &where) {
  auto error = [&](const std::string &message) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", message));
  };
  for (const GraphInput &in : g.inputs()) {
    if (in.role == InputRole::UserInput)
      continue;
    const at::Tensor *t = store.lookup(in.target);
    if (!t && !requireAll)
      continue;
    if (!t)
      return error(absl::StrCat("no weight for ", inputRoleName(in.role).str(), " '", in.target,
                                "' (graph input %", in.value->name().str(), ")"));
    const TensorType &want = in.value->tensorType();
    if (t->scalar_type() != want.dtype || !llvm::equal(t->sizes(), want.sizes))
      return error(absl::StrCat("weight '", in.target, "' is ", c10::toString(t->scalar_type()),
                                " [", absl::StrJoin(t->sizes(), ", "), "] but the graph expects ",
                                c10::toString(want.dtype), " [", absl::StrJoin(want.sizes, ", "),
                                "]"));
  }
  return absl::OkStatus();
}

/// Inputs whose weights share one storage (tied weights: the archive stores
/// it once) are tied in the graph to the first of them, so that the sharing
/// is visible to analyses. Only views of the same bytes are tied (same offset
/// and span); a partial overlap is left untied.
void tieSharedWeights(Graph &g, const WeightStore &store) {
  std::map<const c10::StorageImpl *, const GraphInput *> first;
  for (unsigned i = 0; i < g.inputs().size(); ++i) {
    const GraphInput &in = g.inputs()[i];
    if (in.role == InputRole::UserInput || !in.value->isTensor())
      continue;
    const at::Tensor *t = store.lookup(in.target);
    if (!t || !t->defined() || !t->has_storage())
      continue;
    auto [it, inserted] = first.emplace(t->storage().unsafeGetStorageImpl(), &in);
    if (inserted)
      continue;
    const at::Tensor *owner = store.lookup(it->second->target);
    if (owner->storage_offset() == t->storage_offset() &&
        it->second->value->tensorType().storageBytes() == in.value->tensorType().storageBytes())
      (void)g.tieInput(i, it->second->value);
  }
}

absl::StatusOr<ImportedModel> Pt2Reader::read() {
  if (!llvm::sys::fs::exists(path_))
    return absl::NotFoundError(absl::StrCat(path_, ": no such file"));
  if (llvm::sys::fs::is_directory(path_))
    return error("is a directory, not a .pt2 archive");
  if (std::error_code ec = llvm::sys::fs::file_size(path_, archiveBytes_))
    return error(absl::StrCat("cannot read file: ", ec.message()));
  // The reader checks the zip as it opens it and as it lists the records (a
  // record outside the archive's one top folder throws only then).
  std::vector<std::string> records;
  try {
    zip_ = std::make_unique<caffe2::serialize::PyTorchStreamReader>(path_);
    records = zip_->getAllRecords();
  } catch (...) {
    return error(absl::StrCat("not a readable .pt2 archive (truncated or corrupt zip?): ",
                              describeCurrentException()));
  }

  // The model JSON: models/<name>.json; "model" is what torch.export.save writes.
  std::vector<std::string> models;
  for (const std::string &r : records) {
    llvm::StringRef s(r);
    if (s.startswith("models/") && s.endswith(".json") && !s.drop_front(7).contains('/'))
      models.push_back(r);
  }
  if (models.empty())
    return error("no model JSON (models/<name>.json) in the archive");
  std::string modelRecord = llvm::is_contained(models, "models/model.json") ? "models/model.json"
                                                                           : models.front();
  if (models.size() > 1 && modelRecord != "models/model.json")
    return error(absl::StrCat("the archive holds several models (", absl::StrJoin(models, ", "),
                              "); graph-opt reads one"));
  std::string modelName = llvm::sys::path::stem(modelRecord).str();

  auto text = record(modelRecord);
  if (!text.ok())
    return text.status();
  ImportedModel model;
  std::string graphName = llvm::sys::path::stem(path_).str();
  for (char &c : graphName)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.')
      c = '_';
  auto graph = graphFromJson(*text, absl::StrCat(path_, ": ", modelRecord), graphName);
  if (!graph.ok())
    return graph.status();
  model.graph = std::move(*graph);

  std::string legacy = absl::StrCat("data/weights/", modelName, ".pt");
  absl::Status st = zip_->hasRecord(legacy)
                        ? loadLegacyStateDict(legacy, model.weights)
                        : loadPayloads(absl::StrCat("data/weights/", modelName, "_weights_config.json"),
                                       "data/weights/", model.weights);
  if (!st.ok())
    return st;
  std::string legacyConstants = absl::StrCat("data/constants/", modelName, ".pt");
  st = zip_->hasRecord(legacyConstants)
           ? loadLegacyStateDict(legacyConstants, model.weights)
           : loadPayloads(absl::StrCat("data/constants/", modelName, "_constants_config.json"),
                          "data/constants/", model.weights);
  if (!st.ok())
    return st;
  if (st = checkWeights(*model.graph, model.weights); !st.ok())
    return st;
  tieSharedWeights(*model.graph, model.weights);
  if (st = loadExampleInputs(absl::StrCat("data/sample_inputs/", modelName, ".pt"), model); !st.ok())
    return st;
  return model;
}

} // namespace

absl::StatusOr<ImportedModel> importProgramJson(llvm::StringRef json, WeightStore weights,
                                                llvm::StringRef graphName, llvm::StringRef where,
                                                TypeCheckKernels kernels) {
  try {
    ImportedModel model;
    auto graph = graphFromJson(json.str(), where.str(), graphName.str());
    if (!graph.ok())
      return graph.status();
    model.graph = std::move(*graph);
    model.weights = std::move(weights);
    if (absl::Status st = checkWeightTypes(*model.graph, model.weights, /*requireAll=*/false,
                                           where.str());
        !st.ok())
      return st;
    tieSharedWeights(*model.graph, model.weights);
    model.remarks = checkDeclaredTypes(*model.graph, kernels).remarks;
    return model;
  } catch (...) {
    return absl::InvalidArgumentError(absl::StrCat(
        where.str(), ": not a readable torch.export program: ", describeCurrentException()));
  }
}

absl::StatusOr<ImportedModel> importPt2(llvm::StringRef path) {
  // The reader turns what it expects into statuses; this boundary catches the
  // rest (nlohmann's type errors, a variant the serde types leave empty), so a
  // malformed archive is an error naming the file, never an abort.
  try {
    return Pt2Reader(path).read();
  } catch (...) {
    return absl::InvalidArgumentError(absl::StrCat(
        path.str(), ": not a readable torch.export archive: ", describeCurrentException()));
  }
}

} // namespace graphopt
