// CheckRequest without an engine: what is refused names the value, the rank
// and the tensor; what passes may have its alltoall splits filled in.
#include "runtime/request_check.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "coordination/wire.h"

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

TEST(CheckRequest, ScalarsToReducescatterAndFactorsNotFiniteAreRefused) {
  float f[4] = {};
  CollectiveArgs args;
  ExpectRefused(
      Check(OpType::kReducescatter, {f, DataType::kFloat32, {}}, args, {0, 1}),
      "reducescatter needs a tensor of at least one dimension");
  // NaN, unequal to itself, would otherwise fail as a mismatch between
  // ranks that passed the same factor.
  args.prescale = std::nan("");
  ExpectRefused(
      Check(OpType::kAllreduce, {f, DataType::kFloat32, {4}}, args, {0, 1}),
      "scale factors must be finite numbers; prescale_factor is nan, "
      "postscale_factor 1");
  args.prescale = 0.5;
  args.postscale = -INFINITY;
  ExpectRefused(
      Check(OpType::kReducescatter, {f, DataType::kFloat32, {4}}, args, {0, 1}),
      "prescale_factor is 0.5, postscale_factor -inf");
  args.postscale = 2.0;
  EXPECT_TRUE(
      Check(OpType::kAllreduce, {f, DataType::kFloat32, {4}}, args, {0, 1})
          .ok());
}

TEST(CheckRequest, NamesAndShapesPastTheWiresBoundsAreRefused) {
  // The peers refuse a request past the wire's bounds as a malformed
  // message, which ends the job; at the bounds it passes and decodes.
  float f[1] = {};
  CollectiveArgs args;
  std::vector<int64_t> shape(kWireMaxDims, 1);
  Request r;
  r.rank = 1;
  r.name = std::string(kWireMaxName, 'n');
  r.shape = shape;
  const TensorView t{f, DataType::kFloat32, shape};
  ASSERT_TRUE(CheckRequest(OpType::kAllreduce, t, args, {0, 1}, 1, &r).ok());
  RequestList list, back;
  list.requests.push_back(r);
  EXPECT_TRUE(DecodeRequestList(EncodeRequestList(list), 2, &back).ok());

  r.name.push_back('n');
  list.requests[0] = r;
  EXPECT_FALSE(DecodeRequestList(EncodeRequestList(list), 2, &back).ok());
  Status st = CheckRequest(OpType::kAllreduce, t, args, {0, 1}, 1, &r);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("tensor name of 4097 bytes is longer than the "
                              "4096 the engine's messages carry (rank 1, "
                              "tensor 'nnnn"),
            std::string::npos)
      << st.message();
  EXPECT_LT(st.message().size(), 300u);  // the name is not repeated whole
  r.name = "allreduce.x";
  r.group = std::string(kWireMaxName + 1, 'g');
  EXPECT_EQ(CheckRequest(OpType::kAllreduce, t, args, {0, 1}, 1, &r).code(),
            StatusCode::kInvalidArgument);

  shape.push_back(1);
  ExpectRefused(
      Check(OpType::kAllgather, {f, DataType::kFloat32, shape}, args, {0, 1}),
      "tensor of 65 dimensions; the engine's messages carry at most "
      "64");
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
