// Hierarchical allreduce: ranks are threads over the loopback transport,
// assigned to simulated hosts of uneven sizes; within a host they share a
// ShmGroup (or, in the second mode, talk over the transport). Every dtype
// and op, counts that take many shared-memory rounds and ring chunks,
// checked bitwise against a sequential reference on every rank.
#include "collectives/hierarchical_group.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <string>

#include "collectives/reduce.h"
#include "collectives/shm_collective_group.h"
#include "collectives/tcp_group.h"
#include "loopback_ranks.h"
#include "test_data.h"
#include "transport/loopback_transport.h"
#include "transport/shm_group.h"

namespace horovod {
namespace {

TEST(SplitByHost, LocalMembersAndOneLeaderPerHost) {
  const std::vector<std::string> hosts = {"b", "a", "b", "c", "a", "b"};
  HostSplit s = SplitByHost({0, 1, 2, 3, 4, 5}, hosts, 2);
  EXPECT_EQ(s.local, (std::vector<int>{0, 2, 5}));
  EXPECT_EQ(s.leaders, (std::vector<int>{0, 1, 3}));
  EXPECT_FALSE(s.leader);
  EXPECT_TRUE(s.useful);

  s = SplitByHost({0, 1, 2, 3, 4, 5}, hosts, 1);
  EXPECT_EQ(s.local, (std::vector<int>{1, 4}));
  EXPECT_TRUE(s.leader);

  // A subset of the job: only its members count.
  s = SplitByHost({1, 3, 4}, hosts, 4);
  EXPECT_EQ(s.local, (std::vector<int>{1, 4}));
  EXPECT_EQ(s.leaders, (std::vector<int>{1, 3}));
  EXPECT_FALSE(s.leader);
  EXPECT_TRUE(s.useful);

  // One host, or one member per host: nothing to gain.
  EXPECT_FALSE(SplitByHost({0, 2, 5}, hosts, 0).useful);
  EXPECT_FALSE(SplitByHost({0, 1, 3}, hosts, 3).useful);
}

struct Case {
  std::vector<std::string> hosts;
  bool shm;
};

// One rank's hierarchical group for a case, with what it is built from.
struct RankGroup {
  std::unique_ptr<ShmGroup> shm;
  Scratch scratch, fusion;
  std::unique_ptr<HierarchicalGroup> group;
  std::string local_kind;
};

void Build(const Case& c, LoopbackTransport& tr, const std::vector<int>& all,
           RankGroup* g, Hierarchy hierarchy = Hierarchy()) {
  HostSplit split = SplitByHost(all, c.hosts, tr.rank());
  AlgorithmConfig cfg;
  cfg.ring_chunk_bytes = 4096;
  cfg.small_allreduce_bytes = 256;
  if (c.shm && split.local.size() > 1) {
    ShmConfig sc;
    sc.region_bytes = 4096;
    sc.timeout_s = 60;
    ASSERT_TRUE(ShmGroup::Create(&tr, split.local, {}, sc, &g->shm).ok());
  }
  std::unique_ptr<CollectiveGroup> local, cross, stripe;
  if (g->shm != nullptr)
    local = std::make_unique<ShmCollectiveGroup>(g->shm.get(), cfg, &g->fusion);
  else
    local = std::make_unique<TcpGroup>(
        Communicator(&tr, split.local, &g->scratch, cfg), &g->fusion);
  g->local_kind = local->kind();
  // As the executor decides: overlap only beside shared memory.
  hierarchy.overlap = hierarchy.overlap && g->shm != nullptr;
  if (split.leader)
    cross = std::make_unique<TcpGroup>(
        Communicator(&tr, split.leaders, &g->scratch, cfg), &g->fusion);
  if (split.even && hierarchy.striped)
    stripe = std::make_unique<TcpGroup>(
        Communicator(&tr, split.stripe, &g->scratch, cfg), &g->fusion);
  g->group = std::make_unique<HierarchicalGroup>(
      split, hierarchy, std::move(local), std::move(cross), std::move(stripe),
      std::make_unique<TcpGroup>(Communicator(&tr, all, &g->scratch, cfg),
                                 &g->fusion),
      &g->fusion);
}

// Several hosts, each with as many ranks (more than one).
bool Even(const std::vector<std::string>& hosts) {
  std::map<std::string, int> n;
  for (const auto& h : hosts) ++n[h];
  for (const auto& kv : n)
    if (kv.second != n.begin()->second) return false;
  return n.size() > 1 && n.begin()->second > 1;
}

void Check(const Case& c, int64_t count, DataType t, ReduceOp op,
           Hierarchy hierarchy = Hierarchy(), double postscale = 1.0) {
  const int n = static_cast<int>(c.hosts.size());
  std::vector<char> want = Fill(t, count, 0, true);
  for (int r = 1; r < n; ++r)
    ReduceInto(want.data(), Fill(t, count, r, true).data(), count, t, op);
  ScaleBuffer(want.data(), count, t, postscale);
  std::vector<std::vector<char>> got(n);
  std::vector<std::vector<std::string>> phases(n);
  RunLoopbackRanks(n, [&](LoopbackTransport& tr, const std::vector<int>& all) {
    const int r = tr.rank();
    RankGroup g;
    Build(c, tr, all, &g, hierarchy);
    got[r] = Fill(t, count, r, true);
    PhaseFn on_phase = [&](const char* prefix, const char* name) {
      // Each phase names the group it runs on: the host's (shared memory
      // when it has one) or the leaders' (TCP).
      const bool crossing = std::string(name) == "CROSS_ALLREDUCE";
      phases[r].push_back(name);
      EXPECT_EQ(prefix, crossing ? "TCP_" : g.local_kind) << name;
    };
    const Piece whole{got[r].data(), 0, count};
    ASSERT_TRUE(
        g.group
            ->Allreduce(&whole, 1, ReduceArgs{t, op, 1.0, postscale}, &on_phase)
            .ok());
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(got[r], want) << "rank " << r << " n=" << n << " count=" << count
                            << " dtype=" << DataTypeName(t)
                            << " op=" << ReduceOpName(op) << " shm=" << c.shm;
    if (count == 0) continue;
    // The leader is the first rank of its host; on even hosts every rank
    // carries a stripe across.
    const bool leader = std::find(c.hosts.begin(), c.hosts.begin() + r,
                                  c.hosts[r]) == c.hosts.begin() + r;
    const bool striped = hierarchy.striped && Even(c.hosts);
    std::vector<std::string> want_phases = {striped ? "HOST_REDUCESCATTER"
                                                    : "HOST_ALLREDUCE"};
    if (leader || striped) want_phases.push_back("CROSS_ALLREDUCE");
    want_phases.push_back(striped ? "HOST_ALLGATHER" : "HOST_BROADCAST");
    EXPECT_EQ(phases[r], want_phases) << "rank " << r;
  }
}

const Case kCases[] = {
    {{"a", "a", "b", "b"}, true},
    {{"a", "a", "b", "b"}, false},
    // Uneven hosts, interleaved ranks, a host with a single rank.
    {{"a", "b", "a", "c", "b", "b"}, true},
    {{"a", "a", "a", "b"}, true},
    {{"a", "b", "c", "a", "b"}, false},
};

TEST(HierarchicalAllreduce, EveryDtypeAndOpOnUnevenHosts) {
  const DataType types[] = {DataType::kUInt8,    DataType::kInt8,
                            DataType::kInt16,    DataType::kInt32,
                            DataType::kInt64,    DataType::kFloat16,
                            DataType::kBFloat16, DataType::kFloat32,
                            DataType::kFloat64,  DataType::kBool};
  const ReduceOp ops[] = {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax,
                          ReduceOp::kProduct};
  for (const Case& c : kCases)
    for (DataType t : types)
      for (ReduceOp op : ops)
        for (int64_t count : {0, 1, 7, 3001}) Check(c, count, t, op);
}

TEST(HierarchicalAllreduce, LargeInputsTakeManyRoundsAndChunks) {
  for (const Case& c : kCases)
    for (int64_t count : {int64_t{1} << 15, (int64_t{1} << 17) + 3})
      Check(c, count, DataType::kFloat32, ReduceOp::kSum);
}

// Even hosts, one leader each instead of stripes: every dtype and op too.
TEST(HierarchicalAllreduce, OneLeaderPerEvenHostWhenStripesAreOff) {
  Hierarchy one_leader;
  one_leader.striped = false;
  for (const Case& c : {kCases[0], kCases[1]})
    for (DataType t : {DataType::kInt32, DataType::kFloat16})
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax})
        for (int64_t count : {1, 3001}) Check(c, count, t, op, one_leader);
}

// Average's postscale, applied once: by the cross-host step to what it
// carries (each stripe, or the leader's whole run), in one segment or
// pipelined in several, whatever the hosts' shapes.
TEST(HierarchicalAllreduce, ThePostscaleIsAppliedOnce) {
  const int64_t from = HierarchicalGroup::kSegmentedFrom / 4;
  for (const Case& c : kCases)
    for (bool striped : {true, false})
      for (DataType t : {DataType::kInt32, DataType::kFloat32})
        for (int64_t count : {int64_t{1}, int64_t{3001}, from + 13})
          Check(c, count, t, ReduceOp::kSum,
                Hierarchy{true, true, true, striped}, 0.25);
}

// From HierarchicalGroup::kSegmentedFrom bytes the run goes in pipelined
// segments (uneven ones when the count does not divide), the leaders'
// cross-host phase on a thread of its own beside shared memory: the same
// results and phases.
TEST(HierarchicalAllreduce, SegmentedRunsPipelineTheHostAndCrossPhases) {
  const int64_t from = HierarchicalGroup::kSegmentedFrom / 4;
  for (const Case& c : {kCases[0], kCases[1], kCases[3]})
    for (bool overlap : {true, false})
      for (bool striped : {true, false})
        for (int64_t count : {from, from + 13})
          Check(c, count, DataType::kFloat32, ReduceOp::kSum,
                Hierarchy{true, true, overlap, striped});
}

// A run longer than kSegments segments of kMaxSegmentBytes takes more
// segments: the same results. A test of its own so that a parallel ctest
// runs it beside the one above; each moves hundreds of MiB, slow under
// ThreadSanitizer.
TEST(HierarchicalAllreduce, ALongRunTakesMoreThanKSegments) {
  const int64_t big =
      HierarchicalGroup::kSegments * HierarchicalGroup::kMaxSegmentBytes;
  Check(kCases[0], big + 3, DataType::kUInt8, ReduceOp::kMax,
        Hierarchy{true, true, true});
}

// A byte that names the sender, the receiver and the position.
char Byte(int from, int to, int64_t i) {
  return static_cast<char>((from * 37 + to * 11 + i * 7) & 0xff);
}

// Cases whose hosts' members are not consecutive ranks included: those
// take the staging path (allgather) or run flat (reducescatter).
TEST(HierarchicalCollectives, BroadcastFromEveryRoot) {
  for (const Case& c : kCases) {
    const int n = static_cast<int>(c.hosts.size());
    for (int64_t bytes : {0, 1, 5000, 70001})
      for (int root = 0; root < n; ++root) {
        std::vector<std::vector<char>> got(n);
        RunLoopbackRanks(
            n, [&](LoopbackTransport& tr, const std::vector<int>& all) {
              RankGroup g;
              Build(c, tr, all, &g);
              const int r = tr.rank();
              got[r].resize(bytes);
              for (int64_t i = 0; i < bytes; ++i) got[r][i] = Byte(r, 0, i);
              ASSERT_TRUE(g.group->Broadcast(got[r].data(), bytes, root).ok());
            });
        for (int r = 0; r < n; ++r)
          for (int64_t i = 0; i < bytes; ++i)
            ASSERT_EQ(got[r][i], Byte(root, 0, i))
                << "rank " << r << " root " << root << " byte " << i;
      }
  }
}

TEST(HierarchicalCollectives, AllgatherOfUnevenBlocksInMemberOrder) {
  for (const Case& c : kCases) {
    const int n = static_cast<int>(c.hosts.size());
    for (int64_t scale : {1, 3001}) {
      std::vector<int64_t> bytes(n);
      for (int i = 0; i < n; ++i) bytes[i] = (i == 1) ? 0 : (i + 1) * scale;
      const int64_t total =
          std::accumulate(bytes.begin(), bytes.end(), int64_t{0});
      std::vector<char> want;
      for (int i = 0; i < n; ++i)
        for (int64_t k = 0; k < bytes[i]; ++k) want.push_back(Byte(i, 0, k));
      std::vector<std::vector<char>> got(n);
      RunLoopbackRanks(
          n, [&](LoopbackTransport& tr, const std::vector<int>& all) {
            RankGroup g;
            Build(c, tr, all, &g);
            const int r = tr.rank();
            std::vector<char> mine(bytes[r]);
            for (int64_t k = 0; k < bytes[r]; ++k) mine[k] = Byte(r, 0, k);
            got[r].assign(total, 0);
            ASSERT_TRUE(
                g.group->Allgatherv(mine.data(), got[r].data(), bytes).ok());
          });
      for (int r = 0; r < n; ++r)
        ASSERT_EQ(got[r], want) << "rank " << r << " scale " << scale;
    }
  }
}

TEST(HierarchicalCollectives, ReduceScatterMatchesTheFlatResult) {
  // Small integers: every order of summing gives the same bits, so the
  // hierarchical result must equal the flat one exactly.
  for (const Case& c : kCases)
    for (DataType t : {DataType::kInt32, DataType::kFloat32})
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
        const int n = static_cast<int>(c.hosts.size());
        std::vector<int64_t> counts(n);
        for (int i = 0; i < n; ++i) counts[i] = 1000 + 517 * i;
        const int64_t total =
            std::accumulate(counts.begin(), counts.end(), int64_t{0});
        std::vector<char> want = Fill(t, total, 0, false);
        for (int r = 1; r < n; ++r)
          ReduceInto(want.data(), Fill(t, total, r, false).data(), total, t,
                     op);
        std::vector<std::vector<char>> got(n);
        RunLoopbackRanks(
            n, [&](LoopbackTransport& tr, const std::vector<int>& all) {
              RankGroup g;
              Build(c, tr, all, &g);
              const int r = tr.rank();
              got[r] = Fill(t, total, r, false);
              ASSERT_TRUE(
                  g.group->ReduceScatter(got[r].data(), counts, t, op).ok());
            });
        const size_t esize = DataTypeSize(t);
        int64_t at = 0;
        for (int r = 0; r < n; ++r) {
          ASSERT_EQ(0, std::memcmp(got[r].data() + at * esize,
                                   want.data() + at * esize, counts[r] * esize))
              << "rank " << r << " dtype " << DataTypeName(t);
          at += counts[r];
        }
      }
}

