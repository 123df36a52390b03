#include "runtime/request_check.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "collectives/adasum.h"
#include "coordination/wire.h"

namespace horovod {

Status CheckRequest(OpType op, const TensorView& t, const CollectiveArgs& args,
                    const std::vector<int>& members, int rank, Request* r) {
  // Built only for an error: this runs for every tensor enqueued.
  auto where = [&] {
    return " (rank " + std::to_string(rank) + ", tensor '" + r->name + "')";
  };
  // Past the wire's bounds the peers could not decode the request: refused
  // here, naming the start of a name too long to repeat whole.
  if (r->name.size() > kWireMaxName || r->group.size() > kWireMaxName)
    return Status::InvalidArgument(
        "tensor name of " + std::to_string(r->name.size()) +
        " bytes is longer than the " + std::to_string(kWireMaxName) +
        " the engine's messages carry (rank " + std::to_string(rank) +
        ", tensor '" + r->name.substr(0, 64) + "...')");
  if (t.shape.size() > kWireMaxDims)
    return Status::InvalidArgument(
        "tensor of " + std::to_string(t.shape.size()) +
        " dimensions; the engine's messages carry at most " +
        std::to_string(kWireMaxDims) + where());
  if (t.device != -1)
    return Status::InvalidArgument(
        "only CPU tensors are supported by this build" + where());
  for (int64_t d : t.shape)
    if (d < 0) return Status::InvalidArgument("negative dimension" + where());
  if (t.data == nullptr && t.NumElements() > 0)
    return Status::InvalidArgument("tensor has no data" + where());
  if (t.input != nullptr && op != OpType::kAllreduce)
    return Status::InvalidArgument(
        std::string("a separate input tensor is supported by allreduce "
                    "only, not ") +
        OpTypeName(op) + where());
  const bool reduces = op == OpType::kAllreduce || op == OpType::kReducescatter;
  // Checked here for every op (each request carries the field), not only
  // where a peer's request is decoded: there an unknown op is a malformed
  // message, which ends the job.
  if (args.op > ReduceOp::kProduct)
    return Status::InvalidArgument(
        "unknown reduce op " + std::to_string(static_cast<int>(args.op)) +
        "; the ops are Average (0), Sum (1), Adasum (2), Min (3), Max (4) "
        "and Product (5)" +
        where());
  if (reduces && args.op == ReduceOp::kAdasum) {
    if (op != OpType::kAllreduce)
      return Status::InvalidArgument(
          "op=Adasum supports allreduce only, not reducescatter" + where());
    if (!AdasumSupports(t.dtype))
      return Status::InvalidArgument(
          std::string("op=Adasum needs float16, bfloat16, float32 or "
                      "float64 tensors, not ") +
          DataTypeName(t.dtype) + where());
    const size_t n = members.size();
    if ((n & (n - 1)) != 0)
      return Status::InvalidArgument(
          "op=Adasum needs a power-of-two number of ranks; the process set "
          "has " +
          std::to_string(n) + where());
  }
  if (t.dtype == DataType::kBool &&
      (op == OpType::kReducescatter ||
       (op == OpType::kAllreduce && args.op == ReduceOp::kAverage)))
    return Status::InvalidArgument(
        std::string("bool tensors support allreduce with Sum, Min, Max or "
                    "Product, allgather, broadcast and alltoall; not ") +
        (op == OpType::kReducescatter ? "reducescatter" : "Average") + where());
  // A NaN factor would also fail as a mismatch between ranks, NaN being
  // unequal to itself.
  if (reduces &&
      (!std::isfinite(args.prescale) || !std::isfinite(args.postscale)))
    return Status::InvalidArgument(
        "scale factors must be finite numbers; prescale_factor is " +
        ScaleString(args.prescale) + ", postscale_factor " +
        ScaleString(args.postscale) + where());
  if (reduces && (args.prescale != 1.0 || args.postscale != 1.0) &&
      t.dtype == DataType::kBool)
    return Status::InvalidArgument("bool tensors cannot be scaled" + where());
  if (op == OpType::kBroadcast &&
      std::find(members.begin(), members.end(), args.root) == members.end())
    return Status::InvalidArgument(
        "broadcast root rank " + std::to_string(args.root) +
        " is out of range for a process set of ranks " +
        ShapeString(std::vector<int64_t>(members.begin(), members.end())) +
        where());
  // Each rank's part of these is rows of dim 0, which a scalar lacks.
  if ((op == OpType::kAllgather || op == OpType::kAlltoall ||
       op == OpType::kReducescatter) &&
      t.shape.empty())
    return Status::InvalidArgument(std::string(OpTypeName(op)) +
                                   " needs a tensor of at least one "
                                   "dimension" +
                                   where());
  if (op == OpType::kAlltoall) {
    const int64_t n = static_cast<int64_t>(members.size());
    if (args.splits.empty()) {
      if (t.shape[0] % n != 0)
        return Status::InvalidArgument("alltoall without splits needs dim 0 (" +
                                       std::to_string(t.shape[0]) +
                                       ") divisible by the number of "
                                       "ranks (" +
                                       std::to_string(n) + ")" + where());
      r->splits.assign(n, t.shape[0] / n);
    } else {
      if (static_cast<int64_t>(args.splits.size()) != n)
        return Status::InvalidArgument("alltoall splits have " +
                                       std::to_string(args.splits.size()) +
                                       " entries but the process set has " +
                                       std::to_string(n) + " ranks" + where());
      int64_t sum = 0;
      for (int64_t s : args.splits) {
        if (s < 0)
          return Status::InvalidArgument("negative alltoall split" + where());
        sum += s;
      }
      if (sum != t.shape[0])
        return Status::InvalidArgument("alltoall splits sum to " +
                                       std::to_string(sum) + " but dim 0 is " +
                                       std::to_string(t.shape[0]) + where());
      r->splits = args.splits;
    }
  }
  return Status::OK();
}

}  // namespace horovod
