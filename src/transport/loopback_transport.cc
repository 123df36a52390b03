#include "transport/loopback_transport.h"

#include <algorithm>
#include <chrono>

namespace horovod {

LoopbackFabric::LoopbackFabric(int size) : size_(size) {
  for (int i = 0; i < size * size; ++i)
    pipes_.push_back(std::make_unique<Pipe>());
}

Status LoopbackTransport::SendRecv(int dst, const void* sbuf, size_t slen,
                                   int src, void* rbuf, size_t rlen,
                                   size_t chunk, const ChunkFn* on_chunk) {
  if (dst >= 0 && slen > 0) {
    auto& p = fabric_->pipe(rank_, dst);
    std::lock_guard<std::mutex> lock(p.mu);
    const char* b = static_cast<const char*>(sbuf);
    p.bytes.insert(p.bytes.end(), b, b + slen);
    p.cv.notify_all();
  }
  if (src >= 0 && rlen > 0) {
    auto& p = fabric_->pipe(src, rank_);
    char* out = static_cast<char*>(rbuf);
    if (chunk == 0) chunk = rlen;
    size_t got = 0;
    while (got < rlen) {
      size_t want = std::min(chunk, rlen - got);
      {
        std::unique_lock<std::mutex> lock(p.mu);
        if (!p.cv.wait_for(lock, std::chrono::seconds(60),
                           [&] { return p.bytes.size() >= want; }))
          return Status::Timeout("loopback receive timed out");
        std::copy(p.bytes.begin(), p.bytes.begin() + want, out + got);
        p.bytes.erase(p.bytes.begin(), p.bytes.begin() + want);
      }
      if (on_chunk) (*on_chunk)(got, want);
      got += want;
    }
  }
  return Status::OK();
}

}  // namespace horovod
