#include "collectives/piece_ring.h"

#include <algorithm>

#include "collectives/collectives.h"
#include "collectives/reduce.h"

namespace horovod {
namespace {

// What one reduce-scatter step's chunks are reduced with.
struct Step {
  int64_t first;  // the received block's first element
  const char* incoming;
  const ReduceArgs* args;
  double factor;
};

}  // namespace

bool PieceRing::Takes(const Communicator& comm, int64_t count,
                      const ReduceArgs& args) {
  return TakesRing(comm, count, args.dtype) && args.prescale == 1.0;
}

namespace {

// Sorts ranges by where they begin, in one pass when they come in address
// order either way: tensors allocated one after another, submitted in that
// order or (gradients, from the backward pass) in reverse.
template <typename Range>
void SortByBegin(std::vector<Range>* v) {
  auto up = [](const Range& a, const Range& b) { return a.begin < b.begin; };
  auto down = [](const Range& a, const Range& b) { return b.begin < a.begin; };
  if (std::is_sorted(v->begin(), v->end(), up)) return;
  if (std::is_sorted(v->begin(), v->end(), down))
    std::reverse(v->begin(), v->end());
  else
    std::sort(v->begin(), v->end(), up);
}

}  // namespace

bool PieceRing::Apart(const Piece* pieces, size_t n, DataType dtype) {
  const size_t esize = DataTypeSize(dtype);
  written_.clear();
  read_.clear();
  for (size_t i = 0; i < n; ++i) {
    const Piece& p = pieces[i];
    if (p.count <= 0) continue;
    const size_t bytes = static_cast<size_t>(p.count) * esize;
    const auto data = reinterpret_cast<uintptr_t>(p.data);
    written_.push_back({data, data + bytes, true});
    if (p.src != nullptr) {
      const auto src = reinterpret_cast<uintptr_t>(p.src);
      read_.push_back({src, src + bytes, false});
    }
  }
  SortByBegin(&written_);
  SortByBegin(&read_);
  ranges_.resize(written_.size() + read_.size());
  std::merge(written_.begin(), written_.end(), read_.begin(), read_.end(),
             ranges_.begin(),
             [](const Range& a, const Range& b) { return a.begin < b.begin; });
  // Operands may overlap each other; a result may overlap nothing.
  uintptr_t written_end = 0, any_end = 0;
  for (const Range& r : ranges_) {
    if (r.begin < written_end || (r.written && r.begin < any_end)) return false;
    any_end = std::max(any_end, r.end);
    if (r.written) written_end = std::max(written_end, r.end);
  }
  return true;
}

void PieceRing::Spans(int64_t begin, int64_t end, bool operand,
                      std::vector<iovec>* out) {
  out->clear();
  ForEachPieceIn(
      pieces_, n_, begin, end, [&](const Piece& p, int64_t from, int64_t to) {
        const void* base = operand && p.src != nullptr ? p.src : p.data;
        out->push_back({const_cast<char*>(static_cast<const char*>(base)) +
                            (from - p.offset) * static_cast<int64_t>(esize_),
                        static_cast<size_t>(to - from) * esize_});
      });
}

void PieceRing::ReduceIn(int64_t x, int64_t count, const char* incoming,
                         const ReduceArgs& args, double factor) {
  ForEachPieceIn(
      pieces_, n_, x, x + count, [&](const Piece& p, int64_t from, int64_t to) {
        const int64_t at = (from - p.offset) * static_cast<int64_t>(esize_);
        const char* a =
            static_cast<const char*>(p.src != nullptr ? p.src : p.data);
        ReduceOfScaled(static_cast<char*>(p.data) + at, nullptr, a + at,
                       incoming + (from - x) * static_cast<int64_t>(esize_),
                       to - from, args.dtype, args.op, factor);
      });
}

Status PieceRing::Allreduce(Communicator& comm, const Piece* pieces, size_t n,
                            const ReduceArgs& args) {
  pieces_ = pieces;
  n_ = n;
  esize_ = DataTypeSize(args.dtype);
  const int size = comm.size(), r = comm.rank();
  const int64_t count = n == 0 ? 0 : pieces[n - 1].offset + pieces[n - 1].count;
  RingBlocks(count, size, &counts_);  // RingAllreduce's blocks
  offsets_.resize(static_cast<size_t>(size) + 1);
  offsets_[0] = 0;
  for (int i = 0; i < size; ++i) offsets_[i + 1] = offsets_[i] + counts_[i];
  auto block = [&](int b) { return offsets_[b + 1] - offsets_[b]; };
  char* incoming = comm.scratch(static_cast<size_t>(block(0)) * esize_);
  size_t chunk = static_cast<size_t>(comm.config().ring_chunk_bytes);
  chunk = std::max(esize_, chunk - chunk % esize_);
  const int right = Mod(r + 1, size), left = Mod(r - 1, size);
  // Reduce-scatter. Every block this member receives is one it has not
  // reduced into yet, so each reduction reads the pieces' operands; the
  // block sent first is still the operand, those sent later are the
  // results of the step before.
  for (int s = 0; s < size - 1; ++s) {
    const int out = Mod(r - s - 1, size), in = Mod(r - s - 2, size);
    Spans(offsets_[out], offsets_[out + 1], s == 0, &send_);
    const iovec into{incoming, static_cast<size_t>(block(in)) * esize_};
    // The last step completes our own block: scale it as it is reduced.
    const double factor = s == size - 2 ? args.postscale : 1.0;
    // Two captures, so the callback is built without an allocation.
    const Step step{offsets_[in], incoming, &args, factor};
    ChunkFn reduce = [this, &step](size_t o, size_t len) {
      ReduceIn(step.first + static_cast<int64_t>(o / esize_),
               static_cast<int64_t>(len / esize_), step.incoming + o,
               *step.args, step.factor);
    };
    HVD_RETURN_IF_ERROR(comm.SendRecvV(right, send_.data(), send_.size(), left,
                                       &into, 1, chunk, &reduce));
  }
  // Allgather: each finished block goes round, received where it belongs.
  for (int s = 0; s < size - 1; ++s) {
    const int out = Mod(r - s, size), in = Mod(r - s - 1, size);
    Spans(offsets_[out], offsets_[out + 1], false, &send_);
    Spans(offsets_[in], offsets_[in + 1], false, &recv_);
    HVD_RETURN_IF_ERROR(comm.SendRecvV(right, send_.data(), send_.size(), left,
                                       recv_.data(), recv_.size()));
  }
  return Status::OK();
}

}  // namespace horovod
