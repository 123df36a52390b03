// PieceRing: the ring allreduce run over a fused response's pieces where
// they lie, instead of over a fusion buffer they are packed into and
// unpacked from. Each step gathers the block it sends from the pieces (one
// scatter-gather send), reduces the block it receives from scratch into
// them, and the allgather receives straight into them. The blocks, the
// messages and the order of every reduction's operands are the packed
// ring's (RingAllreduce), so the results are the same bits and members may
// mix the two. Owns the span lists it builds, reused from call to call, so
// a step allocates nothing once they have grown. Used by one thread at a
// time.
#ifndef HOROVOD_COLLECTIVES_PIECE_RING_H_
#define HOROVOD_COLLECTIVES_PIECE_RING_H_

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "collectives/collective_group.h"
#include "collectives/communicator.h"

namespace horovod {

class PieceRing {
 public:
  // Whether a run of `count` elements goes round the ring (RingAllreduce's
  // choice, the same on every member) with operands taken as they are.
  // Prescaled runs are packed: their operands are scaled in a copy.
  static bool Takes(const Communicator& comm, int64_t count,
                    const ReduceArgs& args);

  // Whether no piece's result overlaps another piece's result or operand.
  // The ring writes results while it still reads other pieces, so a run
  // with the same tensor fused twice, or views of one buffer that
  // overlap, is packed instead (whose copy reads every operand first).
  // A local choice: the packed ring sends the same messages.
  bool Apart(const Piece* pieces, size_t n, DataType dtype);

  // The pieces cover elements [0, count) of the run, in offset order;
  // each result is written to its piece's `data`, scaled by
  // args.postscale. Call only when Takes().
  Status Allreduce(Communicator& comm, const Piece* pieces, size_t n,
                   const ReduceArgs& args);

 private:
  // Sets `out` to the spans of elements [begin, end) of the run, in each
  // piece's operand (`operand`) or its result.
  void Spans(int64_t begin, int64_t end, bool operand, std::vector<iovec>* out);
  // Reduces `count` received elements at `incoming`, elements [x, x +
  // count) of the run, into the pieces: result = operand (op) incoming.
  void ReduceIn(int64_t x, int64_t count, const char* incoming,
                const ReduceArgs& args, double factor);

  const Piece* pieces_ = nullptr;
  size_t n_ = 0;
  size_t esize_ = 0;
  std::vector<int64_t> counts_;   // each member's block
  std::vector<int64_t> offsets_;  // where each member's block starts
  std::vector<iovec> send_, recv_;
  // Apart's address ranges: [begin, end) and whether it is written; the
  // results', the operands', and both merged in address order.
  struct Range {
    uintptr_t begin, end;
    bool written;
  };
  std::vector<Range> written_, read_, ranges_;
};

}  // namespace horovod

#endif  // HOROVOD_COLLECTIVES_PIECE_RING_H_
