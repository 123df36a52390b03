// CheckRequest without an engine: what is refused names the value, the rank
// and the tensor; what passes may have its alltoall splits filled in.
#include "runtime/request_check.h"

#include <gtest/gtest.h>

#include <string>

namespace horovod {
namespace {

Status Check(OpType op, const TensorView& t, const CollectiveArgs& args,
             const std::vector<int>& members, Request* r = nullptr) {
  Request local;
  if (r == nullptr) r = &local;
  r->name = "allreduce.x";
  return CheckRequest(op, t, args, members, 1, r);
}

void ExpectRefused(const Status& st, const std::string& what) {
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find(what), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("(rank 1, tensor 'allreduce.x')"),
            std::string::npos)
      << st.message();
}

TEST(CheckRequest, RefusesWhatCannotRunNamingRankAndTensor) {
  float f[4] = {};
  int32_t i[4] = {};
  CollectiveArgs args;
  ExpectRefused(
      Check(OpType::kAllreduce, {f, DataType::kFloat32, {2, -1}}, args, {0, 1}),
      "negative dimension");
  ExpectRefused(
      Check(OpType::kAllgather, {f, DataType::kFloat32, {}}, args, {0, 1}),
      "allgather needs a tensor of at least one dimension");
  args.root = 5;
  ExpectRefused(
      Check(OpType::kBroadcast, {f, DataType::kFloat32, {4}}, args, {0, 1}),
      "broadcast root rank 5 is out of range");
  args = CollectiveArgs();
  args.op = ReduceOp::kAdasum;
  ExpectRefused(
      Check(OpType::kAllreduce, {f, DataType::kFloat32, {4}}, args, {0, 1, 2}),
      "power-of-two number of ranks; the process set has 3");
  ExpectRefused(
      Check(OpType::kAllreduce, {i, DataType::kInt32, {4}}, args, {0, 1}),
      "not int32");
  ExpectRefused(
      Check(OpType::kReducescatter, {f, DataType::kFloat32, {4}}, args, {0, 1}),
      "allreduce only");
  EXPECT_TRUE(
      Check(OpType::kAllreduce, {f, DataType::kFloat32, {4}}, args, {0, 1})
          .ok());
}

TEST(CheckRequest, UnknownReduceOpsAreRefusedBeforeTheyReachThePeers) {
  float f[4] = {};
  CollectiveArgs args;
  args.op = ReduceOpFromInt(99);
  ExpectRefused(
      Check(OpType::kAllreduce, {f, DataType::kFloat32, {4}}, args, {0, 1}),
      "unknown reduce op 99; the ops are Average (0), Sum (1)");
  ExpectRefused(
      Check(OpType::kReducescatter, {f, DataType::kFloat32, {4}}, args, {0, 1}),
      "unknown reduce op 99");
  // Ints past uint8 do not wrap onto a real op.
  EXPECT_EQ(ReduceOpFromInt(-1), ReduceOpFromInt(255));
  EXPECT_EQ(ReduceOpFromInt(257), ReduceOpFromInt(255));
  EXPECT_EQ(ReduceOpFromInt(5), ReduceOp::kProduct);
  args.op = ReduceOpFromInt(256);
  ExpectRefused(
      Check(OpType::kAllreduce, {f, DataType::kFloat32, {4}}, args, {0, 1}),
      "unknown reduce op 255");
  // Every request carries the field, so ops that reduce nothing check it
  // too.
  ExpectRefused(
      Check(OpType::kAllgather, {f, DataType::kFloat32, {4}}, args, {0, 1}),
      "unknown reduce op 255");
  args.op = ReduceOp::kSum;
  EXPECT_TRUE(
      Check(OpType::kAllgather, {f, DataType::kFloat32, {4}}, args, {0, 1})
          .ok());
}

TEST(CheckRequest, AlltoallSplitsAreCheckedAndFilledIn) {
  float f[6] = {};
  CollectiveArgs args;
  Request r;
  ASSERT_TRUE(
      Check(OpType::kAlltoall, {f, DataType::kFloat32, {6}}, args, {0, 1}, &r)
          .ok());
  EXPECT_EQ(r.splits, (std::vector<int64_t>{3, 3}));
  args.splits = {1, 4};
  ExpectRefused(
      Check(OpType::kAlltoall, {f, DataType::kFloat32, {6}}, args, {0, 1}),
      "alltoall splits sum to 5 but dim 0 is 6");
  args.splits = {2, 4};
  ASSERT_TRUE(
      Check(OpType::kAlltoall, {f, DataType::kFloat32, {6}}, args, {0, 1}, &r)
          .ok());
  EXPECT_EQ(r.splits, (std::vector<int64_t>{2, 4}));
}

}  // namespace
}  // namespace horovod
