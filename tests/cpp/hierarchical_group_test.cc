// Hierarchical allreduce: ranks are threads over the loopback transport,
// assigned to simulated hosts of uneven sizes; within a host they share a
// ShmGroup (or, in the second mode, talk over the transport). Every dtype
// and op, counts that take many shared-memory rounds and ring chunks,
// checked bitwise against a sequential reference on every rank.
#include "collectives/hierarchical_group.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
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

void Check(const Case& c, int64_t count, DataType t, ReduceOp op) {
  const int n = static_cast<int>(c.hosts.size());
  std::vector<char> want = Fill(t, count, 0, true);
  for (int r = 1; r < n; ++r)
    ReduceInto(want.data(), Fill(t, count, r, true).data(), count, t, op);
  std::vector<std::vector<char>> got(n);
  std::vector<std::vector<std::string>> phases(n);
  RunLoopbackRanks(n, [&](LoopbackTransport& tr, const std::vector<int>& all) {
    const int r = tr.rank();
    HostSplit split = SplitByHost(all, c.hosts, r);
    AlgorithmConfig cfg;
    cfg.ring_chunk_bytes = 4096;
    cfg.small_allreduce_bytes = 256;
    std::unique_ptr<ShmGroup> shm;
    if (c.shm && split.local.size() > 1) {
      ShmConfig sc;
      sc.region_bytes = 4096;
      sc.timeout_s = 60;
      ASSERT_TRUE(ShmGroup::Create(&tr, split.local, {}, sc, &shm).ok());
    }
    Scratch scratch, fusion;
    std::unique_ptr<CollectiveGroup> local, cross;
    if (shm != nullptr)
      local = std::make_unique<ShmCollectiveGroup>(shm.get(), cfg, &fusion);
    else
      local = std::make_unique<TcpGroup>(
          Communicator(&tr, split.local, &scratch, cfg), &fusion);
    const std::string local_kind = local->kind();
    if (split.leader)
      cross = std::make_unique<TcpGroup>(
          Communicator(&tr, split.leaders, &scratch, cfg), &fusion);
    HierarchicalGroup group(std::move(local), std::move(cross),
                            std::make_unique<TcpGroup>(
                                Communicator(&tr, all, &scratch, cfg), &fusion),
                            &fusion);
    got[r] = Fill(t, count, r, true);
    PhaseFn on_phase = [&](const char* prefix, const char* name) {
      // Each phase names the group it runs on: the host's (shared memory
      // when it has one) or the leaders' (TCP).
      const bool crossing = std::string(name) == "CROSS_ALLREDUCE";
      phases[r].push_back(name);
      EXPECT_EQ(prefix, crossing ? "TCP_" : local_kind) << name;
    };
    const Piece whole{got[r].data(), 0, count};
    ASSERT_TRUE(group.Allreduce(&whole, 1, ReduceArgs{t, op}, &on_phase).ok());
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(got[r], want) << "rank " << r << " n=" << n << " count=" << count
                            << " dtype=" << DataTypeName(t)
                            << " op=" << ReduceOpName(op) << " shm=" << c.shm;
    if (count == 0) continue;
    // The leader is the first rank of its host.
    const bool leader = std::find(c.hosts.begin(), c.hosts.begin() + r,
                                  c.hosts[r]) == c.hosts.begin() + r;
    std::vector<std::string> want_phases = {"HOST_ALLREDUCE"};
    if (leader) want_phases.push_back("CROSS_ALLREDUCE");
    want_phases.push_back("HOST_BROADCAST");
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

}  // namespace
}  // namespace horovod