TEST(HierarchicalCollectives, AlltoallDeliversEveryBlock) {
  for (const Case& c : kCases)
    for (bool hierarchical : {true, false}) {
      const int n = static_cast<int>(c.hosts.size());
      auto size = [&](int from, int to) -> int64_t {
        return ((from * 31 + to * 17) % 5 == 0) ? 0 : 100 * (from + 1) + to;
      };
      int64_t widest = 0;
      for (int a = 0; a < n; ++a)
        for (int b = 0; b < n; ++b) widest = std::max(widest, size(a, b));
      std::vector<std::vector<char>> got(n), want(n);
      for (int d = 0; d < n; ++d)
        for (int s = 0; s < n; ++s)
          for (int64_t k = 0; k < size(s, d); ++k)
            want[d].push_back(Byte(s, d, k));
      RunLoopbackRanks(
          n, [&](LoopbackTransport& tr, const std::vector<int>& all) {
            RankGroup g;
            Build(c, tr, all, &g, Hierarchy{true, hierarchical});
            const int r = tr.rank();
            std::vector<int64_t> send_bytes(n), recv_bytes(n);
            std::vector<char> send;
            for (int d = 0; d < n; ++d) {
              send_bytes[d] = size(r, d);
              recv_bytes[d] = size(d, r);
              for (int64_t k = 0; k < size(r, d); ++k)
                send.push_back(Byte(r, d, k));
            }
            got[r].assign(want[r].size(), 0);
            ASSERT_TRUE(g.group
                            ->Alltoallv(send.data(), send_bytes, got[r].data(),
                                        recv_bytes, widest)
                            .ok());
          });
      for (int r = 0; r < n; ++r)
        ASSERT_EQ(got[r], want[r])
            << "rank " << r << " hierarchical " << hierarchical;
    }
}

