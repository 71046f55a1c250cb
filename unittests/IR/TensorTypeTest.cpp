//===- TensorTypeTest.cpp - Types are validated once, counted without overflow ===//
#include "graphopt/IR/TensorType.h"

#include <gtest/gtest.h>

#include <limits>

using namespace graphopt;

namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

TensorType f32(std::vector<int64_t> sizes, std::vector<int64_t> strides) {
  return TensorType(c10::kFloat, sizes, strides);
}

std::string problem(const TensorType &t) {
  absl::Status st = validateTensorType(t);
  return st.ok() ? "" : std::string(st.message());
}

} // namespace

TEST(TensorTypeTest, ValidTypesPassIncludingEmptyBroadcastAndOverlapping) {
  EXPECT_EQ(problem(TensorType::contiguous(c10::kFloat, {2, 3})), "");
  EXPECT_EQ(problem(f32({4, 8}, {0, 0})), "");  // broadcast
  EXPECT_EQ(problem(f32({4, 8}, {1, 1})), "");  // overlapping
  EXPECT_EQ(problem(f32({0, 3}, {3, 1})), "");  // empty
  EXPECT_EQ(problem(f32({}, {})), "");          // 0-d
  // Empty tensors may carry huge strides: they span nothing.
  EXPECT_EQ(problem(f32({0, 5}, {kMax, kMax})), "");
  EXPECT_EQ(problem(TensorType()), ""); // unknown: the verifier reports it
}

TEST(TensorTypeTest, NegativeSizesAndStridesAreNamedByDimension) {
  EXPECT_EQ(problem(f32({2, -3}, {3, 1})), "size -3 of dimension 1 is negative");
  EXPECT_EQ(problem(f32({std::numeric_limits<int64_t>::min()}, {1})),
            "size -9223372036854775808 of dimension 0 is negative");
  EXPECT_EQ(problem(f32({2, 3}, {-3, 1})),
            "stride -3 of dimension 0 is negative (graph-opt takes non-negative strides only)");
  EXPECT_EQ(problem(f32({2, 3}, {1})), "2 sizes but 1 strides");
}

TEST(TensorTypeTest, OverflowingCountsAreRefused) {
  EXPECT_EQ(problem(TensorType::contiguous(c10::kFloat, {int64_t(1) << 62, 4})),
            "its 2 sizes have more elements than int64 counts");
  EXPECT_EQ(problem(f32({3, 2}, {int64_t(1) << 62, 1})),
            "its strides span more elements than int64 counts");
  // 2^61 f32 elements fit in int64; their 2^63 bytes do not.
  EXPECT_EQ(problem(f32({int64_t(1) << 61}, {1})), "its storage has more bytes than int64 counts");
  EXPECT_EQ(problem(TensorType(c10::kByte, {int64_t(1) << 61}, {1})), "");
}

TEST(TensorTypeTest, CountsOfInvalidTypesSaturateInsteadOfOverflowing) {
  // What the parser refuses may still be asked for its size on the way there;
  // the answers saturate (and UBSan sees no signed overflow).
  TensorType t = TensorType::contiguous(c10::kFloat, {4, int64_t(1) << 62, 4});
  EXPECT_EQ(t.strides[0], kMax);
  EXPECT_EQ(t.numel(), kMax);
  EXPECT_EQ(t.storageBytes(), kMax);
  EXPECT_EQ(f32({3, 2}, {int64_t(1) << 62, 1}).storageBytes(), kMax);
}
