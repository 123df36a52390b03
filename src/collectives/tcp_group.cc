#include "collectives/tcp_group.h"

#include <cstring>
#include <utility>

#include "collectives/collectives.h"

namespace horovod {

TcpGroup::TcpGroup(Communicator comm, Scratch* fusion)
    : comm_(std::move(comm)), fusion_(fusion) {}

const char* TcpGroup::kind() const {
  return comm_.size() == 1 ? "LOCAL_" : "TCP_";
}

Status TcpGroup::Allreduce(const Piece* pieces, size_t n,
                           const ReduceArgs& args, const PhaseFn* on_phase) {
  if (comm_.size() == 1 && args.prescale == 1.0 && args.postscale == 1.0) {
    // Each piece is its own result: packing a fused run into the fusion
    // buffer and back would only move its bytes twice. (Scaled runs are
    // packed: a tensor fused twice must be scaled once.)
    if (on_phase != nullptr) (*on_phase)(kind(), "ALLREDUCE");
    const size_t esize = DataTypeSize(args.dtype);
    for (size_t i = 0; i < n; ++i) {
      const Piece& p = pieces[i];
      if (p.src != nullptr && p.count > 0)
        std::memcpy(p.data, p.src, static_cast<size_t>(p.count) * esize);
    }
    return Status::OK();
  }
  const int64_t total = n == 0 ? 0 : pieces[n - 1].offset + pieces[n - 1].count;
  if (PieceRing::Takes(comm_, total, args) &&
      ring_.Apart(pieces, n, args.dtype)) {
    if (on_phase != nullptr) (*on_phase)(kind(), "ALLREDUCE");
    return ring_.Allreduce(comm_, pieces, n, args);
  }
  return AllreducePacked(
      pieces, n, args, fusion_, on_phase, [&](char* buf, int64_t count) {
        if (on_phase != nullptr) (*on_phase)(kind(), "ALLREDUCE");
        return horovod::Allreduce(comm_, buf, count, args.dtype, args.op,
                                  args.postscale);
      });
}

Status TcpGroup::ReduceScatter(void* buf, const std::vector<int64_t>& counts,
                               DataType dtype, ReduceOp op) {
  return RingReduceScatter(comm_, buf, counts, dtype, op);
}

Status TcpGroup::Allgatherv(const void* send, void* recv,
                            const std::vector<int64_t>& bytes) {
  return RingAllgatherv(comm_, send, recv, bytes);
}

Status TcpGroup::Broadcast(void* buf, int64_t bytes, int root) {
  return BinomialBroadcast(comm_, buf, bytes, root);
}

Status TcpGroup::Alltoallv(const void* send,
                           const std::vector<int64_t>& send_bytes, void* recv,
                           const std::vector<int64_t>& recv_bytes,
                           int64_t max_pair_bytes) {
  (void)max_pair_bytes;  // pairwise exchanges need no staging space
  return PairwiseAlltoallv(comm_, send, send_bytes, recv, recv_bytes);
}

}  // namespace horovod
