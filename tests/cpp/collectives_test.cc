// Every collective at world sizes 1..8, for counts 0, 1, odd, ring-chunk
// boundaries +-1 and large, every dtype and op, against a sequential
// reference; through both CollectiveGroup implementations: TcpGroup over the
// in-process loopback transport (and its algorithms one by one), and
// ShmCollectiveGroup (threads map each other's segments, with regions small
// enough that large inputs take many rounds). Inputs are small integers, so
// floating-point results are exact and compared bitwise.
#include "collectives/collectives.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <thread>

#include "collectives/piece_ring.h"
#include "collectives/reduce.h"
#include "collectives/shm_collective_group.h"
#include "collectives/tcp_group.h"
#include "loopback_ranks.h"
#include "test_data.h"
#include "transport/loopback_transport.h"
#include "transport/shm_group.h"

namespace horovod {
namespace {

constexpr int64_t kChunkBytes = 4096;
constexpr size_t kShmRegionBytes = 4096;

enum class Backend { kTransport, kShm };
// Set by the fixture for the test that is running.
Backend g_backend = Backend::kTransport;
// Shared-memory groups seal allreduce rounds of at least this many bytes.
size_t g_seal_bytes = ShmConfig().seal_bytes;
size_t g_stream_bytes = ShmConfig().stream_bytes;

class Collectives : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override { g_backend = GetParam(); }
};

// Runs fn(group, comm) on `n` threads, one per rank: the group of the
// backend under test, and the point-to-point view of the same members.
void RunRanks(int n,
              const std::function<void(CollectiveGroup&, Communicator&)>& fn,
              int64_t small_bytes = 256) {
  RunLoopbackRanks(
      n, [&](LoopbackTransport& t, const std::vector<int>& members) {
        Scratch scratch, fusion;
        AlgorithmConfig cfg;
        cfg.ring_chunk_bytes = kChunkBytes;
        cfg.small_allreduce_bytes = small_bytes;
        Communicator comm(&t, members, &scratch, cfg);
        std::unique_ptr<ShmGroup> shm;
        std::unique_ptr<CollectiveGroup> group;
        if (g_backend == Backend::kShm && n > 1) {
          ShmConfig sc;
          sc.region_bytes = kShmRegionBytes;
          sc.seal_bytes = g_seal_bytes;
          sc.stream_bytes = g_stream_bytes;
          sc.timeout_s = 60;
          ASSERT_TRUE(ShmGroup::Create(&t, members, {}, sc, &shm).ok());
          ASSERT_NE(shm, nullptr);
          group = std::make_unique<ShmCollectiveGroup>(shm.get(), cfg, &fusion);
        } else {
          group = std::make_unique<TcpGroup>(comm, &fusion);
        }
        fn(*group, comm);
      });
}

// The group's own allreduce, or one of the point-to-point algorithms.
enum class Algo { kGroup, kRing, kRecursiveDoubling };

Status RunAllreduce(Algo a, CollectiveGroup& g, Communicator& c, void* buf,
                    int64_t count, DataType t, ReduceOp op) {
  switch (a) {
    case Algo::kRing:
      return RingAllreduce(c, buf, count, t, op);
    case Algo::kRecursiveDoubling:
      return RecursiveDoublingAllreduce(c, buf, count, t, op);
    default:
      return g.Allreduce(buf, count, t, op);
  }
}

// The algorithms worth running for the backend under test: the
// point-to-point ones only once, with the transport.
std::vector<Algo> Algos(bool with_recursive_doubling = true) {
  if (g_backend == Backend::kShm) return {Algo::kGroup};
  if (!with_recursive_doubling) return {Algo::kGroup, Algo::kRing};
  return {Algo::kGroup, Algo::kRing, Algo::kRecursiveDoubling};
}

// What n ranks' Fill operands reduce to, scaled by `postscale`.
std::vector<char> Reduced(int n, int64_t count, DataType t, ReduceOp op,
                          bool tiny, double postscale = 1.0) {
  std::vector<char> want = Fill(t, count, 0, tiny);
  for (int r = 1; r < n; ++r) {
    std::vector<char> in = Fill(t, count, r, tiny);
    ReduceInto(want.data(), in.data(), count, t, op);
  }
  ScaleBuffer(want.data(), count, t, postscale);
  return want;
}

void CheckAllreduce(Algo fn, int n, int64_t count, DataType t, ReduceOp op) {
  bool tiny = op == ReduceOp::kProduct;
  const std::vector<char> want = Reduced(n, count, t, op, tiny);
  std::vector<std::vector<char>> got(n);
  RunRanks(n, [&](CollectiveGroup& g, Communicator& c) {
    got[c.rank()] = Fill(t, count, c.rank(), tiny);
    ASSERT_TRUE(
        RunAllreduce(fn, g, c, got[c.rank()].data(), count, t, op).ok());
  });
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(got[r], want)
        << "rank " << r << " n=" << n << " count=" << count
        << " dtype=" << DataTypeName(t) << " op=" << ReduceOpName(op);
}

TEST_P(Collectives, AllreduceEveryDtypeOpAndWorldSize) {
  for (int n = 1; n <= 8; ++n)
    for (DataType t : kAllTypes)
      for (ReduceOp op : kOps)
        for (int64_t count : {0, 1, 7})
          for (Algo fn : Algos()) CheckAllreduce(fn, n, count, t, op);
}

// Average's postscale, applied by the algorithm itself (the ring in its
// last reduction of each block, the small path after it, shared memory by
// each block's owner): the bits of a reduction followed by a scaling.
TEST_P(Collectives, AllreduceAppliesThePostscale) {
  for (int n : {1, 2, 3})
    for (DataType t :
         {DataType::kFloat32, DataType::kInt32, DataType::kFloat16})
      for (int64_t count : {1, 7, 5000}) {
        const std::vector<char> want =
            Reduced(n, count, t, ReduceOp::kSum, false, 1.0 / 3);
        for (int way = 0; way < 3; ++way) {
          if (g_backend == Backend::kShm && way > 0) break;
          std::vector<std::vector<char>> got(n);
          RunRanks(n, [&](CollectiveGroup& g, Communicator& c) {
            std::vector<char>& mine = got[c.rank()];
            mine = Fill(t, count, c.rank(), false);
            const Piece whole{mine.data(), 0, count};
            Status st;
            if (way == 0)
              st = g.Allreduce(&whole, 1,
                               ReduceArgs{t, ReduceOp::kSum, 1.0, 1.0 / 3},
                               nullptr);
            else if (way == 1)
              st = RingAllreduce(c, mine.data(), count, t, ReduceOp::kSum,
                                 1.0 / 3);
            else
              st = Allreduce(c, mine.data(), count, t, ReduceOp::kSum, 1.0 / 3);
            ASSERT_TRUE(st.ok()) << st.message();
          });
          for (int r = 0; r < n; ++r)
            ASSERT_EQ(got[r], want)
                << "rank " << r << " n=" << n << " count=" << count
                << " dtype=" << DataTypeName(t) << " way " << way;
        }
      }
}

TEST_P(Collectives, AllreduceChunkBoundariesAndLargeCounts) {
  const int64_t per_chunk = kChunkBytes / 4;
  for (int n : {2, 3, 5, 8})
    for (int64_t count :
         {n * per_chunk - 1, n * per_chunk, n * per_chunk + 1, int64_t(100003)})
      for (Algo fn : Algos())
        CheckAllreduce(fn, n, count, DataType::kFloat32, ReduceOp::kSum);
  for (Algo fn : Algos(false)) {
    CheckAllreduce(fn, 4, 5000, DataType::kFloat16, ReduceOp::kSum);
    CheckAllreduce(fn, 3, 5000, DataType::kInt64, ReduceOp::kMax);
    CheckAllreduce(fn, 2, 3001, DataType::kBFloat16, ReduceOp::kProduct);
  }
}

TEST_P(Collectives, AllgathervUnevenIncludingEmpty) {
  for (int n = 1; n <= 8; ++n) {
    std::vector<int64_t> bytes(n);
    // Rank 0 sends nothing; some send more than a shared-memory region.
    for (int r = 0; r < n; ++r) bytes[r] = (r * 37) % 11 * 1000;
    int64_t total = 0;
    for (int64_t b : bytes) total += b;
    std::vector<std::vector<char>> got(n, std::vector<char>(total));
    RunRanks(n, [&](CollectiveGroup& g, Communicator&) {
      std::vector<char> mine(bytes[g.rank()], char('a' + g.rank()));
      ASSERT_TRUE(g.Allgatherv(mine.data(), got[g.rank()].data(), bytes).ok());
    });
    std::vector<char> want;
    for (int r = 0; r < n; ++r)
      want.insert(want.end(), bytes[r], char('a' + r));
    for (int r = 0; r < n; ++r) EXPECT_EQ(got[r], want) << n;
  }
}

// Large allreduce rounds that seal their half (so the next collective
// writes the same half again) between collectives that alternate halves:
// every result stays exact, so no rank overwrites a half a peer still reads.
TEST_P(Collectives, SealedRoundsBetweenOtherCollectives) {
  g_seal_bytes = 1;
  const int n = 3;
  const int64_t large = 100003, small = 7;
  const auto sum = [&](int64_t count, int step) {
    std::vector<char> want = Fill(DataType::kFloat32, count, step, false);
    for (int r = 1; r < n; ++r) {
      std::vector<char> in = Fill(DataType::kFloat32, count, r + step, false);
      ReduceInto(want.data(), in.data(), count, DataType::kFloat32,
                 ReduceOp::kSum);
    }
    return want;
  };
  std::vector<std::string> failures(n);
  RunRanks(n, [&](CollectiveGroup& g, Communicator&) {
    std::string& fail = failures[g.rank()];
    for (int step = 0; step < 6; ++step) {
      const int64_t count = step % 2 ? small : large;
      std::vector<char> buf =
          Fill(DataType::kFloat32, count, g.rank() + step, false);
      ASSERT_TRUE(
          g.Allreduce(buf.data(), count, DataType::kFloat32, ReduceOp::kSum)
              .ok());
      if (buf != sum(count, step)) fail += "allreduce " + std::to_string(step);
      std::vector<char> b(5000, char(g.rank() + step));
      ASSERT_TRUE(g.Broadcast(b.data(), 5000, step % n).ok());
      if (b != std::vector<char>(5000, char(step % n + step)))
        fail += "broadcast " + std::to_string(step);
    }
  });
  g_seal_bytes = ShmConfig().seal_bytes;
  for (int r = 0; r < n; ++r) EXPECT_EQ(failures[r], "") << "rank " << r;
}

TEST_P(Collectives, BroadcastEveryRoot) {
  for (int n = 1; n <= 8; ++n)
    for (int root = 0; root < n; ++root)
      for (int64_t len : {0, 1, 9999}) {
        std::vector<std::vector<char>> got(n);
        RunRanks(n, [&](CollectiveGroup& g, Communicator&) {
          got[g.rank()].assign(len, char(g.rank()));
          ASSERT_TRUE(g.Broadcast(got[g.rank()].data(), len, root).ok());
        });
        for (int r = 0; r < n; ++r)
          EXPECT_EQ(got[r], std::vector<char>(len, char(root)));
      }
}

TEST_P(Collectives, AlltoallvUnevenSplits) {
  for (int n = 1; n <= 8; ++n) {
    // Rank s sends (s + d) % 3 * 1000 bytes of value s*16+d to rank d.
    std::vector<std::vector<char>> got(n);
    RunRanks(n, [&](CollectiveGroup& g, Communicator&) {
      int s = g.rank();
      std::vector<int64_t> send(n), recv(n);
      std::vector<char> out;
      for (int d = 0; d < n; ++d) {
        send[d] = (s + d) % 3 * 1000;
        recv[d] = (d + s) % 3 * 1000;
        out.insert(out.end(), send[d], char(s * 16 + d));
      }
      int64_t total = 0;
      for (int64_t b : recv) total += b;
      got[s].resize(total);
      ASSERT_TRUE(
          g.Alltoallv(out.data(), send, got[s].data(), recv, n > 1 ? 2000 : 0)
              .ok());
    });
    for (int d = 0; d < n; ++d) {
      std::vector<char> want;
      for (int s = 0; s < n; ++s)
        want.insert(want.end(), (s + d) % 3 * 1000, char(s * 16 + d));
      EXPECT_EQ(got[d], want);
    }
  }
}

TEST_P(Collectives, ReduceScatterUnevenBlocks) {
  for (int n = 1; n <= 8; ++n) {
    std::vector<int64_t> counts(n);
    int64_t total = 0;
    for (int r = 0; r < n; ++r) total += counts[r] = (r % 3) * 700 + 1;
    std::vector<char> want = Fill(DataType::kInt32, total, 0, false);
    for (int r = 1; r < n; ++r) {
      auto in = Fill(DataType::kInt32, total, r, false);
      ReduceInto(want.data(), in.data(), total, DataType::kInt32,
                 ReduceOp::kSum);
    }
    std::vector<std::vector<char>> got(n);
    RunRanks(n, [&](CollectiveGroup& g, Communicator&) {
      got[g.rank()] = Fill(DataType::kInt32, total, g.rank(), false);
      ASSERT_TRUE(g.ReduceScatter(got[g.rank()].data(), counts,
                                  DataType::kInt32, ReduceOp::kSum)
                      .ok());
    });
    int64_t off = 0;
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(0, std::memcmp(got[r].data() + off * 4, want.data() + off * 4,
                               counts[r] * 4))
          << "n=" << n << " r=" << r;
      off += counts[r];
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Collectives,
                         ::testing::Values(Backend::kTransport, Backend::kShm),
                         [](const ::testing::TestParamInfo<Backend>& info) {
                           return info.param == Backend::kShm
                                      ? std::string("SharedMemory")
                                      : std::string("Transport");
                         });

// How the pieces of a run are laid out in CheckPieces.
enum class Layout {
  kInPlace,     // each piece its own buffer, operand and result
  kOutOfPlace,  // operands read from separate sources
  kOverlap,     // two pieces are the same memory (a tensor fused twice)
  // Pieces carved in order from one buffer, from its start or backwards
  // from its end (as a framework allocates a model's tensors and submits
  // them in either order), the last piece fused twice.
  kOneBufferUp,
  kOneBufferDown,
  // Even members kOverlap, odd ones kOutOfPlace: over a transport the
  // first pack their run and the others reduce it where it lies, in one
  // ring.
  kMixed,
};

// A fused response's tensors through the group's allreduce: the run is cut
// into uneven pieces (some empty, some a single element) living in separate
// buffers; every member must end with the scaled reduction of the whole run.
void CheckPieces(int n, int64_t count, DataType t, ReduceOp op,
                 int64_t small_bytes, double pre, double post,
                 Layout run_layout) {
  bool tiny = op == ReduceOp::kProduct;
  if (t == DataType::kBool) pre = post = 1.0;  // bool is never scaled
  auto operand = [&](int r) {
    std::vector<char> v = Fill(t, count, r, tiny);
    ScaleBuffer(v.data(), count, t, pre);
    return v;
  };
  std::vector<char> want = operand(0);
  for (int r = 1; r < n; ++r)
    ReduceInto(want.data(), operand(r).data(), count, t, op);
  ScaleBuffer(want.data(), count, t, post);
  const size_t esize = DataTypeSize(t);
  std::vector<int64_t> cuts = {0};
  for (int64_t len = 0; cuts.back() < count; len = (len * 7 + 3) % 1500)
    cuts.push_back(std::min(count, cuts.back() + len));
  std::vector<std::vector<char>> got(n);
  RunRanks(
      n,
      [&](CollectiveGroup& g, Communicator&) {
        const int r = g.rank();
        const Layout layout = run_layout != Layout::kMixed ? run_layout
                              : r % 2 == 0                 ? Layout::kOverlap
                                           : Layout::kOutOfPlace;
        std::vector<char> mine = Fill(t, count, r, tiny);
        std::vector<std::vector<char>> bufs, srcs;
        std::vector<Piece> pieces;
        if (layout == Layout::kOneBufferUp ||
            layout == Layout::kOneBufferDown) {
          std::vector<char> block(mine.size());
          auto at = [&](size_t k) {  // piece k's first element in `block`
            return layout == Layout::kOneBufferUp ? cuts[k - 1]
                                                  : count - cuts[k];
          };
          for (size_t k = 1; k < cuts.size(); ++k) {
            const int64_t len = cuts[k] - cuts[k - 1];
            std::memcpy(block.data() + at(k) * esize,
                        mine.data() + cuts[k - 1] * esize, len * esize);
            pieces.push_back({block.data() + at(k) * esize, cuts[k - 1], len});
          }
          const Piece last = pieces.back();
          pieces.push_back({last.data, count, last.count});
          ASSERT_TRUE(g.Allreduce(pieces.data(), pieces.size(),
                                  ReduceArgs{t, op, pre, post})
                          .ok());
          for (size_t k = 1; k < cuts.size(); ++k)
            got[r].insert(
                got[r].end(), block.begin() + at(k) * esize,
                block.begin() + (at(k) + cuts[k] - cuts[k - 1]) * esize);
          return;
        }
        for (size_t k = 1; k < cuts.size(); ++k) {
          std::vector<char> part(mine.begin() + cuts[k - 1] * esize,
                                 mine.begin() + cuts[k] * esize);
          if (layout == Layout::kOutOfPlace) {
            srcs.push_back(part);
            // Garbage where the result goes: it must not be read.
            std::fill(part.begin(), part.end(), char(0x5a));
          }
          bufs.push_back(std::move(part));
        }
        for (size_t k = 0; k < bufs.size(); ++k)
          pieces.push_back({bufs[k].data(), cuts[k], cuts[k + 1] - cuts[k],
                            srcs.empty() ? nullptr : srcs[k].data()});
        if (layout == Layout::kOverlap) {
          // The same tensor fused twice: the run ends with a second piece
          // over the largest piece's memory. Both results are that piece's
          // reduction, so the buffers must still hold `want`.
          const Piece big = *std::max_element(
              pieces.begin(), pieces.end(),
              [](const Piece& a, const Piece& b) { return a.count < b.count; });
          pieces.push_back({big.data, count, big.count});
        }
        // In a mixed run the others fuse the tensor twice: an out-of-place
        // member fuses a copy of it, so that every run is equally long.
        std::vector<char> twice, twice_src;
        size_t big = 0;
        if (run_layout == Layout::kMixed && layout == Layout::kOutOfPlace) {
          big = static_cast<size_t>(
              std::max_element(pieces.begin(), pieces.end(),
                               [](const Piece& a, const Piece& b) {
                                 return a.count < b.count;
                               }) -
              pieces.begin());
          twice_src = srcs[big];
          twice.assign(twice_src.size(), char(0x5a));
          pieces.push_back(
              {twice.data(), count, pieces[big].count, twice_src.data()});
        }
        ASSERT_TRUE(g.Allreduce(pieces.data(), pieces.size(),
                                ReduceArgs{t, op, pre, post})
                        .ok());
        for (auto& b : bufs) got[r].insert(got[r].end(), b.begin(), b.end());
        if (!twice.empty()) {
          EXPECT_EQ(twice, bufs[big]) << "rank " << r;
        }
      },
      small_bytes);
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(got[r], want)
        << "rank " << r << " n=" << n << " count=" << count
        << " dtype=" << DataTypeName(t) << " op=" << ReduceOpName(op)
        << " pre=" << pre << " post=" << post;
}

TEST_P(Collectives, AllreduceOverPieces) {
  for (int n : {2, 3, 5})
    for (DataType t : kAllTypes)
      for (ReduceOp op : kOps)
        for (int64_t count : {1, 40, 5000})
          // Every member reduces everything (small) and block rounds (large).
          for (int64_t small : {int64_t{1} << 30, int64_t{0}})
            // Average's 1/size, applied by each block's owner.
            for (double post : {1.0, 0.5})
              CheckPieces(n, count, t, op, small, 1.0, post, Layout::kInPlace);
}

// Unscaled, a group of one leaves each piece where it lies (copied in when
// out of place); scaled, it still scales a tensor fused twice once.
TEST_P(Collectives, AllreduceOverPiecesScaledAndOutOfPlace) {
  for (int n : {1, 2, 3})
    for (DataType t : {DataType::kInt32, DataType::kFloat16, DataType::kFloat64,
                       DataType::kBool})
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax})
        for (int64_t count : {1, 5000})
          for (Layout layout :
               {Layout::kInPlace, Layout::kOutOfPlace, Layout::kOverlap,
                Layout::kOneBufferUp, Layout::kOneBufferDown})
            for (double pre : {1.0, 2.0})
              CheckPieces(n, count, t, op, 256, pre, pre == 1 ? 1 : 3, layout);
}

