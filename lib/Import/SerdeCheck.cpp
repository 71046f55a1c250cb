//===- SerdeCheck.cpp -----------------------------------------------------===//
#include "SerdeCheck.h"

#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include <initializer_list>
#include <string>
#include <vector>

namespace graphopt::serde {

namespace {

using Json = nlohmann::json;
using Keys = std::initializer_list<const char *>;

// The alternatives of the unions read below, as the generated from_json
// functions test for them.
const Keys kSymInt = {"as_expr", "as_int"};
const Keys kSymFloat = {"as_expr", "as_float"};
const Keys kSymBool = {"as_expr", "as_bool"};
const Keys kSymIntArgument = {"as_name", "as_int"};
const Keys kSymFloatArgument = {"as_name", "as_float"};
const Keys kSymBoolArgument = {"as_name", "as_bool"};
const Keys kOptionalTensorArgument = {"as_tensor", "as_none"};
const Keys kArgument = {
    "as_none",      "as_tensor",        "as_tensors",      "as_int",          "as_ints",
    "as_float",     "as_floats",        "as_string",       "as_strings",      "as_sym_int",
    "as_sym_ints",  "as_scalar_type",   "as_memory_format", "as_layout",      "as_device",
    "as_bool",      "as_bools",         "as_sym_bool",     "as_sym_bools",    "as_graph",
    "as_optional_tensors", "as_custom_obj", "as_operator", "as_sym_float",    "as_sym_floats",
    "as_optional_tensor", "as_complex", "as_nested_tensors", "as_int_lists",
    "as_string_to_argument"};
const Keys kInputSpec = {"user_input", "parameter",    "buffer",        "tensor_constant",
                         "custom_obj", "token",        "constant_input"};
const Keys kOutputSpec = {"user_output",       "loss_output",           "buffer_mutation",
                          "gradient_to_parameter", "gradient_to_user_input",
                          "user_input_mutation", "token",               "parameter_mutation"};

/// How deeply a document may nest. The serde types read nested graphs
/// (as_graph) and argument maps recursively, as does the check below, so a
/// document nested a hundred thousand levels deep would overflow the stack.
/// The deepest document of the zoo and the benchmark exports nests 17 levels.
constexpr int kMaxJsonDepth = 1000;

/// What is wrong with the numbers or nesting of `j`, or "": a float outside
/// an F64 field (as_float, as_floats, real, imag; `floatAllowed` says `j` is
/// one), or nesting deeper than kMaxJsonDepth. `where` gets its path,
/// innermost part first.
std::string numberOrDepthProblem(const Json &j, bool floatAllowed, int depth,
                                 std::vector<std::string> &where) {
  if (depth > kMaxJsonDepth)
    return absl::StrCat("nested more than ", kMaxJsonDepth, " levels deep");
  if (j.is_number_float())
    return floatAllowed ? "" : absl::StrCat("expected an integer, found ", j.dump());
  if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) { // as_floats: a list of F64
      std::string why = numberOrDepthProblem(j[i], floatAllowed, depth + 1, where);
      if (!why.empty()) {
        where.push_back(absl::StrCat("[", i, "]"));
        return why;
      }
    }
  } else if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string &k = it.key();
      bool f64 = k == "as_float" || k == "as_floats" || k == "real" || k == "imag";
      std::string why = numberOrDepthProblem(it.value(), f64, depth + 1, where);
      if (!why.empty()) {
        where.push_back("." + k);
        return why;
      }
    }
  }
  return "";
}

class Checker {
public:
  absl::Status status() const { return status_; }

  /// `j` (at `path`) is a union holding one of `keys`; returns that key, or
  /// nullptr (and records the error).
  const char *unionAt(const Json &j, const std::string &path, Keys keys) {
    if (j.is_object())
      for (const char *k : keys)
        if (j.contains(k))
          return k;
    fail(absl::StrCat(path, ": expected an object with one of ", absl::StrJoin(keys, ", "),
                      ", found ", j.dump().substr(0, 60)));
    return nullptr;
  }
  void requireKeys(const Json &j, const std::string &path, Keys keys) {
    if (!j.is_object()) {
      fail(absl::StrCat(path, ": expected an object"));
      return;
    }
    for (const char *k : keys)
      if (!j.contains(k))
        fail(absl::StrCat(path, ": no '", k, "'"));
  }
  /// Each element of the array (or each value of the object) `j[key]`.
  template <typename F> void each(const Json &j, const char *key, const std::string &path, F f) {
    if (!j.is_object() || !j.contains(key))
      return; // absent fields take their defaults; the importer checks what it needs
    const Json &c = j.at(key);
    std::string at = absl::StrCat(path, ".", key);
    if (c.is_array()) {
      for (size_t i = 0; i < c.size(); ++i)
        f(c[i], absl::StrCat(at, "[", i, "]"));
    } else if (c.is_object()) {
      for (auto it = c.begin(); it != c.end(); ++it)
        f(it.value(), absl::StrCat(at, ".", it.key()));
    }
  }

  void tensorMeta(const Json &m, const std::string &path) {
    requireKeys(m, path, {"dtype", "requires_grad", "layout"});
    each(m, "sizes", path, [&](const Json &s, const std::string &p) { unionAt(s, p, kSymInt); });
    each(m, "strides", path, [&](const Json &s, const std::string &p) { unionAt(s, p, kSymInt); });
    if (m.is_object() && m.contains("storage_offset"))
      unionAt(m.at("storage_offset"), path + ".storage_offset", kSymInt);
  }

