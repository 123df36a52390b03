#include "transport/tcp_transport.h"

#include <errno.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "common/deadline.h"
#include "common/poly1305.h"
#include "common/silence_verdict.h"
#include "transport/span_cursor.h"

namespace horovod {

TcpTransport::TcpTransport(int rank, std::vector<Socket> peers,
                           double timeout_s, bool data_mac)
    : rank_(rank),
      peers_(std::move(peers)),
      timeout_s_(timeout_s),
      data_mac_(data_mac),
      abort_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

TcpTransport::~TcpTransport() {
  if (abort_fd_ >= 0) close(abort_fd_);
}

void TcpTransport::Abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(reason_mu_);
    if (aborted_.load()) return;
    reason_ = reason;
    aborted_.store(true);
  }
  uint64_t one = 1;
  ssize_t ignored = write(abort_fd_, &one, sizeof(one));
  (void)ignored;
  for (auto& s : peers_)
    if (s.valid()) shutdown(s.fd(), SHUT_RDWR);
}

Status TcpTransport::AbortedStatus() {
  std::lock_guard<std::mutex> lock(reason_mu_);
  return Status::Aborted(reason_);
}

namespace {

constexpr size_t kTagBytes = sizeof(Poly1305::Tag);
// How far the sender's MAC runs ahead of what the kernel has taken: far
// enough that a small message leaves with its tag in one call, near enough
// that the bytes are still in cache when they are sent.
constexpr size_t kMacAhead = 256 << 10;
constexpr size_t kMaxSendCall = 4 << 20;
// Spans handed to one sendmsg or recvmsg (the kernel takes up to 1024).
constexpr int kMaxSpansPerCall = 128;

bool TagsEqual(const uint8_t* a, const uint8_t* b) {
  uint8_t diff = 0;
  for (size_t i = 0; i < kTagBytes; ++i) diff |= a[i] ^ b[i];
  return diff == 0;
}

}  // namespace

