//===- TensorType.cpp -----------------------------------------------------===//
#include "graphopt/IR/TensorType.h"

#include <absl/strings/str_cat.h>
#include <llvm/ADT/STLExtras.h>

#include <limits>

namespace graphopt {

TensorType::TensorType(c10::ScalarType dtype, llvm::ArrayRef<int64_t> sizes,
                       llvm::ArrayRef<int64_t> strides, c10::Device device)
    : dtype(dtype), sizes(sizes.begin(), sizes.end()), strides(strides.begin(), strides.end()),
      device(device) {}

TensorType TensorType::contiguous(c10::ScalarType dtype, llvm::ArrayRef<int64_t> sizes,
                                  c10::Device device) {
  return TensorType(dtype, sizes, contiguousStrides(sizes), device);
}

namespace {
constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();

/// a * b, or INT64_MAX where it overflows: sizes are validated where types
/// enter (validateTensorType), and until then nothing may be undefined.
int64_t saturatingMul(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? kMaxInt64 : r;
}
int64_t saturatingAdd(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_add_overflow(a, b, &r) ? kMaxInt64 : r;
}
} // namespace

llvm::SmallVector<int64_t, 4> TensorType::contiguousStrides(llvm::ArrayRef<int64_t> sizes) {
  llvm::SmallVector<int64_t, 4> strides(sizes.size());
  int64_t running = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = running;
    running = saturatingMul(running, std::max<int64_t>(sizes[i], 1));
  }
  return strides;
}

bool TensorType::isContiguous() const {
  return strides.size() == sizes.size() && llvm::equal(strides, contiguousStrides(sizes));
}

int64_t TensorType::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes)
    n = saturatingMul(n, s);
  return n;
}

int64_t TensorType::storageBytes() const {
  if (!isKnown() || numel() == 0)
    return 0;
  int64_t span = 1;
  for (size_t i = 0; i < sizes.size() && i < strides.size(); ++i)
    span = saturatingAdd(span, saturatingMul(sizes[i] - 1, strides[i]));
  return saturatingMul(span, static_cast<int64_t>(c10::elementSize(dtype)));
}

std::pair<int64_t, int64_t> TensorType::storageByteRange() const {
  int64_t first = saturatingMul(storageOffset, static_cast<int64_t>(c10::elementSize(dtype)));
  return {first, saturatingAdd(first, storageBytes())};
}

absl::Status validateTensorType(const TensorType &t) {
  if (!t.isKnown())
    return absl::OkStatus();
  if (t.strides.size() != t.sizes.size())
    return absl::InvalidArgumentError(
        absl::StrCat(t.sizes.size(), " sizes but ", t.strides.size(), " strides"));
  int64_t elements = 1, span = 1;
  bool empty = false;
  for (size_t d = 0; d < t.sizes.size(); ++d) {
    if (t.sizes[d] < 0)
      return absl::InvalidArgumentError(
          absl::StrCat("size ", t.sizes[d], " of dimension ", d, " is negative"));
    if (t.strides[d] < 0)
      return absl::InvalidArgumentError(
          absl::StrCat("stride ", t.strides[d], " of dimension ", d,
                       " is negative (graph-opt takes non-negative strides only)"));
    empty |= t.sizes[d] == 0;
    if (__builtin_mul_overflow(elements, t.sizes[d], &elements))
      return absl::InvalidArgumentError(
          absl::StrCat("its ", t.sizes.size(), " sizes have more elements than int64 counts"));
  }
  if (t.storageOffset < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("storage offset ", t.storageOffset, " is negative"));
  if (empty)
    return absl::OkStatus();
  // The offset, then the elements the strides reach.
  if (__builtin_add_overflow(t.storageOffset, int64_t(1), &span))
    return absl::InvalidArgumentError("its storage offset is past what int64 counts");
  int64_t extent, bytes;
  for (size_t d = 0; d < t.sizes.size(); ++d)
    if (__builtin_mul_overflow(t.sizes[d] - 1, t.strides[d], &extent) ||
        __builtin_add_overflow(span, extent, &span))
      return absl::InvalidArgumentError("its strides span more elements than int64 counts");
  if (__builtin_mul_overflow(span, static_cast<int64_t>(c10::elementSize(t.dtype)), &bytes))
    return absl::InvalidArgumentError("its storage has more bytes than int64 counts");
  return absl::OkStatus();
}