  void argument(const Json &a, const std::string &path) {
    const char *k = unionAt(a, path, kArgument);
    if (!k)
      return;
    std::string kind = k;
    const Json &v = a.at(kind);
    std::string at = absl::StrCat(path, ".", kind);
    auto list = [&](Keys keys) {
      if (v.is_array())
        for (size_t i = 0; i < v.size(); ++i)
          unionAt(v[i], absl::StrCat(at, "[", i, "]"), keys);
    };
    if (kind == "as_sym_int")
      unionAt(v, at, kSymIntArgument);
    else if (kind == "as_sym_ints")
      list(kSymIntArgument);
    else if (kind == "as_sym_bool")
      unionAt(v, at, kSymBoolArgument);
    else if (kind == "as_sym_bools")
      list(kSymBoolArgument);
    else if (kind == "as_sym_float")
      unionAt(v, at, kSymFloatArgument);
    else if (kind == "as_sym_floats")
      list(kSymFloatArgument);
    else if (kind == "as_optional_tensor")
      unionAt(v, at, kOptionalTensorArgument);
    else if (kind == "as_optional_tensors")
      list(kOptionalTensorArgument);
    else if (kind == "as_graph" && v.is_object() && v.contains("graph"))
      graph(v.at("graph"), at + ".graph");
  }

  void graph(const Json &g, const std::string &path) {
    each(g, "tensor_values", path, [&](const Json &m, const std::string &p) { tensorMeta(m, p); });
    each(g, "sym_int_values", path, [&](const Json &s, const std::string &p) { unionAt(s, p, kSymInt); });
    each(g, "sym_bool_values", path, [&](const Json &s, const std::string &p) { unionAt(s, p, kSymBool); });
    each(g, "sym_float_values", path,
         [&](const Json &s, const std::string &p) { unionAt(s, p, kSymFloat); });
    each(g, "nodes", path, [&](const Json &n, const std::string &p) {
      each(n, "inputs", p, [&](const Json &in, const std::string &q) {
        if (in.is_object() && in.contains("arg"))
          argument(in.at("arg"), q + ".arg");
        else
          fail(absl::StrCat(q, ": expected an object with 'arg'"));
      });
      each(n, "outputs", p, [&](const Json &o, const std::string &q) { argument(o, q); });
    });
    each(g, "outputs", path, [&](const Json &o, const std::string &p) { argument(o, p); });
  }

  void signature(const Json &s, const std::string &path) {
    each(s, "input_specs", path, [&](const Json &spec, const std::string &p) {
      const char *k = unionAt(spec, p, kInputSpec);
      if (k && std::string(k) == "buffer")
        requireKeys(spec.at(k), p + ".buffer", {"persistent"});
    });
    each(s, "output_specs", path,
         [&](const Json &spec, const std::string &p) { unionAt(spec, p, kOutputSpec); });
  }

  /// Every number in `j` is an integer, except in the fields LibTorch reads
  /// as an F64 (the schema's only floating-point type): nlohmann converts a
  /// float to an integer field with a plain cast, which is undefined behaviour
  /// when the value does not fit (6.1e89 as a size's as_int). And `j` nests
  /// no deeper than kMaxJsonDepth. Run first: the other checks recurse too.
  void numbersAndDepth(const Json &j) {
    std::vector<std::string> where; // the path, built only when something is wrong
    std::string why = numberOrDepthProblem(j, false, 0, where);
    if (why.empty())
      return;
    std::string path = absl::StrJoin(where.rbegin(), where.rend(), "");
    if (!path.empty() && path[0] == '.')
      path.erase(0, 1);
    if (path.size() > 160) // too deep a path says nothing more past its start
      path = path.substr(0, 160) + "...";
    fail(absl::StrCat(path.empty() ? "the document" : path, ": ", why));
  }

  void fail(std::string message) {
    if (status_.ok())
      status_ = absl::InvalidArgumentError(std::move(message));
  }

private:
  absl::Status status_;
};

} // namespace

absl::Status checkExportedProgramJson(const nlohmann::json &program) {
  Checker c;
  c.numbersAndDepth(program);
  if (!c.status().ok())
    return c.status();
  if (program.is_object() && program.contains("graph_module")) {
    const Json &module = program.at("graph_module");
    if (module.is_object() && module.contains("graph"))
      c.graph(module.at("graph"), "graph_module.graph");
    if (module.is_object() && module.contains("signature"))
      c.signature(module.at("signature"), "graph_module.signature");
  }
  return c.status();
}

absl::Status checkPayloadConfigJson(const nlohmann::json &config) {
  Checker c;
  c.numbersAndDepth(config);
  if (!c.status().ok())
    return c.status();
  c.each(config, "config", "", [&](const Json &entry, const std::string &p) {
    std::string path = p.substr(1); // "config.<name>"
    c.requireKeys(entry, path, {"path_name", "is_param", "use_pickle"});
    if (entry.is_object() && entry.contains("tensor_meta") && !entry.at("tensor_meta").is_null())
      c.tensorMeta(entry.at("tensor_meta"), path + ".tensor_meta");
  });
  return c.status();
}

} // namespace graphopt::serde
