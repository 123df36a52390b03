// The coordinator's slot lane: cache hits agreed by slot, and the cases
// that move a slot to the per-name table (a full request for its tensor, a
// join, a reported wait, a stall, a list that changes the cache).
#include "coordination/slot_lane.h"

#include <gtest/gtest.h>

#include "coordination/coordinator.h"

namespace horovod {
namespace {

Clock::time_point At(double s) {
  static const Clock::time_point t0 = Clock::now();
  return t0 + std::chrono::duration_cast<Clock::duration>(
                  std::chrono::duration<double>(s));
}

TEST(SlotLane, CountsRanksPerSlotAndForgetsClosedSlots) {
  SlotLane lane(8, 70);  // two words of rank bits per slot
  EXPECT_TRUE(lane.Add(3, 69, 10, At(0)));
  EXPECT_TRUE(lane.Add(3, 0, 11, At(1)));
  EXPECT_FALSE(lane.Add(3, 69, 12, At(2)));  // named twice
  EXPECT_TRUE(lane.Has(3, 69));
  EXPECT_FALSE(lane.Has(3, 1));
  EXPECT_EQ(lane.at(3).order, 10u);  // the first hit's
  EXPECT_EQ(lane.at(3).first_seen, At(0));
  EXPECT_EQ(lane.at(3).count, 2);
  EXPECT_TRUE(lane.Add(5, 1, 13, At(3)));
  EXPECT_EQ(lane.open(), (std::vector<uint32_t>{3, 5}));
  for (int r = 0; r < 70; ++r) lane.Add(5, r, 14, At(4));
  EXPECT_TRUE(lane.IsComplete(5));
  EXPECT_EQ(lane.at(5).complete_at, At(4));
  EXPECT_EQ(lane.complete(), 1u);
  lane.Close(3);
  EXPECT_FALSE(lane.IsOpen(3));
  EXPECT_FALSE(lane.Has(3, 69));
  EXPECT_EQ(lane.open(), (std::vector<uint32_t>{5}));
  lane.Close(5);
  EXPECT_EQ(lane.complete(), 0u);
  EXPECT_TRUE(lane.open().empty());
  lane.Block(2);
  lane.Block(2);
  lane.Unblock(2);
  EXPECT_TRUE(lane.IsBlocked(2));
  lane.Unblock(2);
  EXPECT_FALSE(lane.IsBlocked(2));
}

Request Ar(int rank, const std::string& name, std::vector<int64_t> shape) {
  Request r;
  r.rank = rank;
  r.name = name;
  r.shape = std::move(shape);
  return r;
}

class LaneTest : public ::testing::Test {
 protected:
  LaneTest() : cache_(16) {}
  CoordinatorConfig Config(int size) {
    CoordinatorConfig c;
    c.size = size;
    c.stall_check_s = 1;
    c.stall_shutdown_s = 5;
    return c;
  }
  // Caches float32[4] allreduces under `names`, as an executed list does.
  void Cache(const std::vector<std::string>& names) {
    for (const std::string& n : names) {
      Response r = ResponseFor(Ar(0, n, {4}));
      cache_.Put(r, 0, epoch_);
    }
  }
  uint32_t Slot(const std::string& name) {
    const int s = cache_.Find(Ar(0, name, {4}));
    EXPECT_GE(s, 0) << name;
    return static_cast<uint32_t>(s);
  }
  RequestList Hits(const std::vector<std::string>& names) {
    RequestList l;
    l.epoch = epoch_;
    for (const std::string& n : names) l.cache_hits.push_back(Slot(n));
    return l;
  }
  static RequestList Full(std::vector<Request> rs) {
    RequestList l;
    l.requests = std::move(rs);
    return l;
  }
  ResponseCache cache_;
  uint64_t epoch_ = 1;
};

TEST_F(LaneTest, HitsFromEveryRankGoOutFusedInArrivalOrderWithTheirSlots) {
  Cache({"a", "b", "c"});
  Coordinator c(Config(3), &cache_);
  c.AddRequestList(2, Hits({"c", "a"}), At(0));
  c.AddRequestList(0, Hits({"a", "c", "b"}), At(0));
  c.AddRequestList(1, Hits({"a", "c"}), At(0));
  EXPECT_EQ(c.pending(), 3u);
  EXPECT_FALSE(c.ShouldEmit(At(0)));  // "b" is on its way: wait a cycle
  ASSERT_TRUE(c.ShouldEmit(At(0.01)));
  ResponseList out = c.TakeResponses(At(0.01));
  ASSERT_EQ(out.responses.size(), 1u);
  const Response& r = out.responses[0];
  EXPECT_EQ(r.names, (std::vector<std::string>{"c", "a"}));
  EXPECT_EQ(r.slots, (std::vector<uint32_t>{Slot("c"), Slot("a")}));
  EXPECT_EQ(r.shapes, (std::vector<std::vector<int64_t>>{{4}, {4}}));
  EXPECT_EQ(c.pending(), 1u);
  c.AddRequestList(1, Hits({"b"}), At(0.02));
  c.AddRequestList(2, Hits({"b"}), At(0.02));
  ASSERT_TRUE(c.ShouldEmit(At(0.02)));  // nothing else pending: at once
  out = c.TakeResponses(At(0.02));
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_EQ(out.responses[0].names, std::vector<std::string>{"b"});
  EXPECT_EQ(c.pending(), 0u);
}

TEST_F(LaneTest, AFullRequestForAnOpenSlotIsValidatedAgainstItsHits) {
  Cache({"w"});
  Coordinator c(Config(2), &cache_);
  c.AddRequestList(0, Hits({"w"}), At(0));
  c.AddRequestList(1, Full({Ar(1, "w", {5})}), At(0));  // its shape differs
  ResponseList out = c.TakeResponses(At(0));
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_TRUE(out.responses[0].error);
  EXPECT_NE(
      out.responses[0].error_message.find("rank 0 has [4], rank 1 has [5]"),
      std::string::npos)
      << out.responses[0].error_message;
  // While the table holds the tensor, hits on its slot join it there.
  c.AddRequestList(1, Full({Ar(1, "w", {4})}), At(1));
  c.AddRequestList(0, Hits({"w"}), At(1));
  out = c.TakeResponses(At(1));
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_FALSE(out.responses[0].error);
  EXPECT_EQ(out.responses[0].names, std::vector<std::string>{"w"});
  EXPECT_EQ(c.pending(), 0u);
}

TEST_F(LaneTest, AJoinedRankStandsInForOpenSlots) {
  Cache({"w"});
  Coordinator c(Config(2), &cache_);
  c.AddRequestList(0, Hits({"w"}), At(0));
  Request join = Ar(1, kJoinTensorName, {});
  join.op = Op::kJoin;
  c.AddRequestList(1, Full({join}), At(0));
  ResponseList out = c.TakeResponses(At(0.01));
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_EQ(out.responses[0].names, std::vector<std::string>{"w"});
  EXPECT_FALSE(out.responses[0].error);
}

TEST_F(LaneTest, AnOpenSlotStallsWithItsNameAndMissingRanks) {
  Cache({"w"});
  Coordinator c(Config(3), &cache_);
  c.AddRequestList(0, Hits({"w"}), At(0));
  c.AddRequestList(2, Hits({"w"}), At(0));
  EXPECT_TRUE(c.TakeStallWarnings(At(0.5)).empty());
  EXPECT_LE(c.NextWake(At(0.5)), At(1));
  std::vector<std::string> warnings = c.TakeStallWarnings(At(1.5));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("Tensor 'w' (allreduce) is ready on ranks [0, "
                             "2] and missing on ranks [1]"),
            std::string::npos)
      << warnings[0];
  EXPECT_TRUE(c.ShouldEmit(At(6)));
  ResponseList out = c.TakeResponses(At(6));
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_TRUE(out.responses[0].error);
  EXPECT_NE(out.responses[0].error_message.find("not submitted by ranks [1]"),
            std::string::npos);
}

TEST_F(LaneTest, StallShutdownFailsAnOpenSlotThatWasNeverWarned) {
  Cache({"w"});
  CoordinatorConfig cfg = Config(2);
  cfg.stall_check = false;
  Coordinator c(cfg, &cache_);
  c.AddRequestList(1, Hits({"w"}), At(0));
  EXPECT_FALSE(c.ShouldEmit(At(4)));
  EXPECT_TRUE(c.ShouldEmit(At(5)));
  ResponseList out = c.TakeResponses(At(5));
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_TRUE(out.responses[0].error);
  EXPECT_EQ(c.pending(), 0u);
}

// A list that puts a new tensor in the cache may evict an open slot's
// entry: the slot's hits move to the table first, under their old name.
TEST_F(LaneTest, OpenSlotsOutliveAListThatChangesTheCache) {
  ResponseCache small(1);
  Response a = ResponseFor(Ar(0, "a", {4}));
  small.Put(a, 0, 1);
  Coordinator c(Config(2), &small);
  RequestList hit;
  hit.epoch = 1;
  hit.cache_hits = {0};
  c.AddRequestList(0, hit, At(0));
  c.AddRequestList(0, Full({Ar(0, "b", {4})}), At(0));
  c.AddRequestList(1, Full({Ar(1, "b", {4})}), At(0));
  ResponseList out = c.TakeResponses(At(0.01));
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_EQ(out.responses[0].names, std::vector<std::string>{"b"});
  EXPECT_TRUE(out.responses[0].slots.empty());  // "b" is not cached yet
  small.Put(out.responses[0], 0, 2);            // evicts "a"
  c.AddRequestList(1, Full({Ar(1, "a", {4})}), At(0.02));
  out = c.TakeResponses(At(0.02));
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_EQ(out.responses[0].names, std::vector<std::string>{"a"});
  EXPECT_FALSE(out.responses[0].error);
  EXPECT_EQ(c.pending(), 0u);
}

TEST_F(LaneTest, RanksBlockedOnDifferentSlotsAreADeadlock) {
  Cache({"a", "b"});
  Coordinator c(Config(2), &cache_);
  RequestList l0 = Hits({"a"}), l1 = Hits({"b"});
  l0.waiting_update = l1.waiting_update = true;
  l0.waiting = {TensorKey(0, "a")};
  l1.waiting = {TensorKey(0, "b")};
  c.AddRequestList(0, l0, At(0));
  c.AddRequestList(1, l1, At(0));
  EXPECT_EQ(c.deadlocked(),
            (std::vector<std::string>{TensorKey(0, "a"), TensorKey(0, "b")}));
  ResponseList out = c.TakeResponses(At(1));
  ASSERT_EQ(out.responses.size(), 2u);
  for (const Response& r : out.responses) {
    EXPECT_TRUE(r.error);
    EXPECT_NE(r.error_message.find("can never match"), std::string::npos);
  }
  EXPECT_EQ(c.pending(), 0u);
}

// Rank 0 keeps its response list from step to step: what it takes into the
// used list must be what a fresh list gets, whatever the last step left.
TEST_F(LaneTest, TakingIntoAUsedListGivesWhatAFreshOneGets) {
  Cache({"a.long.gradient.name", "b", "c.long.gradient.name"});
  CoordinatorConfig cfg = Config(2);
  cfg.fusion_threshold = 40;  // two float32[4] tensors fit, not three
  Coordinator fresh(cfg, &cache_), reused(cfg, &cache_);
  ResponseList used;
  auto both = [&](int rank, const RequestList& l, double t) {
    fresh.AddRequestList(rank, l, At(t));
    reused.AddRequestList(rank, l, At(t));
  };
  ResponseList a;
  auto compare = [&](double t) {
    a = fresh.TakeResponses(At(t));
    reused.TakeResponses(At(t), &used);
    ASSERT_EQ(used.responses.size(), a.responses.size()) << t;
    for (size_t i = 0; i < a.responses.size(); ++i) {
      const Response& x = a.responses[i];
      const Response& y = used.responses[i];
      EXPECT_EQ(y.names, x.names) << t;
      EXPECT_EQ(y.shapes, x.shapes) << t;
      EXPECT_EQ(y.slots, x.slots) << t;
      EXPECT_EQ(y.groups, x.groups) << t;
      EXPECT_EQ(y.op, x.op) << t;
      EXPECT_EQ(y.error, x.error) << t;
      EXPECT_EQ(y.error_message, x.error_message) << t;
      EXPECT_EQ(y.last_joined, x.last_joined) << t;
    }
    EXPECT_EQ(used.shutdown, a.shutdown);
  };
  // Three cached tensors: two responses (the threshold), all slots.
  for (int r = 0; r < 2; ++r)
    both(r, Hits({"a.long.gradient.name", "b", "c.long.gradient.name"}), 0);
  compare(0);
  ASSERT_EQ(a.responses.size(), 2u);
  EXPECT_EQ(a.responses[0].slots.size(), 2u);
  // A cached tensor fused with one that is not: no slots travel.
  for (int r = 0; r < 2; ++r) {
    both(r, Hits({"b"}), 1);
    both(r, Full({Ar(r, "new", {4})}), 1);
  }
  compare(1);
  ASSERT_EQ(a.responses.size(), 1u);
  EXPECT_TRUE(a.responses[0].slots.empty());
  // A mismatch (an error, never fused), then a join with one tensor.
  both(0, Full({Ar(0, "m", {4})}), 2);
  both(1, Full({Ar(1, "m", {5})}), 2);
  both(0, Hits({"c.long.gradient.name"}), 2);
  Request join = Ar(1, kJoinTensorName, {});
  join.op = Op::kJoin;
  both(1, Full({join}), 2);
  join.rank = 0;
  both(0, Full({join}), 2);
  compare(2);
  ASSERT_EQ(a.responses.size(), 3u);
  EXPECT_TRUE(a.responses[0].error);
  EXPECT_EQ(a.responses[2].op, Op::kJoin);
  // And the first step again, into what the others left, then a step of
  // fewer tensors than that one's.
  for (int r = 0; r < 2; ++r)
    both(r, Hits({"a.long.gradient.name", "b", "c.long.gradient.name"}), 3);
  compare(3);
  for (int r = 0; r < 2; ++r) both(r, Hits({"b"}), 4);
  compare(4);
  ASSERT_EQ(a.responses.size(), 1u);
  EXPECT_EQ(a.responses[0].names, std::vector<std::string>{"b"});
}

}  // namespace
}  // namespace horovod