bool TensorType::operator==(const TensorType &o) const {
  return dtype == o.dtype && llvm::equal(sizes, o.sizes) && llvm::equal(strides, o.strides) &&
         device == o.device && storageOffset == o.storageOffset;
}

namespace {
struct DtypeEntry {
  c10::ScalarType dtype;
  const char *name;
};
// Short names in the style of MLIR/numpy; anything else prints as c10's name.
const DtypeEntry kDtypes[] = {
    {c10::ScalarType::Float, "f32"},          {c10::ScalarType::Double, "f64"},
    {c10::ScalarType::Half, "f16"},           {c10::ScalarType::BFloat16, "bf16"},
    {c10::ScalarType::Float8_e4m3fn, "f8e4m3fn"}, {c10::ScalarType::Float8_e5m2, "f8e5m2"},
    {c10::ScalarType::Float8_e4m3fnuz, "f8e4m3fnuz"},
    {c10::ScalarType::Float8_e5m2fnuz, "f8e5m2fnuz"},
    {c10::ScalarType::Char, "i8"},            {c10::ScalarType::Short, "i16"},
    {c10::ScalarType::Int, "i32"},            {c10::ScalarType::Long, "i64"},
    {c10::ScalarType::Byte, "u8"},            {c10::ScalarType::UInt16, "u16"},
    {c10::ScalarType::UInt32, "u32"},         {c10::ScalarType::UInt64, "u64"},
    {c10::ScalarType::Bool, "bool"},          {c10::ScalarType::ComplexHalf, "c32"},
    {c10::ScalarType::ComplexFloat, "c64"},   {c10::ScalarType::ComplexDouble, "c128"},
};
} // namespace

llvm::StringRef dtypeName(c10::ScalarType dtype) {
  for (const auto &e : kDtypes)
    if (e.dtype == dtype)
      return e.name;
  return c10::toString(dtype);
}

std::optional<c10::ScalarType> parseDtypeName(llvm::StringRef name) {
  for (const auto &e : kDtypes)
    if (name == e.name)
      return e.dtype;
#define GRAPHOPT_MATCH_C10_NAME(_, n)                                                              \
  if (name == #n)                                                                                  \
    return c10::ScalarType::n;
  AT_FORALL_SCALAR_TYPES_WITH_COMPLEX_AND_QINTS(GRAPHOPT_MATCH_C10_NAME)
#undef GRAPHOPT_MATCH_C10_NAME
  return std::nullopt;
}

namespace {
const std::pair<c10::Layout, const char *> kLayouts[] = {
    {c10::kStrided, "strided"},         {c10::kSparse, "sparse_coo"},
    {c10::kSparseCsr, "sparse_csr"},    {c10::kSparseCsc, "sparse_csc"},
    {c10::kSparseBsr, "sparse_bsr"},    {c10::kSparseBsc, "sparse_bsc"},
    {c10::kMkldnn, "mkldnn"},           {c10::Layout::Jagged, "jagged"},
};
const std::pair<c10::MemoryFormat, const char *> kMemoryFormats[] = {
    {c10::MemoryFormat::Contiguous, "contiguous_format"},
    {c10::MemoryFormat::Preserve, "preserve_format"},
    {c10::MemoryFormat::ChannelsLast, "channels_last"},
    {c10::MemoryFormat::ChannelsLast3d, "channels_last_3d"},
};
} // namespace

llvm::StringRef layoutName(c10::Layout layout) {
  for (const auto &[l, n] : kLayouts)
    if (l == layout)
      return n;
  return "strided";
}

std::optional<c10::Layout> parseLayoutName(llvm::StringRef name) {
  for (const auto &[l, n] : kLayouts)
    if (name == n)
      return l;
  return std::nullopt;
}

llvm::StringRef memoryFormatName(c10::MemoryFormat format) {
  for (const auto &[f, n] : kMemoryFormats)
    if (f == format)
      return n;
  return "contiguous_format";
}

std::optional<c10::MemoryFormat> parseMemoryFormatName(llvm::StringRef name) {
  for (const auto &[f, n] : kMemoryFormats)
    if (name == n)
      return f;
  return std::nullopt;
}

} // namespace graphopt