TEST(SplitByHost, MemberPositionsAndContiguity) {
  const std::vector<std::string> hosts = {"b", "a", "b", "c", "a", "b"};
  HostSplit s = SplitByHost({0, 1, 2, 3, 4, 5}, hosts, 4);
  EXPECT_EQ(s.host_of, (std::vector<int>{0, 1, 0, 2, 1, 0}));
  EXPECT_EQ(s.index_in_host, (std::vector<int>{0, 0, 1, 0, 1, 2}));
  EXPECT_EQ(s.host_members,
            (std::vector<std::vector<int>>{{0, 2, 5}, {1, 4}, {3}}));
  EXPECT_EQ(s.my_host, 1);
  EXPECT_FALSE(s.contiguous);
  EXPECT_TRUE(SplitByHost({0, 1, 2, 3}, {"a", "a", "b", "b"}, 2).contiguous);
}

TEST(SplitByHost, StripesOnEvenHostsOnly) {
  // Interleaved and out of host order: stripe 1 is {3, 2}, ascending.
  const std::vector<std::string> hosts = {"a", "b", "b", "a"};
  HostSplit s = SplitByHost({0, 1, 2, 3}, hosts, 3);
  EXPECT_TRUE(s.even);
  EXPECT_EQ(s.stripe, (std::vector<int>{2, 3}));
  EXPECT_EQ(SplitByHost({0, 1, 2, 3}, hosts, 1).stripe,
            (std::vector<int>{0, 1}));
  // Three ranks on one host, one on the other; or a rank per host.
  EXPECT_FALSE(SplitByHost({0, 1, 2, 3}, {"a", "a", "a", "b"}, 0).even);
  EXPECT_FALSE(SplitByHost({0, 1}, {"a", "b"}, 0).even);
  EXPECT_TRUE(SplitByHost({0, 1}, {"a", "b"}, 0).stripe.empty());
}

}  // namespace
}  // namespace horovod