// An out-of-place fused response with no prescale: each block's owner
// reduces straight from its sources (ReduceOf), never reading the garbage
// where the results go.
TEST_P(Collectives, AllreduceOverPiecesOutOfPlaceUnscaled) {
  for (int n : {2, 3})
    for (DataType t : kAllTypes)
      for (ReduceOp op : kOps)
        for (int64_t count : {40, 5000})
          for (int64_t small : {int64_t{1} << 30, int64_t{0}})
            CheckPieces(n, count, t, op, small, 1.0, 0.5, Layout::kOutOfPlace);
}

// Members whose runs cannot be reduced where they lie (a tensor fused
// twice) pack them, beside members that reduce theirs in place, in one
// ring: the same messages, the same results.
TEST_P(Collectives, AllreduceOverPiecesPackedOnSomeMembersOnly) {
  for (int n : {2, 3, 4})
    for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kInt8})
      for (int64_t count : {40, 5000})
        for (double post : {1.0, 0.5})
          CheckPieces(n, count, t, ReduceOp::kSum, 0, 1.0, post,
                      Layout::kMixed);
}

// Out-of-place results written around the cache (every allreduce here
// counts as large): the same results in every layout, in block rounds and
// with the postscale, and the garbage where they go never read.
TEST_P(Collectives, AllreduceOverPiecesStreamingResults) {
  g_stream_bytes = 1;
  for (int n : {2, 3})
    for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kInt64,
                       DataType::kUInt8})
      for (int64_t count : {40, 5000, 300000})
        for (Layout layout : {Layout::kOutOfPlace, Layout::kInPlace,
                              Layout::kOverlap, Layout::kOneBufferUp})
          CheckPieces(n, count, t, ReduceOp::kSum, 0, 1.0, 0.5, layout);
  g_stream_bytes = ShmConfig().stream_bytes;
}

