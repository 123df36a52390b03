#include "coordination/wire.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "../fuzz/fuzz_cache.h"

namespace horovod {
namespace {

Request MakeRequest(int rank, const std::string& name) {
  Request r;
  r.rank = rank;
  r.op = Op::kAlltoall;
  r.name = name;
  r.dtype = DataType::kBFloat16;
  r.reduce_op = ReduceOp::kMax;
  r.root = 1;
  r.process_set = 2;
  r.prescale = 0.5;
  r.postscale = 3.0;
  r.shape = {4, 0, 7};
  r.splits = {1, 3};
  r.group_size = 2;
  r.group = "g";
  r.refusal = "a dtype it has no kernel for";
  return r;
}

TEST(Wire, RequestListRoundTrip) {
  RequestList in;
  in.epoch = 42;
  in.shutdown = true;
  in.requests = {MakeRequest(1, "a"), MakeRequest(1, "b")};
  in.cache_hits = {3, 9};
  in.abort_reason = "why";
  RequestList out;
  ASSERT_TRUE(DecodeRequestList(EncodeRequestList(in), 2, &out).ok());
  EXPECT_EQ(out.epoch, 42u);
  EXPECT_TRUE(out.shutdown);
  ASSERT_EQ(out.requests.size(), 2u);
  const Request& r = out.requests[1];
  EXPECT_EQ(r.name, "b");
  EXPECT_EQ(r.dtype, DataType::kBFloat16);
  EXPECT_EQ(r.reduce_op, ReduceOp::kMax);
  EXPECT_EQ(r.shape, (std::vector<int64_t>{4, 0, 7}));
  EXPECT_EQ(r.splits, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(r.prescale, 0.5);
  EXPECT_EQ(r.group, "g");
  EXPECT_EQ(r.refusal, "a dtype it has no kernel for");
  EXPECT_EQ(out.cache_hits, (std::vector<uint32_t>{3, 9}));
  EXPECT_EQ(out.abort_reason, "why");
}

TEST(Wire, ResponseListRoundTripAndCacheCompression) {
  Response resp;
  resp.op = Op::kAllreduce;
  resp.names = {"x", "y"};
  resp.shapes = {{2, 3}, {5}};
  resp.dtype = DataType::kFloat32;
  ResponseList in;
  in.responses = {resp};
  in.stale_hits = {{1, 4}};
  ResponseCache cache(8);
  std::string plain = EncodeResponseList(in, &cache);
  ResponseList out;
  ASSERT_TRUE(DecodeResponseList(plain, 2, &cache, &out).ok());
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_EQ(out.responses[0].names, resp.names);
  EXPECT_EQ(out.responses[0].shapes, resp.shapes);
  EXPECT_EQ(out.stale_hits, in.stale_hits);
  // Once both tensors are cached the response travels as two slot numbers.
  for (size_t i = 0; i < 2; ++i) cache.Put(resp, i, 1);
  std::string compressed = EncodeResponseList(in, &cache);
  EXPECT_LT(compressed.size(), plain.size());
  ResponseList out2;
  ASSERT_TRUE(DecodeResponseList(compressed, 2, &cache, &out2).ok());
  EXPECT_EQ(out2.responses[0].names, resp.names);
  EXPECT_EQ(out2.responses[0].shapes, resp.shapes);
}

TEST(Wire, ControlOpsCarryTheirOwnFields) {
  RequestList in;
  Request add;
  add.op = Op::kAddProcessSet;
  add.set_ranks = {0, 2, 3};
  Request remove;
  remove.op = Op::kRemoveProcessSet;
  remove.set_id = 5;
  in.requests = {add, remove};
  RequestList out;
  ASSERT_TRUE(DecodeRequestList(EncodeRequestList(in), 4, &out).ok());
  EXPECT_EQ(out.requests[0].op, Op::kAddProcessSet);
  EXPECT_EQ(out.requests[0].set_ranks, (std::vector<int32_t>{0, 2, 3}));
  EXPECT_EQ(out.requests[1].set_id, 5);
  EXPECT_TRUE(out.requests[1].set_ranks.empty());
  // A set's ranks must exist in the job and be listed once, ascending.
  for (std::vector<int32_t> bad :
       {std::vector<int32_t>{0, 4}, {-1, 2}, {2, 1}, {1, 1}}) {
    in.requests[0].set_ranks = bad;
    EXPECT_FALSE(DecodeRequestList(EncodeRequestList(in), 4, &out).ok());
  }
  in.requests = {remove};
  in.requests[0].set_id = -1;
  EXPECT_FALSE(DecodeRequestList(EncodeRequestList(in), 4, &out).ok());

  ResponseList rin;
  Response added;
  added.op = Op::kAddProcessSet;
  added.names = {"__add_process_set__"};
  added.shapes = {{}};
  added.set_id = 3;
  added.set_ranks = {1, 2};
  Response join;
  join.op = Op::kJoin;
  join.names = {"__join__"};
  join.shapes = {{}};
  join.last_joined = 3;
  rin.responses = {added, join};
  ResponseList rout;
  ASSERT_TRUE(
      DecodeResponseList(EncodeResponseList(rin, nullptr), 4, nullptr, &rout)
          .ok());
  EXPECT_EQ(rout.responses[0].set_id, 3);
  EXPECT_EQ(rout.responses[0].set_ranks, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(rout.responses[1].last_joined, 3);
  // The last rank to join is a rank of the job.
  EXPECT_FALSE(
      DecodeResponseList(EncodeResponseList(rin, nullptr), 3, nullptr, &rout)
          .ok());
}

TEST(Wire, GroupsTravelPerTensor) {
  Response resp;
  resp.op = Op::kAllreduce;
  resp.names = {"a", "g_1of2", "g_2of2"};
  resp.shapes = {{1}, {2}, {3}};
  resp.groups = {TensorGroup(), {"g_1of2", 2}, {"g_1of2", 2}};
  ResponseList in;
  in.responses = {resp};
  ResponseList out;
  ASSERT_TRUE(
      DecodeResponseList(EncodeResponseList(in, nullptr), 2, nullptr, &out)
          .ok());
  EXPECT_EQ(out.responses[0].groups, resp.groups);
  // Cached, the slots bring their groups back.
  ResponseCache cache(8);
  for (size_t i = 0; i < 3; ++i) cache.Put(resp, i, 1);
  std::string slots = EncodeResponseList(in, &cache);
  ASSERT_TRUE(DecodeResponseList(slots, 2, &cache, &out).ok());
  EXPECT_EQ(out.responses[0].groups, resp.groups);
  EXPECT_EQ(out.responses[0].names, resp.names);
  // One group per name or none; a size is never negative.
  resp.groups.pop_back();
  in.responses = {resp};
  EXPECT_FALSE(
      DecodeResponseList(EncodeResponseList(in, nullptr), 2, nullptr, &out)
          .ok());
  resp.groups.push_back({"g", -1});
  in.responses = {resp};
  EXPECT_FALSE(
      DecodeResponseList(EncodeResponseList(in, nullptr), 2, nullptr, &out)
          .ok());
}

// A worker decodes each list into the responses the last one left: what
// it reads must not depend on what was there.
TEST(Wire, DecodingIntoAUsedListGivesWhatAFreshOneGets) {
  ResponseCache cache(8);
  Response fused;
  fused.op = Op::kAllreduce;
  fused.names = {"a.long.gradient.name.0", "b", "c.long.gradient.name.2"};
  fused.shapes = {{2, 3}, {5}, {7, 1, 1}};
  for (size_t i = 0; i < 3; ++i) cache.Put(fused, i, 1);
  Response grouped = fused;
  grouped.names = {"g_1of2", "g_2of2"};
  grouped.shapes = {{1}, {2}};
  grouped.groups = {{"g", 2}, {"g", 2}};
  for (size_t i = 0; i < 2; ++i) cache.Put(grouped, i, 1);
  Response err;
  err.op = Op::kAllgather;
  err.error = true;
  err.error_message = "mismatch";
  err.names = {"e"};
  err.shapes = {{1}};
  err.sizes = {3, 4};
  Response join;
  join.op = Op::kJoin;
  join.names = {kJoinTensorName};
  join.shapes = {{}};
  join.last_joined = 1;
  Response one = fused;
  one.names = {"b"};
  one.shapes = {{5}};
  const std::vector<std::vector<Response>> lists = {
      {fused, grouped}, {err, one}, {grouped, join, fused}, {one}, {fused}};
  ResponseList used;
  for (const auto& responses : lists) {
    ResponseList in;
    in.responses = responses;
    const std::string frame = EncodeResponseList(in, &cache);
    ResponseList fresh;
    ASSERT_TRUE(DecodeResponseList(frame, 2, &cache, &fresh).ok());
    ASSERT_TRUE(DecodeResponseList(frame, 2, &cache, &used).ok());
    ASSERT_EQ(used.responses.size(), responses.size());
    for (size_t i = 0; i < responses.size(); ++i) {
      const Response& a = fresh.responses[i];
      const Response& b = used.responses[i];
      EXPECT_EQ(b.names, responses[i].names);
      EXPECT_EQ(b.names, a.names);
      EXPECT_EQ(b.shapes, a.shapes);
      EXPECT_EQ(b.slots, a.slots);
      EXPECT_EQ(b.groups, a.groups);
      EXPECT_EQ(b.op, a.op);
      EXPECT_EQ(b.error, a.error);
      EXPECT_EQ(b.error_message, a.error_message);
      EXPECT_EQ(b.sizes, a.sizes);
      EXPECT_EQ(b.last_joined, a.last_joined);
    }
  }
}

// A step's fused list, then a one-tensor list, then a barrier's (not
// cached), then the fused list again: the names the short lists did not
// hold wait among the list's spares and come back, with their storage.
TEST(Wire, ListsOfChangingSizeReuseTheirNamesStorage) {
  const size_t kTensors = 40;
  ResponseCache cache(kTensors + 1);
  Response fused;
  fused.op = Op::kAllreduce;
  for (size_t i = 0; i < kTensors; ++i) {
    fused.names.push_back("a.gradient.name.too.long.to.be.short." +
                          std::to_string(i));
    fused.shapes.push_back({4, 4});
  }
  for (size_t i = 0; i < kTensors; ++i) cache.Put(fused, i, 1);
  Response one = fused;
  one.names = {fused.names[0]};
  one.shapes = {fused.shapes[0]};
  Response barrier;
  barrier.op = Op::kBarrier;
  barrier.names = {"barrier.0"};
  barrier.shapes = {{}};
  auto frame = [&](const Response& r) {
    ResponseList in;
    in.responses = {r};
    return EncodeResponseList(in, &cache);
  };
  ResponseList used;
  ASSERT_TRUE(DecodeResponseList(frame(fused), 2, &cache, &used).ok());
  std::set<const char*> storage;
  for (const std::string& name : used.responses[0].names)
    storage.insert(name.data());
  ASSERT_EQ(storage.size(), kTensors);
  ASSERT_TRUE(DecodeResponseList(frame(one), 2, &cache, &used).ok());
  ASSERT_TRUE(DecodeResponseList(frame(barrier), 2, &cache, &used).ok());
  EXPECT_EQ(used.responses[0].names, barrier.names);
  ASSERT_TRUE(DecodeResponseList(frame(fused), 2, &cache, &used).ok());
  ASSERT_EQ(used.responses[0].names, fused.names);
  for (const std::string& name : used.responses[0].names)
    EXPECT_EQ(storage.count(name.data()), 1u) << name;
}

TEST(Wire, RejectsMalformedInput) {
  RequestList in;
  in.requests = {MakeRequest(1, "a")};
  std::string good = EncodeRequestList(in);
  RequestList out;
  // Every truncation fails cleanly.
  for (size_t n = 0; n < good.size(); ++n)
    EXPECT_FALSE(DecodeRequestList(good.substr(0, n), 2, &out).ok()) << n;
  // Trailing garbage, bad magic, rank >= size, dtype 255, huge counts.
  EXPECT_FALSE(DecodeRequestList(good + "x", 2, &out).ok());
  std::string bad = good;
  bad[0] ^= 0x55;
  EXPECT_FALSE(DecodeRequestList(bad, 2, &out).ok());
  EXPECT_FALSE(DecodeRequestList(good, 1, &out).ok());  // rank 1 of 1
  Request r = MakeRequest(0, "a");
  r.dtype = static_cast<DataType>(255);
  in.requests = {r};
  EXPECT_FALSE(DecodeRequestList(EncodeRequestList(in), 2, &out).ok());
  std::string huge = good;
  uint32_t big = 0xFFFFFFFFu;
  std::memcpy(&huge[14], &big, 4);  // the request count
  EXPECT_FALSE(DecodeRequestList(huge, 2, &out).ok());
  ResponseList rl;
  EXPECT_FALSE(DecodeResponseList("junk", 2, nullptr, &rl).ok());
}

// The fuzzer's seeds (tests/fuzz/corpus/wire_fuzz, written by make_seeds)
// must stay well-formed frames, or fuzzing starts outside the decoder: a
// change to the wire format fails here until the seeds are regenerated.
TEST(Wire, FuzzSeedsDecode) {
  const std::filesystem::path dir =
      std::filesystem::path(HVD_SOURCE_DIR) / "tests/fuzz/corpus/wire_fuzz";
  int seeds = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream f(entry.path(), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(f)),
                      std::istreambuf_iterator<char>());
    ASSERT_FALSE(bytes.empty()) << entry.path();
    const int job_size = 1 + (bytes[0] & 0x0f);
    const std::string frame = bytes.substr(1);
    Status st;
    if (bytes[0] & 0x80) {
      ResponseCache cache(8);
      FillFuzzCache(&cache);
      ResponseList l;
      st = DecodeResponseList(frame, job_size, &cache, &l);
    } else {
      RequestList l;
      st = DecodeRequestList(frame, job_size, &l);
    }
    EXPECT_TRUE(st.ok()) << entry.path() << ": " << st.message();
    ++seeds;
  }
  EXPECT_GE(seeds, 8);
}

}  // namespace
}  // namespace horovod