Status TcpTransport::SendRecvV(int dst, const iovec* send, size_t nsend,
                               int src, const iovec* recv, size_t nrecv,
                               size_t chunk, const ChunkFn* on_chunk) {
  if (aborted_.load()) return AbortedStatus();
  // out: what the kernel has taken; ahead: what the sender's MAC has.
  SpanCursor out(send, dst < 0 ? 0 : nsend), ahead = out;
  SpanCursor in(recv, src < 0 ? 0 : nrecv);
  const size_t slen = out.total(), rlen = in.total();
  if ((slen && (dst >= size() || dst == rank_)) ||
      (rlen && (src >= size() || src == rank_)))
    return Status::Internal("SendRecv with an invalid peer");
  const int sfd = slen ? peers_[dst].fd() : -1;
  const int rfd = rlen ? peers_[src].fd() : -1;
  // With the data MAC every message is followed by its tag.
  const bool mac_out = data_mac_ && slen > 0;
  const bool mac_in = data_mac_ && rlen > 0;
  if ((mac_out && !peers_[dst].sealed()) || (mac_in && !peers_[src].sealed()))
    return Status::Internal("the data MAC needs sealed links");
  Poly1305 smac, rmac;
  uint8_t stag[kTagBytes], rtag[kTagBytes];
  if (mac_out) smac.Start(peers_[dst].NextMessageKey(true).data());
  if (mac_in) rmac.Start(peers_[src].NextMessageKey(false).data());
  const size_t sall = slen + (mac_out ? kTagBytes : 0);
  const size_t rall = rlen + (mac_in ? kTagBytes : 0);
  // tagged: payload bytes the sender's MAC has taken (all of them without
  // one); only those may leave.
  size_t sent = 0, tagged = mac_out ? 0 : slen, recvd = 0, reported = 0;
  if (chunk == 0) chunk = rlen ? rlen : 1;
  Deadline silent = Deadline::After(timeout_s_);
  iovec iov[kMaxSpansPerCall + 1];
  while (sent < sall || recvd < rall) {
    bool progress = false;
    if (sent < sall) {
      while (tagged < slen && tagged - sent < kMacAhead) {
        const size_t n = std::min(slen - tagged, kMacAhead);
        ahead.Advance(n, [&](char* p, size_t len) { smac.Update(p, len); });
        tagged += n;
        if (tagged == slen) {
          const Poly1305::Tag t = smac.Finish();
          std::memcpy(stag, t.data(), kTagBytes);
        }
      }
      size_t bytes = 0;
      int niov = out.Fill(std::min(tagged, sent + kMaxSendCall), iov,
                          kMaxSpansPerCall, &bytes);
      // The tag leaves behind the payload's last byte, in the same call.
      if (mac_out && std::min(sent, slen) + bytes == slen) {
        const size_t t = std::max(sent, slen) - slen;
        iov[niov++] = {stag + t, kTagBytes - t};
      }
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = static_cast<size_t>(niov);
      ssize_t n = ::sendmsg(sfd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        if (sent < slen)
          out.Advance(std::min(static_cast<size_t>(n), slen - sent));
        sent += static_cast<size_t>(n);
        progress = true;
      } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
        if (aborted_.load()) return AbortedStatus();
        return Status::Aborted("lost connection to rank " +
                               std::to_string(dst) + " (" + strerror(errno) +
                               "); it probably died");
      }
    }
    if (recvd < rall) {
      size_t bytes = 0;
      int niov = in.Fill(rlen, iov, kMaxSpansPerCall, &bytes);
      if (mac_in && std::min(recvd, rlen) + bytes == rlen) {
        const size_t t = std::max(recvd, rlen) - rlen;
        iov[niov++] = {rtag + t, kTagBytes - t};
      }
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = static_cast<size_t>(niov);
      ssize_t n = ::recvmsg(rfd, &msg, MSG_DONTWAIT);
      if (n > 0) {
        if (recvd < rlen) {
          const size_t payload = std::min(static_cast<size_t>(n), rlen - recvd);
          if (mac_in)
            in.Advance(payload,
                       [&](char* p, size_t len) { rmac.Update(p, len); });
          else
            in.Advance(payload);
        }
        recvd += static_cast<size_t>(n);
        progress = true;
      } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        if (aborted_.load()) return AbortedStatus();
        return Status::Aborted(
            "lost connection to rank " + std::to_string(src) + " (" +
            (n == 0 ? std::string("closed") : std::string(strerror(errno))) +
            "); it probably died");
      }
      // Chunks are reduced before the tag arrives; a message that then
      // fails it fails the whole collective, so nothing reduced from it
      // is ever returned.
      const size_t payload = std::min(recvd, rlen);
      if (on_chunk) {
        while (payload - reported >= chunk ||
               (payload == rlen && reported < rlen)) {
          size_t len = std::min(chunk, payload - reported);
          (*on_chunk)(reported, len);
          reported += len;
        }
      }
    }
    if (progress) {
      silent = Deadline::After(timeout_s_);
      continue;
    }
    struct pollfd fds[3];
    int nfds = 0;
    fds[nfds++] = {abort_fd_, POLLIN, 0};
    if (sent < sall) fds[nfds++] = {sfd, POLLOUT, 0};
    if (recvd < rall) fds[nfds++] = {rfd, POLLIN, 0};
    int rc = poll(fds, nfds, silent.RemainingMs());
    if (aborted_.load()) return AbortedStatus();
    if (rc == 0) {
      int who = recvd < rall ? src : dst;
      return Status::Timeout(
          SilenceVerdict(who, timeout_s_, "hung or unreachable"));
    }
  }
  if (mac_in) {
    const Poly1305::Tag want = rmac.Finish();
    if (!TagsEqual(want.data(), rtag))
      return Status::Tampered(
          "the data link with rank " + std::to_string(src) +
          " was tampered with: a message from it failed its integrity check "
          "(altered, replayed or reordered on the way)");
  }
  return Status::OK();
}

}  // namespace horovod
