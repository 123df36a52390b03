#include "transport/control_link.h"

#include <poll.h>

#include <algorithm>
#include <cstring>
#include <thread>

namespace horovod {
namespace {

bool HungUp(int fd) {
  if (fd < 0) return true;
  pollfd p = {fd, POLLRDHUP, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

}  // namespace

void SocketLink::Probe() {
  pollfd p = {s_.fd(), POLLIN, 0};
  if (s_.valid() && poll(&p, 1, 0) > 0) readable_ = true;
}

bool ShmLink::HasData() {
  ShmGroup::Ring r = g_->ring(peer_, g_->index());
  return gone_ || r.head->load(std::memory_order_acquire) !=
                      r.tail->load(std::memory_order_relaxed);
}

void ShmLink::Probe() {
  if (!gone_) gone_ = HungUp(s_.fd());
}

// A full ring (sending) or a frame not yet complete (receiving) is brief
// unless the peer is gone or stuck: spin a little, then nap, and keep
// checking for the peer's death and the deadline.
Status ShmLink::Stalled(Deadline deadline, int* attempts) {
  if (++*attempts < 1000) {
    CpuRelax();
    return Status::OK();
  }
  Probe();
  if (gone_)
    return Status::Aborted("rank " + std::to_string(g_->members()[peer_]) +
                           " closed its control link");
  if (deadline.Expired())
    return Status::Timeout("control link to rank " +
                           std::to_string(g_->members()[peer_]) +
                           " made no progress");
  std::this_thread::sleep_for(std::chrono::microseconds(20));
  return Status::OK();
}

bool ShmLink::Flush() {
  if (outbox_sent_ == outbox_.size()) return true;
  ShmGroup::Ring r = g_->ring(g_->index(), peer_);
  uint64_t head = r.head->load(std::memory_order_relaxed);
  bool moved = false;
  while (outbox_sent_ < outbox_.size()) {
    size_t room =
        r.capacity -
        static_cast<size_t>(head - r.tail->load(std::memory_order_acquire));
    if (room == 0) break;
    size_t at = static_cast<size_t>(head % r.capacity);
    size_t len =
        std::min({outbox_.size() - outbox_sent_, room, r.capacity - at});
    std::memcpy(r.data + at, outbox_.data() + outbox_sent_, len);
    head += len;
    outbox_sent_ += len;
    moved = true;
  }
  if (moved) {
    r.head->store(head, std::memory_order_release);
    g_->doorbell(peer_)->Ring();
  }
  if (outbox_sent_ < outbox_.size()) return false;
  outbox_.clear();
  outbox_sent_ = 0;
  return true;
}

Status ShmLink::Drain(Deadline deadline) {
  int attempts = 0;
  while (!Flush()) {
    if (!s_.valid()) return Status::Aborted("control link closed");
    HVD_RETURN_IF_ERROR(Stalled(deadline, &attempts));
  }
  return Status::OK();
}

Status ShmLink::Get(char* p, size_t n, Deadline deadline) {
  ShmGroup::Ring r = g_->ring(peer_, g_->index());
  int attempts = 0;
  while (n > 0) {
    uint64_t tail = r.tail->load(std::memory_order_relaxed);
    size_t avail =
        static_cast<size_t>(r.head->load(std::memory_order_acquire) - tail);
    if (avail == 0) {
      Flush();  // the peer may be waiting for our bytes to finish its frame
      HVD_RETURN_IF_ERROR(Stalled(deadline, &attempts));
      continue;
    }
    size_t at = static_cast<size_t>(tail % r.capacity);
    size_t len = std::min({n, avail, r.capacity - at});
    std::memcpy(p, r.data + at, len);
    r.tail->store(tail + len, std::memory_order_release);
    g_->doorbell(peer_)->Ring();  // a writer may be waiting for room
    p += len;
    n -= len;
  }
  return Status::OK();
}

Status ShmLink::WriteFrame(const std::string& body, Deadline deadline) {
  if (body.size() > UINT32_MAX) return Status::InvalidArgument("frame too big");
  if (!s_.valid()) return Status::Aborted("control link closed");
  uint32_t header[2] = {kFrameMagic, static_cast<uint32_t>(body.size())};
  outbox_.append(reinterpret_cast<const char*>(header), sizeof(header));
  outbox_.append(body);
  Flush();
  return Status::OK();
}

Status ShmLink::ReadFrame(size_t max_len, Deadline deadline,
                          std::string* body) {
  uint32_t header[2];
  HVD_RETURN_IF_ERROR(
      Get(reinterpret_cast<char*>(header), sizeof(header), deadline));
  if (header[0] != kFrameMagic)
    return Status::Aborted("bad frame magic on the control ring");
  if (header[1] > max_len)
    return Status::Aborted("control frame of " + std::to_string(header[1]) +
                           " bytes exceeds the limit of " +
                           std::to_string(max_len));
  body->resize(header[1]);
  return Get(&(*body)[0], header[1], deadline);
}

}  // namespace horovod
