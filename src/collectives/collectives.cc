#include "collectives/collectives.h"

#include <algorithm>
#include <cstring>

#include "collectives/reduce.h"

namespace horovod {

std::vector<int64_t> Offsets(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> off(sizes.size() + 1, 0);
  for (size_t i = 0; i < sizes.size(); ++i) off[i + 1] = off[i] + sizes[i];
  return off;
}

Communicator::Communicator(Transport* transport, std::vector<int> members,
                           Scratch* scratch, AlgorithmConfig config)
    : transport_(transport),
      members_(std::move(members)),
      scratch_(scratch),
      config_(config) {
  for (size_t i = 0; i < members_.size(); ++i)
    if (members_[i] == transport_->rank()) my_index_ = static_cast<int>(i);
}

Status Communicator::SendRecv(int dst, const void* sbuf, size_t slen, int src,
                              void* rbuf, size_t rlen, size_t chunk,
                              const ChunkFn* on_chunk) {
  return transport_->SendRecv(dst >= 0 ? members_[dst] : -1, sbuf, slen,
                              src >= 0 ? members_[src] : -1, rbuf, rlen, chunk,
                              on_chunk);
}

Status Communicator::SendRecvV(int dst, const iovec* send, size_t nsend,
                               int src, const iovec* recv, size_t nrecv,
                               size_t chunk, const ChunkFn* on_chunk) {
  return transport_->SendRecvV(dst >= 0 ? members_[dst] : -1, send, nsend,
                               src >= 0 ? members_[src] : -1, recv, nrecv,
                               chunk, on_chunk);
}

bool TakesRing(const Communicator& comm, int64_t count, DataType dtype) {
  const int64_t bytes = count * static_cast<int64_t>(DataTypeSize(dtype));
  return comm.size() > 1 && count >= comm.size() &&
         bytes >= comm.config().small_allreduce_bytes;
}

void RingBlocks(int64_t count, int n, std::vector<int64_t>* counts) {
  counts->assign(static_cast<size_t>(n), count / n);
  for (int i = 0; i < count % n; ++i) (*counts)[i] += 1;
}

Status Allreduce(Communicator& comm, void* buf, int64_t count, DataType dtype,
                 ReduceOp op, double postscale) {
  if (TakesRing(comm, count, dtype))
    return RingAllreduce(comm, buf, count, dtype, op, postscale);
  if (comm.size() > 1 && count > 0)
    HVD_RETURN_IF_ERROR(
        RecursiveDoublingAllreduce(comm, buf, count, dtype, op));
  ScaleBuffer(buf, count, dtype, postscale);
  return Status::OK();
}

Status RingReduceScatter(Communicator& comm, void* buf,
                         const std::vector<int64_t>& counts, DataType dtype,
                         ReduceOp op, double postscale) {
  const int n = comm.size(), r = comm.rank();
  if (n == 1) {
    ScaleBuffer(buf, counts[0], dtype, postscale);
    return Status::OK();
  }
  const size_t esize = DataTypeSize(dtype);
  std::vector<int64_t> off = Offsets(counts);
  int64_t max_count = *std::max_element(counts.begin(), counts.end());
  char* base = static_cast<char*>(buf);
  char* incoming = comm.scratch(static_cast<size_t>(max_count) * esize);
  size_t chunk = static_cast<size_t>(comm.config().ring_chunk_bytes);
  chunk = std::max(esize, chunk - chunk % esize);
  const int right = Mod(r + 1, n), left = Mod(r - 1, n);
  for (int s = 0; s < n - 1; ++s) {
    int send_block = Mod(r - s - 1, n), recv_block = Mod(r - s - 2, n);
    char* target = base + off[recv_block] * esize;
    // The last step completes our own block: scale it as it is reduced.
    const double factor = s == n - 2 ? postscale : 1.0;
    ChunkFn reduce = [&](size_t o, size_t len) {
      ReduceOfScaled(target + o, nullptr, target + o, incoming + o,
                     static_cast<int64_t>(len / esize), dtype, op, factor);
    };
    HVD_RETURN_IF_ERROR(comm.SendRecv(
        right, base + off[send_block] * esize, counts[send_block] * esize, left,
        incoming, counts[recv_block] * esize, chunk, &reduce));
  }
  return Status::OK();
}

Status RingAllreduce(Communicator& comm, void* buf, int64_t count,
                     DataType dtype, ReduceOp op, double postscale) {
  const int n = comm.size();
  std::vector<int64_t> counts;
  RingBlocks(count, n, &counts);
  HVD_RETURN_IF_ERROR(
      RingReduceScatter(comm, buf, counts, dtype, op, postscale));
  std::vector<int64_t> bytes(n);
  for (int i = 0; i < n; ++i) bytes[i] = counts[i] * DataTypeSize(dtype);
  std::vector<int64_t> off = Offsets(bytes);
  char* base = static_cast<char*>(buf);
  return RingAllgatherv(comm, base + off[comm.rank()], buf, bytes);
}

Status RecursiveDoublingAllreduce(Communicator& comm, void* buf, int64_t count,
                                  DataType dtype, ReduceOp op) {
  const int n = comm.size(), r = comm.rank();
  const size_t bytes = static_cast<size_t>(count) * DataTypeSize(dtype);
  char* incoming = comm.scratch(bytes);
  int pow2 = 1;
  while (pow2 * 2 <= n) pow2 *= 2;
  const int extra = n - pow2;
  // Fold the ranks beyond a power of two into their even neighbours.
  int vrank;
  if (r < 2 * extra) {
    if (r % 2 == 0) {
      HVD_RETURN_IF_ERROR(comm.SendRecv(r + 1, buf, bytes, -1, nullptr, 0));
      HVD_RETURN_IF_ERROR(comm.SendRecv(-1, nullptr, 0, r + 1, buf, bytes));
      return Status::OK();
    }
    HVD_RETURN_IF_ERROR(comm.SendRecv(-1, nullptr, 0, r - 1, incoming, bytes));
    ReduceInto(buf, incoming, count, dtype, op);
    vrank = r / 2;
  } else {
    vrank = r - extra;
  }
  auto real = [&](int v) { return v < extra ? 2 * v + 1 : v + extra; };
  for (int mask = 1; mask < pow2; mask <<= 1) {
    int peer = real(vrank ^ mask);
    HVD_RETURN_IF_ERROR(comm.SendRecv(peer, buf, bytes, peer, incoming, bytes));
    // Both partners compute a+b from the same two operands: IEEE addition
    // is commutative, so every rank ends bit-identical.
    ReduceInto(buf, incoming, count, dtype, op);
  }
  if (r < 2 * extra)
    HVD_RETURN_IF_ERROR(comm.SendRecv(r - 1, buf, bytes, -1, nullptr, 0));
  return Status::OK();
}

Status RingAllgatherv(Communicator& comm, const void* send, void* recv,
                      const std::vector<int64_t>& bytes) {
  const int n = comm.size(), r = comm.rank();
  std::vector<int64_t> off = Offsets(bytes);
  char* base = static_cast<char*>(recv);
  if (base + off[r] != send && bytes[r] > 0)
    std::memmove(base + off[r], send, bytes[r]);
  const int right = Mod(r + 1, n), left = Mod(r - 1, n);
  for (int s = 0; s < n - 1; ++s) {
    int send_block = Mod(r - s, n), recv_block = Mod(r - s - 1, n);
    HVD_RETURN_IF_ERROR(
        comm.SendRecv(right, base + off[send_block], bytes[send_block], left,
                      base + off[recv_block], bytes[recv_block]));
  }
  return Status::OK();
}

Status BinomialBroadcast(Communicator& comm, void* buf, int64_t bytes,
                         int root) {
  const int n = comm.size();
  if (n == 1 || bytes == 0) return Status::OK();
  const int v = Mod(comm.rank() - root, n);
  // Binomial tree: in round k, members [0, 2^k) send to [2^k, 2^(k+1)).
  int mask = 1;
  while (mask < n) {
    if (v < mask) {
      if (v + mask < n)
        HVD_RETURN_IF_ERROR(
            comm.SendRecv(Mod(v + mask + root, n), buf, bytes, -1, nullptr, 0));
    } else if (v < 2 * mask) {
      HVD_RETURN_IF_ERROR(
          comm.SendRecv(-1, nullptr, 0, Mod(v - mask + root, n), buf, bytes));
    }
    mask <<= 1;
  }
  return Status::OK();
}

Status PairwiseAlltoallv(Communicator& comm, const void* send,
                         const std::vector<int64_t>& send_bytes, void* recv,
                         const std::vector<int64_t>& recv_bytes) {
  const int n = comm.size(), r = comm.rank();
  std::vector<int64_t> soff = Offsets(send_bytes), roff = Offsets(recv_bytes);
  const char* s = static_cast<const char*>(send);
  char* d = static_cast<char*>(recv);
  if (recv_bytes[r] > 0) std::memcpy(d + roff[r], s + soff[r], recv_bytes[r]);
  for (int k = 1; k < n; ++k) {
    int dst = Mod(r + k, n), src = Mod(r - k, n);
    HVD_RETURN_IF_ERROR(comm.SendRecv(dst, s + soff[dst], send_bytes[dst], src,
                                      d + roff[src], recv_bytes[src]));
  }
  return Status::OK();
}

}  // namespace horovod
