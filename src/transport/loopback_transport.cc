#include "transport/loopback_transport.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "transport/span_cursor.h"

namespace horovod {

LoopbackFabric::LoopbackFabric(int size, double timeout_s)
    : size_(size), timeout_s_(timeout_s) {
  for (int i = 0; i < size * size; ++i)
    pipes_.push_back(std::make_unique<Pipe>());
}

void LoopbackFabric::Abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(reason_mu_);
    if (aborted_) return;
    reason_ = reason;
    aborted_ = true;
  }
  // Under each pipe's lock, so no waiter can miss the flag between its
  // check and its sleep.
  for (auto& p : pipes_) {
    std::lock_guard<std::mutex> lock(p->mu);
    p->cv.notify_all();
  }
}

Status LoopbackFabric::AbortedStatus() {
  std::lock_guard<std::mutex> lock(reason_mu_);
  return Status::Aborted(reason_);
}

Status LoopbackTransport::SendRecvV(int dst, const iovec* send, size_t nsend,
                                    int src, const iovec* recv, size_t nrecv,
                                    size_t chunk, const ChunkFn* on_chunk) {
  if (fabric_->aborted_) return fabric_->AbortedStatus();
  SpanCursor out(send, dst < 0 ? 0 : nsend);
  if (out.total() > 0) {
    auto& p = fabric_->pipe(rank_, dst);
    std::lock_guard<std::mutex> lock(p.mu);
    out.Advance(out.total(), [&](char* b, size_t len) {
      p.bytes.insert(p.bytes.end(), b, b + len);
    });
    p.cv.notify_all();
  }
  SpanCursor in(recv, src < 0 ? 0 : nrecv);
  const size_t rlen = in.total();
  if (rlen > 0) {
    auto& p = fabric_->pipe(src, rank_);
    if (chunk == 0) chunk = rlen;
    size_t got = 0;
    while (got < rlen) {
      size_t want = std::min(chunk, rlen - got);
      {
        std::unique_lock<std::mutex> lock(p.mu);
        const bool ready = p.cv.wait_for(
            lock, std::chrono::duration<double>(fabric_->timeout_s_),
            [&] { return p.bytes.size() >= want || fabric_->aborted_; });
        if (fabric_->aborted_) return fabric_->AbortedStatus();
        if (!ready)
          return Status::Timeout("loopback receive from rank " +
                                 std::to_string(src) + " timed out");
        in.Advance(want, [&](char* b, size_t len) {
          std::copy(p.bytes.begin(), p.bytes.begin() + len, b);
          p.bytes.erase(p.bytes.begin(), p.bytes.begin() + len);
        });
      }
      if (on_chunk) (*on_chunk)(got, want);
      got += want;
    }
  }
  return Status::OK();
}

}  // namespace horovod
