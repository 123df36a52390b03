// A queue record against a resubmission: which request fields the
// comparison reads, and the cache lines a steady step counts on finding
// them in.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/tensor_queue.h"  // QueuedTensor, Resubmission

namespace horovod {
namespace {

TEST(TensorQueue, ASubmissionRepeatsARequestOnlyWhenEveryFieldIsSame) {
  float x[4];
  const TensorView view{x, DataType::kFloat32, {4}};
  const std::string name = "g";
  const Resubmission s{name, view, ReduceOp::kSum, 0, 1.0, 1.0, 1};
  Request base;  // as the engine builds it for this submission
  base.rank = 1;
  base.name = name;
  base.shape = {4};
  std::vector<Request> changed(15, base);  // each field changed alone
  changed[0].op = Op::kBroadcast;
  changed[1].process_set = 1;
  changed[2].group_size = 2;
  changed[3].rank = 0;
  changed[4].dtype = DataType::kFloat64;
  changed[5].device = 0;
  changed[6].reduce_op = ReduceOp::kAverage;
  changed[7].root = 1;
  changed[8].prescale = 2;
  changed[9].postscale = 0.5;
  changed[10].set_id = 3;
  changed[11].splits = {2, 2};
  changed[12].shape = {2, 2};
  changed[13].shape = {4, 1};
  changed[14].name = "h";
  EXPECT_TRUE(s.Repeats(base));
  for (size_t i = 0; i < changed.size(); ++i)
    EXPECT_FALSE(s.Repeats(changed[i])) << "change " << i;
  // A grouped request always has its group's size: an allreduce is never
  // queued with a group name alone, nor with a new set's ranks, and the
  // comparison reads neither (they lie beyond its cache lines).
  Request grouped = base;
  grouped.group = "grp";
  grouped.group_size = 2;
  EXPECT_FALSE(s.Repeats(grouped));
}

// The name and shape are compared byte for byte, whatever their length: a
// name that differs from the record's in any one byte, or is one byte
// longer or shorter, and a shape that differs in any one dimension, are
// not a repeat.
TEST(TensorQueue, ANameOrShapeDifferingAnywhereIsNoRepeat) {
  float x[4];
  for (size_t len = 1; len <= 80; ++len) {
    std::string name;
    for (size_t i = 0; i < len; ++i) name += static_cast<char>('a' + i % 26);
    TensorView view{x, DataType::kFloat32, {4}};
    const Resubmission s{name, view, ReduceOp::kSum, 0, 1.0, 1.0, 1};
    Request r;
    r.rank = 1;
    r.name = name;
    r.shape = {4};
    ASSERT_TRUE(s.Repeats(r)) << len;
    for (size_t at = 0; at < len; ++at) {
      Request other = r;
      other.name[at] = static_cast<char>(other.name[at] ^ 0x20);
      EXPECT_FALSE(s.Repeats(other)) << "name of " << len << ", byte " << at;
    }
    Request longer = r, shorter = r;
    longer.name += 'z';
    shorter.name.pop_back();
    EXPECT_FALSE(s.Repeats(longer)) << len;
    EXPECT_FALSE(s.Repeats(shorter)) << len;
  }
  const std::string name = "shapes";
  for (size_t rank = 1; rank <= 10; ++rank) {
    TensorView view{x, DataType::kFloat32, std::vector<int64_t>(rank, 3)};
    const Resubmission s{name, view, ReduceOp::kSum, 0, 1.0, 1.0, 1};
    Request r;
    r.rank = 1;
    r.name = name;
    r.shape = view.shape;
    ASSERT_TRUE(s.Repeats(r)) << rank;
    for (size_t d = 0; d < rank; ++d) {
      Request other = r;
      other.shape[d] = int64_t{3} << 40;  // differs in a high byte alone
      EXPECT_FALSE(s.Repeats(other)) << "rank " << rank << ", dim " << d;
    }
  }
}

// What a steady step reads of each record lies on the cache lines it
// counts on.
TEST(TensorQueue, ARecordsHotFieldsShareTheirCacheLines) {
  EXPECT_EQ(alignof(QueuedTensor), 64u);
  const QueuedTensor t;
  const char* base = reinterpret_cast<const char*>(&t);
  auto line = [&](const void* field) {
    return (static_cast<const char*>(field) - base) / 64;
  };
  EXPECT_EQ(line(&t.cache_slot), 0);
  EXPECT_EQ(line(&t.board_carry), 0);
  EXPECT_EQ(line(&t.entry.tensor.data), 1);
  EXPECT_EQ(line(&t.entry.tensor.input), 1);
  EXPECT_EQ(line(&t.entry.handle), 1);
  const Request& r = t.entry.request;
  for (const void* f : {static_cast<const void*>(&r.rank),
                        static_cast<const void*>(&r.postscale),
                        static_cast<const void*>(&r.name)})
    EXPECT_EQ(line(f), 2);
  EXPECT_EQ(line(&r.shape), 3);
  // The last field compared ends on the fourth line too.
  EXPECT_EQ(line(reinterpret_cast<const char*>(&r.splits + 1) - 1), 3);
}

}  // namespace
}  // namespace horovod
