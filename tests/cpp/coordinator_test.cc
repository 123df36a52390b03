#include "coordination/coordinator.h"

#include <gtest/gtest.h>

namespace horovod {
namespace {

Request Ar(int rank, const std::string& name, std::vector<int64_t> shape,
           DataType dtype = DataType::kFloat32) {
  Request r;
  r.rank = rank;
  r.op = Op::kAllreduce;
  r.name = name;
  r.dtype = dtype;
  r.shape = std::move(shape);
  return r;
}

RequestList List(std::vector<Request> rs) {
  RequestList l;
  l.requests = std::move(rs);
  return l;
}

Request Control(int rank, Op op, const std::string& name, int process_set = 0) {
  Request r;
  r.rank = rank;
  r.op = op;
  r.name = name;
  r.dtype = DataType::kUInt8;
  r.process_set = process_set;
  return r;
}

Request Barrier(int rank, int process_set = 0) {
  return Control(rank, Op::kBarrier, "__barrier__", process_set);
}

Request AddSet(int rank, std::vector<int32_t> ranks) {
  Request r = Control(rank, Op::kAddProcessSet, "__add_process_set__");
  r.set_ranks = std::move(ranks);
  return r;
}

Request RemoveSet(int rank, int id) {
  Request r = Control(rank, Op::kRemoveProcessSet, "__remove_process_set__");
  r.set_id = id;
  return r;
}

// `r` submits `q` and blocks waiting on it (as a synchronous call does).
RequestList Blocked(Request q) {
  RequestList l;
  l.waiting_update = true;
  l.waiting = {q.Key()};
  l.requests = {std::move(q)};
  return l;
}

class CoordinatorTest : public ::testing::Test {
 protected:
  CoordinatorConfig Config(int size) {
    CoordinatorConfig c;
    c.size = size;
    c.cycle_time_s = 0.001;
    c.stall_check_s = 1;
    c.stall_shutdown_s = 5;
    return c;
  }
  Clock::time_point t0 = Clock::now();
  Clock::time_point At(double s) {
    return t0 + std::chrono::duration_cast<Clock::duration>(
                    std::chrono::duration<double>(s));
  }
};

TEST_F(CoordinatorTest, WaitsForEveryRankInAnyOrder) {
  Coordinator c(Config(3), nullptr);
  c.AddRequestList(2, List({Ar(2, "b", {4}), Ar(2, "a", {4})}), At(0));
  c.AddRequestList(0, List({Ar(0, "a", {4})}), At(0));
  EXPECT_FALSE(c.ShouldEmit(At(0)));
  c.AddRequestList(1, List({Ar(1, "a", {4})}), At(0));
  // "a" is ready but "b" is on its way: wait one cycle to fuse.
  EXPECT_FALSE(c.ShouldEmit(At(0)));
  EXPECT_TRUE(c.ShouldEmit(At(0.002)));
  ResponseList out = c.TakeResponses(At(0.002));
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_EQ(out.responses[0].names, std::vector<std::string>{"a"});
  c.AddRequestList(0, List({Ar(0, "b", {4})}), At(0.003));
  c.AddRequestList(1, List({Ar(1, "b", {4})}), At(0.003));
  EXPECT_TRUE(c.ShouldEmit(At(0.003)));  // nothing else pending: at once
  EXPECT_EQ(c.TakeResponses(At(0.003)).responses[0].names[0], "b");
  EXPECT_EQ(c.pending(), 0u);
}

TEST_F(CoordinatorTest, FusesUpToThreshold) {
  CoordinatorConfig cfg = Config(2);
  cfg.fusion_threshold = 40;  // bytes: two float32[4] tensors fit, not three
  Coordinator c(cfg, nullptr);
  for (int r = 0; r < 2; ++r)
    c.AddRequestList(r,
                     List({Ar(r, "x", {4}), Ar(r, "y", {4}), Ar(r, "z", {4}),
                           Ar(r, "d", {4}, DataType::kFloat64)}),
                     At(0));
  ResponseList out = c.TakeResponses(At(0));
  ASSERT_EQ(out.responses.size(), 3u);
  EXPECT_EQ(out.responses[0].names, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(out.responses[1].names, (std::vector<std::string>{"z"}));
  EXPECT_EQ(out.responses[2].names, (std::vector<std::string>{"d"}));
}

TEST_F(CoordinatorTest, MismatchFailsTheTensorNamingBothRanks) {
  Coordinator c(Config(2), nullptr);
  c.AddRequestList(0, List({Ar(0, "t", {2, 3})}), At(0));
  c.AddRequestList(1, List({Ar(1, "t", {3, 2})}), At(0));
  ResponseList out = c.TakeResponses(At(0));
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_TRUE(out.responses[0].error);
  const std::string& m = out.responses[0].error_message;
  EXPECT_NE(m.find("rank 0 has [2, 3]"), std::string::npos) << m;
  EXPECT_NE(m.find("rank 1 has [3, 2]"), std::string::npos) << m;
  Request bad = Ar(1, "u", {2}, DataType::kInt32);
  c.AddRequestList(0, List({Ar(0, "u", {2})}), At(0));
  c.AddRequestList(1, List({bad}), At(0));
  out = c.TakeResponses(At(0));
  EXPECT_NE(out.responses[0].error_message.find("float32"), std::string::npos);
  EXPECT_NE(out.responses[0].error_message.find("int32"), std::string::npos);
}

TEST_F(CoordinatorTest, ARefusalFailsTheTensorOnEveryRankWithItsReason) {
  Coordinator c(Config(3), nullptr);
  Request refused = Ar(1, "t", {});
  refused.refusal = "unsupported tensor dtype complex64 (rank 1)";
  c.AddRequestList(0, List({Ar(0, "t", {2})}), At(0));
  c.AddRequestList(1, List({refused}), At(0));
  // Still waiting for rank 2: every member learns of the refusal at once.
  EXPECT_TRUE(c.TakeResponses(At(0)).responses.empty());
  c.AddRequestList(2, List({Ar(2, "t", {2})}), At(0));
  ResponseList out = c.TakeResponses(At(0));
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_TRUE(out.responses[0].error);
  EXPECT_EQ(out.responses[0].error_message,
            "allreduce of tensor 't' was refused by rank 1: unsupported "
            "tensor dtype complex64 (rank 1)");
}

TEST_F(CoordinatorTest, AllgatherCarriesEveryRanksFirstDimension) {
  Coordinator c(Config(3), nullptr);
  for (int r = 0; r < 3; ++r) {
    Request q = Ar(r, "g", {r, 5});
    q.op = Op::kAllgather;
    c.AddRequestList(r, List({q}), At(0));
  }
  ResponseList out = c.TakeResponses(At(0));
  ASSERT_FALSE(out.responses[0].error);
  EXPECT_EQ(out.responses[0].sizes, (std::vector<int64_t>{0, 1, 2}));
}

TEST_F(CoordinatorTest, StallWarnsThenFails) {
  Coordinator c(Config(3), nullptr);
  c.AddRequestList(0, List({Ar(0, "s", {1})}), At(0));
  c.AddRequestList(1, List({Ar(1, "s", {1})}), At(0));
  EXPECT_TRUE(c.TakeStallWarnings(At(0.5)).empty());
  auto warnings = c.TakeStallWarnings(At(1.5));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("missing on ranks [2]"), std::string::npos);
  EXPECT_TRUE(c.TakeStallWarnings(At(2)).empty());  // once
  EXPECT_FALSE(c.ShouldEmit(At(4)));
  EXPECT_TRUE(c.ShouldEmit(At(5.1)));
  ResponseList out = c.TakeResponses(At(5.1));
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_TRUE(out.responses[0].error);
  EXPECT_NE(out.responses[0].error_message.find("ranks [2]"),
            std::string::npos);
  EXPECT_EQ(c.pending(), 0u);
}

TEST_F(CoordinatorTest, JoinedRanksCountForAllreduceAndJoinReportsLast) {
  Coordinator c(Config(3), nullptr);
  Request join;
  join.op = Op::kJoin;
  join.name = kJoinTensorName;
  c.AddRequestList(2, List({join}), At(0));
  c.AddRequestList(0, List({Ar(0, "a", {3})}), At(0));
  c.AddRequestList(1, List({Ar(1, "a", {3})}), At(0));
  ResponseList out = c.TakeResponses(At(0));
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_FALSE(out.responses[0].error);
  // Allgather while a rank has joined is an error, not a hang.
  for (int r = 0; r < 2; ++r) {
    Request g = Ar(r, "g", {1});
    g.op = Op::kAllgather;
    c.AddRequestList(r, List({g}), At(0));
  }
  out = c.TakeResponses(At(0));
  EXPECT_TRUE(out.responses[0].error);
  c.AddRequestList(0, List({join}), At(0));
  c.AddRequestList(1, List({join}), At(0));
  out = c.TakeResponses(At(0));
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_EQ(out.responses[0].op, Op::kJoin);
  EXPECT_EQ(out.responses[0].last_joined, 1);
}

TEST_F(CoordinatorTest, CacheHitsAndStaleHits) {
  ResponseCache cache(4);
  Coordinator c(Config(2), &cache);
  Response single;
  single.op = Op::kAllreduce;
  single.names = {"w"};
  single.shapes = {{8}};
  single.dtype = DataType::kFloat32;
  cache.Put(single, 0, /*epoch=*/1);
  int slot = cache.Find(Ar(0, "w", {8}));
  ASSERT_GE(slot, 0);
  EXPECT_LT(cache.Find(Ar(0, "w", {9})), 0);  // other params: a miss
  RequestList hit;
  hit.epoch = 1;
  hit.cache_hits = {static_cast<uint32_t>(slot)};
  c.AddRequestList(0, List({Ar(0, "w", {8})}), At(0));
  c.AddRequestList(1, hit, At(0));
  ResponseList out = c.TakeResponses(At(0));
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_EQ(out.responses[0].names[0], "w");
  // The slot changes in list 2; a hit sent from epoch 1 is stale.
  single.shapes = {{16}};
  cache.Put(single, 0, 2);
  c.AddRequestList(1, hit, At(0));
  out = c.TakeResponses(At(0));
  ASSERT_EQ(out.stale_hits.size(), 1u);
  EXPECT_EQ(out.stale_hits[0], std::make_pair(1, static_cast<uint32_t>(slot)));
}

// The tensors of a group travel as cache slots like any others, and the
// cached entries keep the group: rank 0 still releases the group whole.
TEST_F(CoordinatorTest, GroupedTensorsHitTheCacheAndStayWhole) {
  ResponseCache cache(8);
  Coordinator c(Config(2), &cache);
  auto member = [](int rank, int k) {
    Request r = Ar(rank, "g_" + std::to_string(k) + "of2", {4});
    r.group = "g_1of2";
    r.group_size = 2;
    return r;
  };
  // The first step goes in full; its fused response fills the cache.
  for (int r = 0; r < 2; ++r)
    c.AddRequestList(r, List({member(r, 1), member(r, 2)}), At(0));
  ResponseList out = c.TakeResponses(At(0));
  ASSERT_EQ(out.responses.size(), 1u);
  const Response& fused = out.responses[0];
  ASSERT_EQ(fused.names.size(), 2u);
  EXPECT_EQ(GroupOf(fused, 1), (TensorGroup{"g_1of2", 2}));
  for (size_t i = 0; i < 2; ++i) cache.Put(fused, i, 1);
  const int s1 = cache.Find(member(1, 1)), s2 = cache.Find(member(1, 2));
  ASSERT_GE(s1, 0);
  ASSERT_GE(s2, 0);
  // Another group (or none) under the same name is not this entry.
  Request other = member(1, 1);
  other.group_size = 3;
  EXPECT_LT(cache.Find(other), 0);
  EXPECT_LT(cache.Find(Ar(1, "g_1of2", {4})), 0);
  EXPECT_EQ(cache.ToRequest(s2, 1).group, "g_1of2");
  // Next step: rank 1 names one member by slot; the group waits for the
  // other, then goes out whole.
  RequestList hit;
  hit.epoch = 1;
  hit.cache_hits = {static_cast<uint32_t>(s1)};
  c.AddRequestList(0, List({member(0, 1), member(0, 2)}), At(1));
  c.AddRequestList(1, hit, At(1));
  EXPECT_TRUE(c.TakeResponses(At(1)).responses.empty());
  hit.cache_hits = {static_cast<uint32_t>(s2)};
  c.AddRequestList(1, hit, At(1));
  out = c.TakeResponses(At(1));
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_EQ(out.responses[0].names.size(), 2u);
}

TEST_F(CoordinatorTest, DifferentControlOpsFailAtOnceNamingBoth) {
  Coordinator c(Config(2), nullptr);
  c.AddRequestList(0, Blocked(Barrier(0)), At(0));
  EXPECT_FALSE(c.ShouldEmit(At(0)));  // rank 1 may still come
  c.AddRequestList(1, Blocked(AddSet(1, {1})), At(0.001));
  // Found at once, failed after the grace period.
  EXPECT_EQ(c.deadlocked().size(), 2u);
  EXPECT_FALSE(c.ShouldEmit(At(0.3)));
  EXPECT_GE(c.NextWake(At(0.3)), At(0.5));
  EXPECT_LE(c.NextWake(At(0.3)), At(0.502));
  ASSERT_TRUE(c.ShouldEmit(At(0.502)));
  ResponseList out = c.TakeResponses(At(0.502));
  ASSERT_EQ(out.responses.size(), 2u);
  for (const Response& r : out.responses) {
    EXPECT_TRUE(r.error);
    EXPECT_NE(r.error_message.find("rank 0 waits in barrier"),
              std::string::npos)
        << r.error_message;
    EXPECT_NE(r.error_message.find("rank 1 waits in add_process_set of "
                                   "ranks [1]"),
              std::string::npos)
        << r.error_message;
  }
  EXPECT_EQ(c.pending(), 0u);
  // The job goes on: the same barrier on both ranks completes.
  c.AddRequestList(0, Blocked(Barrier(0)), At(1));
  c.AddRequestList(1, Blocked(Barrier(1)), At(1));
  out = c.TakeResponses(At(1));
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_FALSE(out.responses[0].error);
}

TEST_F(CoordinatorTest, ControlOpAgainstTensorOpFailsWhenBothBlock) {
  Coordinator c(Config(2), nullptr);
  Request g = Ar(0, "allgather.x", {2});
  g.op = Op::kAllgather;
  c.AddRequestList(0, Blocked(g), At(0));
  c.AddRequestList(1, Blocked(Barrier(1)), At(0));
  ASSERT_EQ(c.deadlocked().size(), 2u);
  ResponseList out = c.TakeResponses(At(1));
  ASSERT_EQ(out.responses.size(), 2u);
  EXPECT_NE(out.responses[0].error_message.find(
                "rank 0 waits in allgather 'allgather.x'"),
            std::string::npos)
      << out.responses[0].error_message;
}

TEST_F(CoordinatorTest, AsyncSubmissionIsNotADeadlock) {
  // Rank 1 submitted the allreduce without waiting on it and computes on;
  // it will reach the barrier rank 0 waits in. Nothing fails.
  Coordinator c(Config(2), nullptr);
  c.AddRequestList(1, List({Ar(1, "a", {2})}), At(0));
  c.AddRequestList(0, Blocked(Barrier(0)), At(0));
  EXPECT_TRUE(c.deadlocked().empty());
  EXPECT_FALSE(c.ShouldEmit(At(0.5)));
  c.AddRequestList(1, Blocked(Barrier(1)), At(1));
  ResponseList out = c.TakeResponses(At(1));
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_FALSE(out.responses[0].error);  // the barrier
}

TEST_F(CoordinatorTest, WaitOnADecidedOperationIsNotCounted) {
  // Rank 1's report that it waits on "a" arrives after "a" was decided (and
  // a new "a" from rank 0 alone is pending): rank 1 never submitted that
  // one, so its report is old news, not a deadlock.
  Coordinator c(Config(2), nullptr);
  RequestList stale;
  stale.waiting_update = true;
  stale.waiting = {Ar(1, "a", {2}).Key()};
  c.AddRequestList(1, stale, At(0));
  c.AddRequestList(0, Blocked(Ar(0, "a", {2})), At(0));
  c.AddRequestList(0, Blocked(Barrier(0)), At(0));
  EXPECT_TRUE(c.deadlocked().empty());
}

TEST_F(CoordinatorTest, ASlowThirdRankIsNotADeadlock) {
  // Rank 0 waits in the global barrier for rank 1, which waits in a barrier
  // of {1, 2} for rank 2, which still computes: it will arrive.
  Coordinator c(Config(3), nullptr);
  c.AddRequestList(0, Blocked(AddSet(0, {1, 2})), At(0));
  c.AddRequestList(1, Blocked(AddSet(1, {1, 2})), At(0));
  c.AddRequestList(2, Blocked(AddSet(2, {1, 2})), At(0));
  ResponseList out = c.TakeResponses(At(0));
  ASSERT_EQ(out.responses.size(), 1u);
  const int set = out.responses[0].set_id;
  EXPECT_EQ(out.responses[0].set_ranks, (std::vector<int32_t>{1, 2}));
  c.AddRequestList(0, Blocked(Barrier(0)), At(1));
  c.AddRequestList(1, Blocked(Barrier(1, set)), At(1));
  EXPECT_TRUE(c.deadlocked().empty());
  c.AddRequestList(2, Blocked(Barrier(2, set)), At(2));
  EXPECT_TRUE(c.deadlocked().empty());
  out = c.TakeResponses(At(2));
  ASSERT_EQ(out.responses.size(), 1u);  // the set's barrier
  EXPECT_FALSE(out.responses[0].error);
}

TEST_F(CoordinatorTest, AWaitThatEndsWithinTheGraceIsNotFailed) {
  // Rank 1 looks blocked in an allreduce rank 0 lacks while rank 0 waits in
  // a barrier; then a thread of rank 1 the engine did not know of yet
  // submits the barrier: no deadlock after all.
  Coordinator c(Config(2), nullptr);
  c.AddRequestList(0, Blocked(Barrier(0)), At(0));
  c.AddRequestList(1, Blocked(Ar(1, "a", {1})), At(0));
  EXPECT_FALSE(c.deadlocked().empty());
  RequestList more = List({Barrier(1)});
  more.waiting_update = true;
  more.waiting = {Ar(1, "a", {1}).Key(), Barrier(1).Key()};
  c.AddRequestList(1, more, At(0.2));
  EXPECT_TRUE(c.deadlocked().empty());
  ResponseList out = c.TakeResponses(At(1));
  ASSERT_EQ(out.responses.size(), 1u);  // the barrier, not an error
  EXPECT_FALSE(out.responses[0].error);
}

TEST_F(CoordinatorTest, JoinAgainstAddProcessSetFails) {
  Coordinator c(Config(2), nullptr);
  c.AddRequestList(0, Blocked(Control(0, Op::kJoin, kJoinTensorName)), At(0));
  c.AddRequestList(1, Blocked(AddSet(1, {0})), At(0));
  ResponseList out = c.TakeResponses(At(1));
  ASSERT_EQ(out.responses.size(), 2u);
  bool join_failed = false;
  for (const Response& r : out.responses) {
    EXPECT_TRUE(r.error);
    join_failed |= r.op == Op::kJoin;
  }
  EXPECT_TRUE(join_failed);
  EXPECT_NE(out.responses[0].error_message.find("rank 0 waits in join"),
            std::string::npos);
}

TEST_F(CoordinatorTest, RemovingDifferentProcessSetsIsAMismatch) {
  Coordinator c(Config(2), nullptr);
  for (int set = 0; set < 2; ++set) {  // ids 1 and 2
    for (int r = 0; r < 2; ++r)
      c.AddRequestList(r, List({AddSet(r, {set})}), At(0));
    ASSERT_EQ(c.TakeResponses(At(0)).responses.size(), 1u);
  }
  for (int r = 0; r < 2; ++r)
    c.AddRequestList(r, List({RemoveSet(r, 1 + r)}), At(1));
  ResponseList out = c.TakeResponses(At(1));
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_TRUE(out.responses[0].error);
  EXPECT_NE(out.responses[0].error_message.find(
                "rank 0 removes process set 1, rank 1 removes process set 2"),
            std::string::npos)
      << out.responses[0].error_message;
  EXPECT_NE(c.Members(1), nullptr);  // both sets are still there
  EXPECT_NE(c.Members(2), nullptr);
}

TEST_F(CoordinatorTest, AddingDifferentProcessSetsIsAMismatch) {
  Coordinator c(Config(3), nullptr);
  c.AddRequestList(0, List({AddSet(0, {0, 1})}), At(0));
  c.AddRequestList(1, List({AddSet(1, {0, 1})}), At(0));
  c.AddRequestList(2, List({AddSet(2, {1, 2})}), At(0));
  ResponseList out = c.TakeResponses(At(0));
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_TRUE(out.responses[0].error);
  EXPECT_NE(out.responses[0].error_message.find(
                "Mismatched add_process_set: rank 0 adds ranks [0, 1], rank 2 "
                "adds ranks [1, 2]"),
            std::string::npos)
      << out.responses[0].error_message;
  EXPECT_EQ(c.Members(1), nullptr);  // nothing was added
}

TEST(ResponseCache, EvictsLeastRecentlyUsed) {
  ResponseCache cache(2);
  Response r;
  r.op = Op::kAllreduce;
  r.shapes = {{1}};
  for (const char* n : {"a", "b"}) {
    r.names = {n};
    cache.Put(r, 0, 1);
  }
  r.names = {"a"};
  cache.Put(r, 0, 2);  // touch a
  r.names = {"c"};
  cache.Put(r, 0, 3);  // evicts b
  EXPECT_GE(cache.Find(Ar(0, "a", {1})), 0);
  EXPECT_LT(cache.Find(Ar(0, "b", {1})), 0);
  EXPECT_GE(cache.Find(Ar(0, "c", {1})), 0);
}

// The version counts changes of content only: what was read from the
// cache holds while it stays the same.
TEST(ResponseCache, VersionMovesWhenContentChangesOnly) {
  ResponseCache cache(2);
  Response r;
  r.op = Op::kAllreduce;
  r.shapes = {{1}};
  uint64_t v = cache.version();
  auto changed = [&] {
    const bool moved = cache.version() != v;
    v = cache.version();
    return moved;
  };
  r.names = {"a"};
  cache.Put(r, 0, 1);
  EXPECT_TRUE(changed()) << "insert";
  cache.Put(r, 0, 2);
  EXPECT_FALSE(changed()) << "the same again";
  const int a = cache.FindTensor(r, 0);
  ASSERT_GE(a, 0);
  EXPECT_TRUE(cache.Refresh(static_cast<uint32_t>(a), r, 0));
  cache.Touch(static_cast<uint32_t>(a));
  EXPECT_FALSE(changed()) << "refresh, touch";
  r.shapes = {{2}};
  cache.Put(r, 0, 3);
  EXPECT_TRUE(changed()) << "a's shape";
  r.reduce_op = ReduceOp::kMax;
  cache.Put(r, 0, 4);
  EXPECT_TRUE(changed()) << "a's op";
  r.names = {"b"};
  cache.Put(r, 0, 5);
  EXPECT_TRUE(changed()) << "insert b";
  r.names = {"c"};
  cache.Put(r, 0, 6);  // evicts a
  EXPECT_TRUE(changed()) << "evict";
  EXPECT_GE(cache.FindTensor(r, 0), 0);
}

// Executing a response that travelled as slots refreshes the slots instead
// of putting each tensor again. Whatever happens to a slot earlier in the
// same list (here an eviction), the cache must end as Put would leave it,
// or the ranks' caches would disagree.
TEST(ResponseCache, RefreshLeavesTheCacheAsPutWould) {
  ResponseCache put(2), refresh(2);
  auto single = [](const char* name) {
    Response r;
    r.op = Op::kAllreduce;
    r.names = {name};
    r.shapes = {{1}};
    return r;
  };
  for (ResponseCache* c : {&put, &refresh})
    for (const char* n : {"x", "y"}) c->Put(single(n), 0, 1);
  const std::vector<uint32_t> x_slots = refresh.SlotsFor(single("x"));
  ASSERT_EQ(x_slots.size(), 1u);
  // y is refreshed by slot while its slot still holds it.
  const int y_slot = refresh.FindTensor(single("y"), 0);
  ASSERT_GE(y_slot, 0);
  EXPECT_TRUE(refresh.Refresh(static_cast<uint32_t>(y_slot), single("y"), 0));
  put.Put(single("y"), 0, 2);
  // A list holding a new tensor z, then x sent as its slot: z evicts x
  // (least recently used), so x's slot no longer holds x.
  for (ResponseCache* c : {&put, &refresh}) c->Put(single("z"), 0, 3);
  put.Put(single("x"), 0, 3);
  EXPECT_FALSE(refresh.Refresh(x_slots[0], single("x"), 0));
  refresh.Put(single("x"), 0, 3);
  for (const char* n : {"x", "y", "z"}) {
    EXPECT_EQ(put.FindTensor(single(n), 0), refresh.FindTensor(single(n), 0))
        << n;
    const int s = put.FindTensor(single(n), 0);
    if (s >= 0) {
      EXPECT_EQ(put.ChangedAt(s), refresh.ChangedAt(s)) << n;
    }
  }
  // A slot holding the tensor with other parameters is not refreshed.
  Response wider = single("x");
  wider.shapes = {{2}};
  const int xs = refresh.FindTensor(single("x"), 0);
  ASSERT_GE(xs, 0);
  EXPECT_FALSE(refresh.Refresh(static_cast<uint32_t>(xs), wider, 0));
}

}  // namespace
}  // namespace horovod
