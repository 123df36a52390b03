// Adasum: the pairwise combination against its formula in double (orthogonal
// vectors add, equal ones average, a zero side leaves the other), and the
// allreduce at 1, 2, 4 and 8 members over the loopback transport against a
// sequential tree of combinations: every member bit-identical, each tensor
// of a fused buffer with its own coefficients.
#include "collectives/adasum.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>

#include "collectives/reduce.h"
#include "loopback_ranks.h"

namespace horovod {
namespace {

std::vector<double> Combined(const std::vector<double>& a,
                             const std::vector<double>& b) {
  double dot = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    dot += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  const double ca = aa < 1e-8 ? 1 : 1 - dot / (2 * aa);
  const double cb = bb < 1e-8 ? 1 : 1 - dot / (2 * bb);
  std::vector<double> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = ca * a[i] + cb * b[i];
  return out;
}

std::vector<double> CombineF64(std::vector<double> a,
                               const std::vector<double>& b) {
  AdasumCombine(a.data(), b.data(), a.data(), static_cast<int64_t>(a.size()),
                DataType::kFloat64);
  return a;
}

TEST(AdasumCombine, OrthogonalVectorsAddEqualOnesAverage) {
  EXPECT_EQ(CombineF64({3, 0}, {0, 4}), (std::vector<double>{3, 4}));
  EXPECT_EQ(CombineF64({2, -6}, {2, -6}), (std::vector<double>{2, -6}));
  // Opposite vectors: coefficients 1.5 each, so they cancel.
  EXPECT_EQ(CombineF64({1, 2}, {-1, -2}), (std::vector<double>{0, 0}));
}

TEST(AdasumCombine, AZeroSideLeavesTheOther) {
  EXPECT_EQ(CombineF64({0, 0, 0}, {1, -2, 5}), (std::vector<double>{1, -2, 5}));
  EXPECT_EQ(CombineF64({1, -2, 5}, {0, 0, 0}), (std::vector<double>{1, -2, 5}));
}

TEST(AdasumCombine, MatchesTheFormulaInEveryDtype) {
  const std::vector<double> a = {0.5, -1.25, 2.0, 0.75, -3.5};
  const std::vector<double> b = {1.5, 0.25, -0.5, 2.25, 1.0};
  const std::vector<double> want = Combined(a, b);
  EXPECT_EQ(CombineF64(a, b), want);

  std::vector<float> af(a.begin(), a.end()), bf(b.begin(), b.end());
  AdasumCombine(af.data(), bf.data(), bf.data(), 5, DataType::kFloat32);
  for (int i = 0; i < 5; ++i) EXPECT_FLOAT_EQ(bf[i], want[i]) << i;

  std::vector<uint16_t> ah, bh, out(5), ab, bb;
  for (int i = 0; i < 5; ++i) {
    ah.push_back(FloatToHalf(static_cast<float>(a[i])));
    bh.push_back(FloatToHalf(static_cast<float>(b[i])));
    ab.push_back(FloatToBFloat16(static_cast<float>(a[i])));
    bb.push_back(FloatToBFloat16(static_cast<float>(b[i])));
  }
  AdasumCombine(ah.data(), bh.data(), out.data(), 5, DataType::kFloat16);
  for (int i = 0; i < 5; ++i)
    EXPECT_NEAR(HalfToFloat(out[i]), want[i], 2e-3 * std::fabs(want[i]) + 1e-3)
        << i;
  AdasumCombine(ab.data(), bb.data(), out.data(), 5, DataType::kBFloat16);
  for (int i = 0; i < 5; ++i)
    EXPECT_NEAR(BFloat16ToFloat(out[i]), want[i],
                1e-2 * std::fabs(want[i]) + 1e-2)
        << i;
}

// Rank r's tensor t, element i: varied, so no two vectors are parallel.
double Value(int r, int t, int64_t i) {
  return std::sin(1.0 + r * 0.7 + t * 1.9 + static_cast<double>(i) * 0.31) *
         (1 + r);
}

void RunRanks(int n, const std::function<void(Communicator&)>& fn) {
  RunLoopbackRanks(
      n, [&](LoopbackTransport& t, const std::vector<int>& members) {
        Scratch scratch;
        Communicator comm(&t, members, &scratch, AlgorithmConfig{});
        fn(comm);
      });
}

TEST(AdasumAllreduce, IsTheTreeOfCombinationsOnEveryMember) {
  const std::vector<int64_t> counts = {7, 1, 0, 300};
  for (int n : {1, 2, 4, 8}) {
    // The tree: level by level, group g combines with group g + 1.
    std::vector<std::vector<std::vector<double>>> level(n);
    for (int r = 0; r < n; ++r)
      for (size_t t = 0; t < counts.size(); ++t) {
        std::vector<double> v;
        for (int64_t i = 0; i < counts[t]; ++i) v.push_back(Value(r, t, i));
        level[r].push_back(v);
      }
    while (level.size() > 1) {
      std::vector<std::vector<std::vector<double>>> next;
      for (size_t g = 0; g < level.size(); g += 2) {
        next.emplace_back();
        for (size_t t = 0; t < counts.size(); ++t)
          next.back().push_back(Combined(level[g][t], level[g + 1][t]));
      }
      level = std::move(next);
    }
    std::vector<std::vector<double>> got(n);
    RunRanks(n, [&](Communicator& c) {
      std::vector<double>& mine = got[c.rank()];
      for (size_t t = 0; t < counts.size(); ++t)
        for (int64_t i = 0; i < counts[t]; ++i)
          mine.push_back(Value(c.rank(), t, i));
      ASSERT_TRUE(
          AdasumAllreduce(c, mine.data(), counts, DataType::kFloat64).ok());
    });
    size_t k = 0;
    for (size_t t = 0; t < counts.size(); ++t)
      for (int64_t i = 0; i < counts[t]; ++i, ++k)
        EXPECT_NEAR(got[0][k], level[0][t][i], 1e-12) << n << " " << t;
    for (int r = 1; r < n; ++r)
      EXPECT_EQ(0, std::memcmp(got[r].data(), got[0].data(),
                               got[0].size() * sizeof(double)))
          << "member " << r << " of " << n << " differs";
  }
}

TEST(AdasumAllreduce, RefusesAMemberCountThatIsNoPowerOfTwo) {
  RunRanks(3, [&](Communicator& c) {
    double x = 1;
    EXPECT_FALSE(AdasumAllreduce(c, &x, {1}, DataType::kFloat64).ok());
  });
}

}  // namespace
}  // namespace horovod
