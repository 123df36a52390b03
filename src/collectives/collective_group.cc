#include "collectives/collective_group.h"

#include <cstring>

#include "collectives/reduce.h"

namespace horovod {

Status CollectiveGroup::Allreduce(void* buf, int64_t count, DataType dtype,
                                  ReduceOp op, double postscale) {
  const Piece whole{buf, 0, count};
  return Allreduce(&whole, 1, ReduceArgs{dtype, op, 1.0, postscale});
}

PackedRun::PackedRun(const Piece* pieces, size_t n, DataType dtype,
                     Scratch* fusion, const PhaseFn* on_phase)
    : pieces_(pieces),
      n_(n),
      esize_(DataTypeSize(dtype)),
      count_(n == 0 ? 0 : pieces[n - 1].offset + pieces[n - 1].count),
      on_phase_(on_phase) {
  if (n_ <= 1) {
    buf_ = n_ == 0 ? nullptr : static_cast<char*>(pieces[0].data);
    if (n_ == 1 && pieces[0].src != nullptr && count_ > 0)
      std::memcpy(buf_, pieces[0].src, static_cast<size_t>(count_) * esize_);
    return;
  }
  if (on_phase_ != nullptr) (*on_phase_)("", "MEMCPY_IN_FUSION_BUFFER");
  buf_ = fusion->Get(static_cast<size_t>(count_) * esize_);
  for (size_t i = 0; i < n_; ++i) {
    const Piece& p = pieces_[i];
    const void* from = p.src != nullptr ? p.src : p.data;
    if (p.count > 0)
      std::memcpy(buf_ + p.offset * esize_, from,
                  static_cast<size_t>(p.count) * esize_);
  }
}

void PackedRun::Unpack() const {
  if (n_ <= 1) return;
  if (on_phase_ != nullptr) (*on_phase_)("", "MEMCPY_OUT_FUSION_BUFFER");
  for (size_t i = 0; i < n_; ++i) {
    const Piece& p = pieces_[i];
    if (p.count > 0)
      std::memcpy(p.data, buf_ + p.offset * esize_,
                  static_cast<size_t>(p.count) * esize_);
  }
}

}  // namespace horovod
