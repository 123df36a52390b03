#include "collectives/shm_collectives.h"

#include <algorithm>
#include <cstring>

#include "collectives/collectives.h"
#include "collectives/reduce.h"

namespace horovod {
namespace {

// Length of round `j` of a `total`-long run cut into pieces of `w`.
int64_t RoundLen(int64_t total, int64_t j, int64_t w) {
  return std::clamp<int64_t>(total - j * w, 0, w);
}

int64_t Rounds(int64_t longest, int64_t w) { return (longest + w - 1) / w; }

// A run of elements over pieces, addressed by element offset.
class Run {
 public:
  // `stream`: results that go to a buffer other than their operand's (out
  // of place) are written around the cache (StreamCopy).
  Run(const Piece* pieces, size_t n, size_t esize, bool stream = false)
      : pieces_(pieces), n_(n), esize_(esize), stream_(stream) {}
  int64_t count() const {
    return n_ == 0 ? 0 : pieces_[n_ - 1].offset + pieces_[n_ - 1].count;
  }
  // fn(char* p, int64_t at, int64_t len) for each stretch of elements
  // [start, start + len) that lies in one piece; `at` counts from `start`.
  template <typename Fn>
  void ForEach(int64_t start, int64_t len, Fn&& fn) const {
    ForEachPiece(start, len,
                 [&](const Piece& p, int64_t from, int64_t at, int64_t k) {
                   fn(static_cast<char*>(p.data) + from * esize_, at, k);
                 });
  }
  // fn(piece, from, at, len): `from` counts within the piece.
  template <typename Fn>
  void ForEachPiece(int64_t start, int64_t len, Fn&& fn) const {
    ForEachPieceIn(pieces_, n_, start, start + len,
                   [&](const Piece& p, int64_t from, int64_t to) {
                     fn(p, from - p.offset, from - start, to - from);
                   });
  }
  // Copies the operand's elements [start, start + len) out to `dst` (from
  // a piece's source when it has one), or results in from `src`.
  void CopyOut(int64_t start, int64_t len, char* dst) const {
    ForEachPiece(
        start, len, [&](const Piece& p, int64_t from, int64_t at, int64_t k) {
          const void* s = p.src != nullptr ? p.src : p.data;
          std::memcpy(dst + at * esize_,
                      static_cast<const char*>(s) + from * esize_, k * esize_);
        });
  }
  void CopyIn(int64_t start, int64_t len, const char* src) const {
    ForEachPiece(start, len,
                 [&](const Piece& p, int64_t from, int64_t at, int64_t k) {
                   char* d = static_cast<char*>(p.data) + from * esize_;
                   if (stream_ && p.src != nullptr)
                     StreamCopy(d, src + at * esize_, k * esize_);
                   else
                     std::memcpy(d, src + at * esize_, k * esize_);
                 });
  }
  // Out of place in one pass: the operand's elements [start, start + len)
  // reduced with `other` where the result goes (and finished as Reduce).
  void ReduceOwnWith(int64_t start, int64_t len, const char* other,
                     DataType dtype, ReduceOp op, double factor = 1.0,
                     char* publish = nullptr) const {
    ForEachPiece(
        start, len, [&](const Piece& p, int64_t from, int64_t at, int64_t k) {
          char* d = static_cast<char*>(p.data) + from * esize_;
          const char* a = p.src != nullptr
                              ? static_cast<const char*>(p.src) + from * esize_
                              : d;
          char* pub = publish ? publish + at * esize_ : nullptr;
          if (stream_ && p.src != nullptr && pub != nullptr) {
            // Into the region, which stays in cache, then around the cache
            // into the result.
            ReduceOfScaled(pub, nullptr, a, other + at * esize_, k, dtype, op,
                           factor);
            StreamCopy(d, pub, k * esize_);
            return;
          }
          ReduceOfScaled(d, pub, a, other + at * esize_, k, dtype, op, factor);
        });
  }
  // Reduces `src` into the result elements [start, start + len), then
  // scales them by `factor` and copies them to `publish` (when not null)
  // in the same pass.
  void Reduce(int64_t start, int64_t len, const char* src, DataType dtype,
              ReduceOp op, double factor = 1.0, char* publish = nullptr) const {
    ForEach(start, len, [&](char* p, int64_t at, int64_t k) {
      ReduceOfScaled(p, publish ? publish + at * esize_ : nullptr, p,
                     src + at * esize_, k, dtype, op, factor);
    });
  }

