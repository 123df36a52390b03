// The element-wise kernels every reduction is built from: the two- and
// three-operand forms against each other, the scaled form against a
// reduction then a scale, the half-precision conversions, and the copy
// that bypasses the cache, at every alignment.
#include "collectives/reduce.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "test_data.h"

namespace horovod {
namespace {

TEST(Reduce, StreamCopyEveryAlignmentAndLength) {
  std::vector<char> src(4096 + 64), dst(4096 + 64);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(i * 7);
  for (size_t d_off : {0, 1, 8, 15, 16, 33})
    for (size_t s_off : {0, 3, 16})
      for (size_t len : {0, 1, 15, 16, 63, 64, 65, 200, 4000}) {
        std::fill(dst.begin(), dst.end(), char(0x5a));
        StreamCopy(dst.data() + d_off, src.data() + s_off, len);
        for (size_t i = 0; i < dst.size(); ++i) {
          const bool inside = i >= d_off && i < d_off + len;
          const char want = inside ? src[s_off + i - d_off] : char(0x5a);
          ASSERT_EQ(dst[i], want) << "byte " << i << " d_off=" << d_off
                                  << " s_off=" << s_off << " len=" << len;
        }
      }
}

TEST(Reduce, OfTwoOperandsIntoAThird) {
  const float a[4] = {1.5f, -2.f, 3.f, 0.25f}, b[4] = {2.f, 5.f, -1.f, 4.f};
  float d[4];
  ReduceOf(d, a, b, 4, DataType::kFloat32, ReduceOp::kSum);
  EXPECT_EQ(std::vector<float>(d, d + 4),
            (std::vector<float>{3.5f, 3.f, 2.f, 4.25f}));
  ReduceOf(d, a, b, 4, DataType::kFloat32, ReduceOp::kMin);
  EXPECT_EQ(std::vector<float>(d, d + 4),
            (std::vector<float>{1.5f, -2.f, -1.f, 0.25f}));
  ReduceOf(d, a, b, 4, DataType::kFloat32, ReduceOp::kProduct);
  EXPECT_EQ(std::vector<float>(d, d + 4),
            (std::vector<float>{3.f, -10.f, -3.f, 1.f}));
  const int8_t x[2] = {100, -100}, y[2] = {100, -100};
  int8_t z[2];
  ReduceOf(z, x, y, 2, DataType::kInt8, ReduceOp::kSum);  // wraps
  EXPECT_EQ(z[0], static_cast<int8_t>(-56));
  EXPECT_EQ(z[1], static_cast<int8_t>(56));
  const uint16_t h[2] = {FloatToHalf(1.f), FloatToHalf(-3.f)},
                 k[2] = {FloatToHalf(2.f), FloatToHalf(-4.f)};
  uint16_t m[2];
  ReduceOf(m, h, k, 2, DataType::kFloat16, ReduceOp::kMax);
  EXPECT_EQ(m[0], k[0]);
  EXPECT_EQ(m[1], h[1]);
  const uint8_t p[3] = {1, 0, 1}, q[3] = {1, 1, 0};
  uint8_t r[3];
  ReduceOf(r, p, q, 3, DataType::kBool, ReduceOp::kProduct);
  EXPECT_EQ(std::vector<uint8_t>(r, r + 3), (std::vector<uint8_t>{1, 0, 0}));
  ReduceOf(r, p, q, 3, DataType::kBool, ReduceOp::kSum);
  EXPECT_EQ(std::vector<uint8_t>(r, r + 3), (std::vector<uint8_t>{1, 1, 1}));
}

// Into a third buffer or into the first operand itself: the same result,
// for every dtype and op, at lengths around the vector width.
TEST(Reduce, OfMatchesInPlaceForEveryDtypeAndOp) {
  for (DataType t : kAllTypes)
    for (ReduceOp op : kOps)
      for (int64_t count : {1, 7, 33, 1000}) {
        const std::vector<char> a = Fill(t, count, 1, op == ReduceOp::kProduct);
        const std::vector<char> b = Fill(t, count, 2, op == ReduceOp::kProduct);
        std::vector<char> in_place = a, third(a.size(), char(0x5a));
        ReduceOf(in_place.data(), in_place.data(), b.data(), count, t, op);
        ReduceOf(third.data(), a.data(), b.data(), count, t, op);
        EXPECT_EQ(third, in_place)
            << DataTypeName(t) << " " << ReduceOpName(op) << " " << count;
      }
}

// The one-pass finish of an allreduce block (reduce, scale, publish) gives
// bit for bit what the three steps apart give, in place and into a third
// buffer, and the published copy equals the result.
TEST(Reduce, OfScaledMatchesReduceThenScale) {
  for (DataType t : kAllTypes)
    for (ReduceOp op : kOps)
      for (double factor : {1.0, 0.5, 1.0 / 3})
        for (int64_t count : {1, 7, 33, 1000}) {
          const std::vector<char> a =
              Fill(t, count, 1, op == ReduceOp::kProduct);
          const std::vector<char> b =
              Fill(t, count, 2, op == ReduceOp::kProduct);
          std::vector<char> expected(a.size());
          ReduceOf(expected.data(), a.data(), b.data(), count, t, op);
          ScaleBuffer(expected.data(), count, t, factor);
          std::vector<char> in_place = a, third(a.size(), char(0x5a)),
                            copy(a.size(), char(0x5a));
          ReduceOfScaled(in_place.data(), nullptr, in_place.data(), b.data(),
                         count, t, op, factor);
          ReduceOfScaled(third.data(), copy.data(), a.data(), b.data(), count,
                         t, op, factor);
          const std::string what =
              std::string(DataTypeName(t)) + " " + ReduceOpName(op) + " " +
              std::to_string(factor) + " " + std::to_string(count);
          EXPECT_EQ(in_place, expected) << what;
          EXPECT_EQ(third, expected) << what;
          EXPECT_EQ(copy, expected) << what;
        }
}

TEST(Reduce, HalfPrecisionConversions) {
  EXPECT_EQ(HalfToFloat(FloatToHalf(1.5f)), 1.5f);
  EXPECT_EQ(HalfToFloat(FloatToHalf(65504.f)), 65504.f);
  EXPECT_TRUE(std::isinf(HalfToFloat(FloatToHalf(70000.f))));
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(NAN))));
  EXPECT_EQ(HalfToFloat(FloatToHalf(5.960464477539063e-08f)),
            5.960464477539063e-08f);
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(3.0f)), 3.0f);
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(NAN))));
  EXPECT_EQ(FloatToHalf(1.0f + 1.0f / 4096),
            FloatToHalf(1.0f));  // ties to even
}

TEST(Reduce, ScaleTruncatesIntegers) {
  int32_t v[3] = {3, -3, 7};
  ScaleBuffer(v, 3, DataType::kInt32, 0.5);
  EXPECT_EQ(v[0], 1);
  EXPECT_EQ(v[1], -1);
  EXPECT_EQ(v[2], 3);
}

}  // namespace
}  // namespace horovod
