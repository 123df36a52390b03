// CollectiveGroup: the one seam through which the executor moves bytes. A
// group is the members of one process set (renumbered 0..size-1) together
// with the way data travels between them; every collective the engine runs
// is a call on one. Implementations:
//   TcpGroup          point-to-point algorithms over a Transport (any hosts);
//   ShmCollectiveGroup  shared memory, all members on one host;
//   HierarchicalGroup   allreduce within each host, then between hosts, then
//                       back, composed from two groups of the kinds above.
// The executor picks the implementation for a member list in one place; the
// algorithms never ask which one they run on.
//
// Contracts shared by every implementation: every member calls the same
// method with matching sizes (the coordinator has checked them); results are
// bit-identical on every member. A group is used by one thread at a time
// (whichever drives the engine's loop) and does not own the buffers it is
// given. A non-OK status means the link to some member failed.
#ifndef HOROVOD_COLLECTIVES_COLLECTIVE_GROUP_H_
#define HOROVOD_COLLECTIVES_COLLECTIVE_GROUP_H_

#include <horovod/status.h>
#include <horovod/types.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/reduce.h"

namespace horovod {

// `count` elements at `data` that stand at element `offset` of a longer
// run: one tensor of a fused response. The pieces of a run are in offset
// order and cover it without gaps.
struct Piece {
  void* data;
  int64_t offset;
  int64_t count;
  // Out of place: the operand is read from here, the result written to
  // `data` (which is then not read before it is written). Null: in place.
  const void* src = nullptr;
};

// Calls fn(piece, from, to) for each of pieces[0, n)'s non-empty share
// [from, to) of the run's elements [begin, end), in order (run offsets).
template <typename Fn>
void ForEachPieceIn(const Piece* pieces, size_t n, int64_t begin, int64_t end,
                    Fn&& fn) {
  // The first piece that ends past `begin`.
  const Piece* p = std::partition_point(
      pieces, pieces + n,
      [begin](const Piece& q) { return q.offset + q.count <= begin; });
  for (; p < pieces + n && p->offset < end; ++p) {
    const int64_t from = std::max(begin, p->offset);
    const int64_t to = std::min(end, p->offset + p->count);
    if (to > from) fn(*p, from, to);
  }
}

// How an allreduce combines and scales. op: Sum, Min, Max or Product
// (Average is Sum with postscale 1/size; Adasum runs point to point, see
// adasum.h). Each operand is multiplied by `prescale` before it is
// combined and each result by `postscale` (never bool).
struct ReduceArgs {
  DataType dtype;
  ReduceOp op;
  double prescale = 1.0;
  double postscale = 1.0;
};

// Called as each phase of a collective starts, with its timeline activity
// in two parts, how the data moves (a group's kind, or "" for local copies)
// and what it does: ("SHM_", "ALLREDUCE"), ("TCP_", "CROSS_ALLREDUCE"),
// ("", "MEMCPY_IN_FUSION_BUFFER"). Two parts so that observers that do not
// print them build no string.
using PhaseFn = std::function<void(const char* prefix, const char* name)>;

class CollectiveGroup {
 public:
  virtual ~CollectiveGroup() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The global rank of member `index`.
  virtual int global_rank(int index) const = 0;
  // How this group moves data, as timeline activities start: "SHM_",
  // "TCP_", or "LOCAL_" for a group of one.
  virtual const char* kind() const = 0;

  // Reduces a run of `n` pieces across members; each piece's result is
  // written to its `data`.
  virtual Status Allreduce(const Piece* pieces, size_t n,
                           const ReduceArgs& args,
                           const PhaseFn* on_phase = nullptr) = 0;
  // In place over `count` elements at `buf`, the result multiplied by
  // `postscale`.
  Status Allreduce(void* buf, int64_t count, DataType dtype, ReduceOp op,
                   double postscale = 1.0);

  // In place: afterwards member i holds the reduction of its block
  // (elements [offsets[i], offsets[i] + counts[i]) of `buf`).
  virtual Status ReduceScatter(void* buf, const std::vector<int64_t>& counts,
                               DataType dtype, ReduceOp op) = 0;

  // Member i contributes bytes[i] bytes; `recv` receives all contributions
  // concatenated in member order. Ours is read from `send` (which may
  // already sit at its place inside `recv`).
  virtual Status Allgatherv(const void* send, void* recv,
                            const std::vector<int64_t>& bytes) = 0;

  // `root` is a member index.
  virtual Status Broadcast(void* buf, int64_t bytes, int root) = 0;

  // send_bytes[i] go to member i, recv_bytes[i] come from member i; both
  // buffers are packed in member order. `max_pair_bytes` is the most any
  // member sends any other (the same value on every member).
  virtual Status Alltoallv(const void* send,
                           const std::vector<int64_t>& send_bytes, void* recv,
                           const std::vector<int64_t>& recv_bytes,
                           int64_t max_pair_bytes) = 0;
};

// A run of pieces as one contiguous buffer, for algorithms that want one:
// a single piece is used where it lies (after copying in its operand), a
// longer run is packed into `fusion` (grow-only, reused). Reports the
// fusion-buffer copies as phases.
class PackedRun {
 public:
  PackedRun(const Piece* pieces, size_t n, DataType dtype, Scratch* fusion,
            const PhaseFn* on_phase);
  char* data() const { return buf_; }
  int64_t count() const { return count_; }
  // Copies the results back to the pieces (nothing for a single piece).
  void Unpack() const;

 private:
  const Piece* pieces_;
  size_t n_;
  size_t esize_;
  int64_t count_;
  const PhaseFn* on_phase_;
  char* buf_;
};

// An allreduce for algorithms that want one contiguous buffer: packs,
// prescales, runs fn(char* buf, int64_t count), which also applies
// args.postscale (an algorithm can fold it into a pass it makes anyway),
// unpacks. A template so that the data path builds no std::function per
// call.
template <typename Fn>
Status AllreducePacked(const Piece* pieces, size_t n, const ReduceArgs& args,
                       Scratch* fusion, const PhaseFn* on_phase, Fn&& fn) {
  PackedRun run(pieces, n, args.dtype, fusion, on_phase);
  ScaleBuffer(run.data(), run.count(), args.dtype, args.prescale);
  HVD_RETURN_IF_ERROR(fn(run.data(), run.count()));
  run.Unpack();
  return Status::OK();
}

}  // namespace horovod

#endif  // HOROVOD_COLLECTIVES_COLLECTIVE_GROUP_H_