// PieceRing reduces a run where it lies only when no piece's result
// overlaps another piece's result or operand, in whatever order the
// pieces come.
TEST(PieceRing, ApartOnlyWhenNoResultOverlapsAnythingElse) {
  std::vector<float> buf(1000), other(1000);
  float* b = buf.data();
  auto run = [](std::vector<Piece> pieces) {
    int64_t at = 0;
    for (Piece& p : pieces) {
      p.offset = at;
      at += p.count;
    }
    PieceRing ring;
    return ring.Apart(pieces.data(), pieces.size(), DataType::kFloat32);
  };
  // Carved from one buffer: in address order, reversed, shuffled.
  EXPECT_TRUE(run({{b, 0, 10}, {b + 10, 0, 20}, {b + 30, 0, 5}}));
  EXPECT_TRUE(run({{b + 30, 0, 5}, {b + 10, 0, 20}, {b, 0, 10}}));
  EXPECT_TRUE(run({{b + 10, 0, 20}, {b + 30, 0, 5}, {b, 0, 10}}));
  // Empty pieces take no memory.
  EXPECT_TRUE(run({{b, 0, 10}, {b + 5, 0, 0}, {b + 10, 0, 1}}));
  // The same tensor twice, and two views that share one element.
  EXPECT_FALSE(run({{b, 0, 10}, {b + 10, 0, 20}, {b, 0, 10}}));
  EXPECT_FALSE(run({{b + 20, 0, 10}, {b, 0, 21}}));
  // Out of place: operands may share memory with each other, not with a
  // result.
  float* o = other.data();
  EXPECT_TRUE(run({{b, 0, 10, o}, {b + 10, 0, 10, o}}));
  EXPECT_TRUE(run({{b + 10, 0, 10, o + 10}, {b, 0, 10, o}}));
  EXPECT_FALSE(run({{b, 0, 10, o}, {o + 5, 0, 10, o + 100}}));
  EXPECT_FALSE(run({{b, 0, 10, b + 10}, {b + 10, 0, 10, o}}));
}

}  // namespace
}  // namespace horovod