 private:
  const Piece* pieces_;
  size_t n_;
  size_t esize_;
  bool stream_;
};

// Each round, member i reduces (up to w elements of) block i straight from
// the peers' regions; with `gather`, it then scales it by `post`, publishes
// the result and copies every other block's result, making this an
// allreduce.
Status BlockRounds(ShmGroup& g, const Run& run,
                   const std::vector<int64_t>& counts, DataType dtype,
                   ReduceOp op, bool gather, double post = 1.0) {
  const int n = g.size(), me = g.index();
  const size_t esize = DataTypeSize(dtype);
  const int64_t w = static_cast<int64_t>(g.region_bytes() / n / esize);
  const std::vector<int64_t> off = Offsets(counts);
  const int64_t rounds =
      Rounds(*std::max_element(counts.begin(), counts.end()), w);
  auto at = [&](int b, int64_t j) { return off[b] + j * w; };
  auto slot = [&](int member, int b) {
    return g.region(member) + static_cast<size_t>(b * w) * esize;
  };
  // Large rounds keep to one half: one more barrier each, against copies
  // that run at cache speed instead of memory speed.
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  const int64_t round_bytes =
      std::min(total, w * n) * static_cast<int64_t>(esize);
  const bool seal = gather && g.seal_bytes() > 0 &&
                    round_bytes >= static_cast<int64_t>(g.seal_bytes());
  for (int64_t j = 0; j < rounds; ++j) {
    g.NextStep();
    for (int b = 0; b < n; ++b)
      if (b != me)
        run.CopyOut(at(b, j), RoundLen(counts[b], j, w), slot(me, b));
    HVD_RETURN_IF_ERROR(g.Barrier());
    const int64_t mine = RoundLen(counts[me], j, w);
    if (mine > 0) {
      // One member reduces each block, so its order need not agree. With
      // `gather`, the pass over the last peer also scales the block and
      // publishes it.
      const int last = me == n - 1 ? n - 2 : n - 1;
      const double factor = gather ? post : 1.0;
      char* publish = gather ? slot(me, me) : nullptr;
      for (int p = 0; p < n; ++p) {
        if (p == me) continue;
        const bool first = p == (me == 0 ? 1 : 0);
        const double f = p == last ? factor : 1.0;
        char* out = p == last ? publish : nullptr;
        if (first)
          run.ReduceOwnWith(at(me, j), mine, slot(p, me), dtype, op, f, out);
        else
          run.Reduce(at(me, j), mine, slot(p, me), dtype, op, f, out);
      }
    }
    if (!gather) continue;
    HVD_RETURN_IF_ERROR(g.Barrier());
    for (int b = 0; b < n; ++b)
      if (b != me) run.CopyIn(at(b, j), RoundLen(counts[b], j, w), slot(b, b));
    if (seal) HVD_RETURN_IF_ERROR(g.Seal());
  }
  return Status::OK();
}

}  // namespace

Status ShmAllreduce(ShmGroup& g, const Piece* pieces, size_t np, DataType dtype,
                    ReduceOp op, int64_t small_bytes, double postscale) {
  const size_t esize = DataTypeSize(dtype);
  const int64_t count = Run(pieces, np, esize).count();
  if (count == 0) return Status::OK();
  const int n = g.size();
  const int64_t bytes = count * static_cast<int64_t>(esize);
  const Run run(
      pieces, np, esize,
      g.stream_bytes() > 0 && bytes >= static_cast<int64_t>(g.stream_bytes()));
  if (bytes < small_bytes && bytes <= static_cast<int64_t>(g.region_bytes())) {
    g.NextStep();
    run.CopyOut(0, count, g.region(g.index()));
    HVD_RETURN_IF_ERROR(g.Barrier());
    // Every member sums in member order: bit-identical results everywhere.
    run.CopyIn(0, count, g.region(0));
    for (int p = 1; p < n; ++p)
      run.Reduce(0, count, g.region(p), dtype, op,
                 p == n - 1 ? postscale : 1.0);
    return Status::OK();
  }
  std::vector<int64_t> counts(n, count / n);
  for (int i = 0; i < count % n; ++i) counts[i] += 1;
  return BlockRounds(g, run, counts, dtype, op, true, postscale);
}

Status ShmReduceScatter(ShmGroup& g, void* buf,
                        const std::vector<int64_t>& counts, DataType dtype,
                        ReduceOp op) {
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  const Piece whole{buf, 0, total};
  return BlockRounds(g, Run(&whole, 1, DataTypeSize(dtype)), counts, dtype, op,
                     false);
}

Status ShmAllgatherv(ShmGroup& g, const void* send, void* recv,
                     const std::vector<int64_t>& bytes) {
  const int n = g.size(), me = g.index();
  const int64_t w = static_cast<int64_t>(g.region_bytes());
  const std::vector<int64_t> off = Offsets(bytes);
  char* out = static_cast<char*>(recv);
  if (out + off[me] != send && bytes[me] > 0)
    std::memmove(out + off[me], send, bytes[me]);
  const int64_t rounds =
      Rounds(*std::max_element(bytes.begin(), bytes.end()), w);
  for (int64_t j = 0; j < rounds; ++j) {
    g.NextStep();
    int64_t mine = RoundLen(bytes[me], j, w);
    if (mine > 0) std::memcpy(g.region(me), out + off[me] + j * w, mine);
    HVD_RETURN_IF_ERROR(g.Barrier());
    for (int m = 0; m < n; ++m) {
      int64_t len = RoundLen(bytes[m], j, w);
      if (m != me && len > 0)
        std::memcpy(out + off[m] + j * w, g.region(m), len);
    }
  }
  return Status::OK();
}

Status ShmBroadcast(ShmGroup& g, void* buf, int64_t bytes, int root) {
  const int64_t w = static_cast<int64_t>(g.region_bytes());
  char* p = static_cast<char*>(buf);
  for (int64_t j = 0; j < Rounds(bytes, w); ++j) {
    g.NextStep();
    int64_t len = RoundLen(bytes, j, w);
    if (g.index() == root) std::memcpy(g.region(root), p + j * w, len);
    HVD_RETURN_IF_ERROR(g.Barrier());
    if (g.index() != root) std::memcpy(p + j * w, g.region(root), len);
  }
  return Status::OK();
}

Status ShmAlltoallv(ShmGroup& g, const void* send,
                    const std::vector<int64_t>& send_bytes, void* recv,
                    const std::vector<int64_t>& recv_bytes,
                    int64_t max_pair_bytes) {
  const int n = g.size(), me = g.index();
  const int64_t w = static_cast<int64_t>(g.region_bytes() / n / 64 * 64);
  const std::vector<int64_t> soff = Offsets(send_bytes),
                             roff = Offsets(recv_bytes);
  const char* s = static_cast<const char*>(send);
  char* d = static_cast<char*>(recv);
  if (recv_bytes[me] > 0)
    std::memcpy(d + roff[me], s + soff[me], recv_bytes[me]);
  for (int64_t j = 0; j < Rounds(max_pair_bytes, w); ++j) {
    g.NextStep();
    for (int dst = 0; dst < n; ++dst) {
      int64_t len = RoundLen(send_bytes[dst], j, w);
      if (dst != me && len > 0)
        std::memcpy(g.region(me) + dst * w, s + soff[dst] + j * w, len);
    }
    HVD_RETURN_IF_ERROR(g.Barrier());
    for (int src = 0; src < n; ++src) {
      int64_t len = RoundLen(recv_bytes[src], j, w);
      if (src != me && len > 0)
        std::memcpy(d + roff[src] + j * w, g.region(src) + me * w, len);
    }
  }
  return Status::OK();
}

}  // namespace horovod
