#include "transport/tcp_transport.h"

#include <errno.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "common/deadline.h"

namespace horovod {

TcpTransport::TcpTransport(int rank, std::vector<Socket> peers,
                           double timeout_s)
    : rank_(rank),
      peers_(std::move(peers)),
      timeout_s_(timeout_s),
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

Status TcpTransport::SendRecv(int dst, const void* sbuf, size_t slen, int src,
                              void* rbuf, size_t rlen, size_t chunk,
                              const ChunkFn* on_chunk) {
  if (aborted_.load()) return AbortedStatus();
  if (dst < 0) slen = 0;
  if (src < 0) rlen = 0;
  if ((slen && (dst >= size() || dst == rank_)) ||
      (rlen && (src >= size() || src == rank_)))
    return Status::Internal("SendRecv with an invalid peer");
  const int sfd = slen ? peers_[dst].fd() : -1;
  const int rfd = rlen ? peers_[src].fd() : -1;
  const char* sp = static_cast<const char*>(sbuf);
  char* rp = static_cast<char*>(rbuf);
  size_t sent = 0, recvd = 0, reported = 0;
  if (chunk == 0) chunk = rlen ? rlen : 1;
  Deadline silent = Deadline::After(timeout_s_);
  while (sent < slen || recvd < rlen) {
    bool progress = false;
    if (sent < slen) {
      ssize_t n = ::send(sfd, sp + sent, std::min<size_t>(slen - sent, 4 << 20),
                         MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        sent += static_cast<size_t>(n);
        progress = true;
      } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
        if (aborted_.load()) return AbortedStatus();
        return Status::Aborted("lost connection to rank " +
                               std::to_string(dst) + " (" + strerror(errno) +
                               "); it probably died");
      }
    }
    if (recvd < rlen) {
      ssize_t n = ::recv(rfd, rp + recvd, rlen - recvd, MSG_DONTWAIT);
      if (n > 0) {
        recvd += static_cast<size_t>(n);
        progress = true;
      } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        if (aborted_.load()) return AbortedStatus();
        return Status::Aborted(
            "lost connection to rank " + std::to_string(src) + " (" +
            (n == 0 ? std::string("closed") : std::string(strerror(errno))) +
            "); it probably died");
      }
      if (on_chunk) {
        while (recvd - reported >= chunk ||
               (recvd == rlen && reported < rlen)) {
          size_t len = std::min(chunk, recvd - reported);
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
    if (sent < slen) fds[nfds++] = {sfd, POLLOUT, 0};
    if (recvd < rlen) fds[nfds++] = {rfd, POLLIN, 0};
    int rc = poll(fds, nfds, silent.RemainingMs());
    if (aborted_.load()) return AbortedStatus();
    if (rc == 0) {
      int who = recvd < rlen ? src : dst;
      return Status::Timeout("rank " + std::to_string(who) +
                             " sent nothing for " +
                             std::to_string(static_cast<int>(timeout_s_)) +
                             " s (HOROVOD_OPERATION_TIMEOUT_SECONDS); it is "
                             "hung or unreachable");
    }
  }
  return Status::OK();
}

}  // namespace horovod
