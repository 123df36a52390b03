#include "collectives/shm_collective_group.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "collectives/reduce.h"
#include "collectives/shm_collectives.h"

namespace horovod {

ShmCollectiveGroup::ShmCollectiveGroup(ShmGroup* shm, AlgorithmConfig config,
                                       Scratch* fusion)
    : shm_(shm), config_(config), fusion_(fusion) {}

bool ShmCollectiveGroup::AnyOverlap(const Piece* pieces, size_t n,
                                    size_t esize) {
  // Frameworks allocate a model's tensors one after another and submit
  // them in that order: pieces reduced in place at ascending addresses are
  // apart when each starts past the one before, with no list to build.
  const char* end = nullptr;
  size_t i = 0;
  for (; i < n; ++i) {
    const size_t bytes = static_cast<size_t>(pieces[i].count) * esize;
    if (bytes == 0) continue;
    const char* begin = static_cast<const char*>(pieces[i].data);
    if (pieces[i].src != nullptr || begin == nullptr ||
        (end != nullptr && begin < end))
      break;
    end = begin + bytes;
  }
  if (i == n) return false;
  ranges_.clear();
  for (size_t i = 0; i < n; ++i) {
    const size_t bytes = static_cast<size_t>(pieces[i].count) * esize;
    if (bytes == 0) continue;
    for (const void* p :
         {static_cast<const void*>(pieces[i].data), pieces[i].src})
      if (p != nullptr) {
        const char* begin = static_cast<const char*>(p);
        ranges_.emplace_back(begin, begin + bytes);
      }
  }
  if (ranges_.size() < 2) return false;
  // In the reverse order, or out of place, the ranges may still come
  // sorted either way: one pass over neighbours answers without sorting.
  auto ascending = [](const auto& a, const auto& b) {
    return a.first < b.first;
  };
  if (std::is_sorted(ranges_.rbegin(), ranges_.rend(), ascending))
    std::reverse(ranges_.begin(), ranges_.end());
  else if (!std::is_sorted(ranges_.begin(), ranges_.end(), ascending))
    std::sort(ranges_.begin(), ranges_.end());
  for (size_t i = 1; i < ranges_.size(); ++i)
    if (ranges_[i].first < ranges_[i - 1].second) return true;
  return false;
}

Status ShmCollectiveGroup::Allreduce(const Piece* pieces, size_t n,
                                     const ReduceArgs& args,
                                     const PhaseFn* on_phase) {
  auto report = [&] {
    if (on_phase != nullptr) (*on_phase)(kind(), "ALLREDUCE");
  };
  const size_t esize = DataTypeSize(args.dtype);
  if (AnyOverlap(pieces, n, esize))
    // Through the fusion buffer every operand is read before any result
    // is written.
    return AllreducePacked(
        pieces, n, args, fusion_, on_phase, [&](char* buf, int64_t count) {
          report();
          const Piece whole{buf, 0, count};
          return ShmAllreduce(*shm_, &whole, 1, args.dtype, args.op,
                              config_.small_allreduce_bytes, args.postscale);
        });
  const Piece* run = pieces;
  if (args.prescale != 1.0) {
    // The operand is scaled where the result goes.
    scaled_.assign(pieces, pieces + n);
    for (Piece& p : scaled_) {
      if (p.src != nullptr && p.count > 0)
        std::memcpy(p.data, p.src, static_cast<size_t>(p.count) * esize);
      p.src = nullptr;
      ScaleBuffer(p.data, p.count, args.dtype, args.prescale);
    }
    run = scaled_.data();
  }
  report();
  return ShmAllreduce(*shm_, run, n, args.dtype, args.op,
                      config_.small_allreduce_bytes, args.postscale);
}

Status ShmCollectiveGroup::ReduceScatter(void* buf,
                                         const std::vector<int64_t>& counts,
                                         DataType dtype, ReduceOp op) {
  return ShmReduceScatter(*shm_, buf, counts, dtype, op);
}

Status ShmCollectiveGroup::Allgatherv(const void* send, void* recv,
                                      const std::vector<int64_t>& bytes) {
  return ShmAllgatherv(*shm_, send, recv, bytes);
}

Status ShmCollectiveGroup::Broadcast(void* buf, int64_t bytes, int root) {
  return ShmBroadcast(*shm_, buf, bytes, root);
}

Status ShmCollectiveGroup::Alltoallv(const void* send,
                                     const std::vector<int64_t>& send_bytes,
                                     void* recv,
                                     const std::vector<int64_t>& recv_bytes,
                                     int64_t max_pair_bytes) {
  return ShmAlltoallv(*shm_, send, send_bytes, recv, recv_bytes,
                      max_pair_bytes);
}

}  // namespace horovod
