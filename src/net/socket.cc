#include "net/socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <thread>

namespace horovod {
namespace {

void SetNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL, 0);
  fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

void SetNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

Status WaitFd(int fd, short events, Deadline deadline, const char* what) {
  while (true) {
    struct pollfd p = {fd, events, 0};
    int rc = poll(&p, 1, deadline.RemainingMs());
    if (rc > 0) return Status::OK();
    if (rc == 0) return Status::Timeout(std::string("timed out ") + what);
    if (errno != EINTR)
      return Status::Aborted(std::string("poll failed ") + what + ": " +
                             strerror(errno));
  }
}

Status Resolve(const std::string& host, int port, sockaddr_in* out) {
  std::memset(out, 0, sizeof(*out));
  out->sin_family = AF_INET;
  out->sin_port = htons(static_cast<uint16_t>(port));
  if (host.empty() || host == "0.0.0.0") {
    out->sin_addr.s_addr = htonl(INADDR_ANY);
    return Status::OK();
  }
  if (inet_pton(AF_INET, host.c_str(), &out->sin_addr) == 1)
    return Status::OK();
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr)
    return Status::InvalidArgument("cannot resolve host '" + host +
                                   "': " + gai_strerror(rc));
  out->sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
  freeaddrinfo(res);
  return Status::OK();
}

}  // namespace

void Socket::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Status Socket::Listen(const std::string& addr, int port, int backlog,
                      Socket* out, int* bound_port) {
  sockaddr_in sa;
  HVD_RETURN_IF_ERROR(Resolve(addr, port, &sa));
  Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid())
    return Status::Internal(std::string("socket: ") + strerror(errno));
  int one = 1;
  setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(s.fd(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0)
    return Status::Internal("cannot listen on " + addr + ":" +
                            std::to_string(port) + ": " + strerror(errno));
  if (listen(s.fd(), backlog) != 0)
    return Status::Internal(std::string("listen: ") + strerror(errno));
  SetNonBlocking(s.fd());
  sockaddr_in bound;
  socklen_t len = sizeof(bound);
  getsockname(s.fd(), reinterpret_cast<sockaddr*>(&bound), &len);
  if (bound_port) *bound_port = ntohs(bound.sin_port);
  *out = std::move(s);
  return Status::OK();
}

Status Socket::Connect(const std::string& host, int port, Deadline deadline,
                       Socket* out) {
  sockaddr_in sa;
  HVD_RETURN_IF_ERROR(Resolve(host, port, &sa));
  std::string last = "no attempt";
  while (true) {
    Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!s.valid())
      return Status::Internal(std::string("socket: ") + strerror(errno));
    SetNonBlocking(s.fd());
    int rc = connect(s.fd(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
    if (rc != 0 && errno == EINPROGRESS) {
      Status st = WaitFd(s.fd(), POLLOUT, deadline, "connecting");
      if (st.ok()) {
        int err = 0;
        socklen_t elen = sizeof(err);
        getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &elen);
        rc = err == 0 ? 0 : -1;
        errno = err;
      }
    }
    if (rc == 0) {
      SetNoDelay(s.fd());
      *out = std::move(s);
      return Status::OK();
    }
    last = strerror(errno);
    if (deadline.Expired())
      return Status::Timeout("could not connect to " + host + ":" +
                             std::to_string(port) + " (" + last + ")");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

Status Socket::Accept(Deadline deadline, Socket* out, std::string* peer) const {
  while (true) {
    HVD_RETURN_IF_ERROR(WaitFd(fd_, POLLIN, deadline, "waiting for peers"));
    bool got = false;
    HVD_RETURN_IF_ERROR(TryAccept(out, peer, &got));
    if (got) return Status::OK();
  }
}

Status Socket::TryAccept(Socket* out, std::string* peer, bool* got) const {
  *got = false;
  sockaddr_in sa;
  socklen_t len = sizeof(sa);
  int fd = accept4(fd_, reinterpret_cast<sockaddr*>(&sa), &len,
                   SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) {
    if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)
      return Status::OK();
    if (errno == EMFILE || errno == ENFILE)
      return Status::Timeout(std::string("accept: ") + strerror(errno));
    return Status::Internal(std::string("accept: ") + strerror(errno));
  }
  SetNoDelay(fd);
  if (peer) {
    char buf[INET_ADDRSTRLEN] = {0};
    inet_ntop(AF_INET, &sa.sin_addr, buf, sizeof(buf));
    *peer = std::string(buf) + ":" + std::to_string(ntohs(sa.sin_port));
  }
  *out = Socket(fd);
  *got = true;
  return Status::OK();
}

Status Socket::ReadSome(void* buf, size_t len, size_t* got) const {
  *got = 0;
  ssize_t n = ::recv(fd_, buf, len, MSG_DONTWAIT);
  if (n > 0) {
    *got = static_cast<size_t>(n);
    return Status::OK();
  }
  if (n == 0) return Status::Aborted("closed by peer");
  if (errno == EAGAIN || errno == EINTR) return Status::OK();
  return Status::Aborted(std::string("connection lost: ") + strerror(errno));
}

Status Socket::WriteAll(const void* buf, size_t len, Deadline deadline) const {
  const char* p = static_cast<const char*>(buf);
  while (len > 0) {
    ssize_t n = ::send(fd_, p, len, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      HVD_RETURN_IF_ERROR(WaitFd(fd_, POLLOUT, deadline, "sending"));
      continue;
    }
    return Status::Aborted(std::string("connection lost while sending: ") +
                           (n == 0 ? "closed" : strerror(errno)));
  }
  return Status::OK();
}

Status Socket::ReadAll(void* buf, size_t len, Deadline deadline) const {
  char* p = static_cast<char*>(buf);
  while (len > 0) {
    ssize_t n = ::recv(fd_, p, len, 0);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      HVD_RETURN_IF_ERROR(WaitFd(fd_, POLLIN, deadline, "receiving"));
      continue;
    }
    return Status::Aborted(std::string("connection lost while receiving: ") +
                           (n == 0 ? "closed by peer" : strerror(errno)));
  }
  return Status::OK();
}

void Socket::Seal(const Digest& key, bool initiator) {
  seal_ = std::make_unique<FrameSeal>(key);
  seal_->send_dir = initiator ? 'c' : 's';
  seal_->recv_dir = initiator ? 's' : 'c';
}

Digest Socket::Tag(uint8_t dir, uint64_t seq, const char* body,
                   size_t len) const {
  uint8_t prefix[9];
  prefix[0] = dir;
  std::memcpy(prefix + 1, &seq, 8);
  return seal_->mac.Mac(prefix, sizeof(prefix), body, len);
}

Digest Socket::NextMessageKey(bool sending) const {
  // A frame's tag input starts with its direction ('c' or 's'); this one
  // starts with 'm', so no frame tag is ever a message key.
  uint8_t label[10];
  label[0] = 'm';
  label[1] = sending ? seal_->send_dir : seal_->recv_dir;
  uint64_t& count = sending ? seal_->messages_sent : seal_->messages_received;
  std::memcpy(label + 2, &count, 8);
  ++count;
  return seal_->mac.Mac(label, sizeof(label), nullptr, 0);
}

Status Socket::WriteFrame(const std::string& body, Deadline deadline) const {
  uint8_t header[8];
  uint32_t magic = kFrameMagic;
  uint32_t len = static_cast<uint32_t>(body.size() + (seal_ ? kSealBytes : 0));
  std::memcpy(header, &magic, 4);
  std::memcpy(header + 4, &len, 4);
  HVD_RETURN_IF_ERROR(WriteAll(header, 8, deadline));
  HVD_RETURN_IF_ERROR(WriteAll(body.data(), body.size(), deadline));
  if (!seal_) return Status::OK();
  const Digest tag =
      Tag(seal_->send_dir, seal_->sent++, body.data(), body.size());
  return WriteAll(tag.data(), tag.size(), deadline);
}

Status Socket::Unseal(std::string* frame) const {
  if (!seal_) return Status::OK();
  if (frame->size() < kSealBytes)
    return Status::Aborted("a frame from the peer is too short for its seal");
  const size_t n = frame->size() - kSealBytes;
  Digest got;
  std::memcpy(got.data(), frame->data() + n, kSealBytes);
  if (!DigestEqual(got,
                   Tag(seal_->recv_dir, seal_->received, frame->data(), n)))
    return Status::Tampered(
        "a frame from the peer failed its integrity check (altered, replayed "
        "or reordered on the way)");
  ++seal_->received;
  frame->resize(n);
  return Status::OK();
}

Status Socket::ReadFrame(size_t max_len, Deadline deadline,
                         std::string* body) const {
  uint8_t header[8];
  HVD_RETURN_IF_ERROR(ReadAll(header, 8, deadline));
  uint32_t magic, len;
  std::memcpy(&magic, header, 4);
  std::memcpy(&len, header + 4, 4);
  if (magic != kFrameMagic) return Status::Aborted("bad frame magic from peer");
  const size_t seal = seal_ ? kSealBytes : 0;
  if (len > max_len + seal)
    return Status::Aborted("frame of " + std::to_string(len - seal) +
                           " bytes exceeds the limit of " +
                           std::to_string(max_len));
  body->resize(len);
  HVD_RETURN_IF_ERROR(ReadAll(&(*body)[0], len, deadline));
  return Unseal(body);
}

std::string Socket::LocalAddress() const {
  sockaddr_in sa;
  socklen_t len = sizeof(sa);
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len) != 0)
    return "127.0.0.1";
  char buf[INET_ADDRSTRLEN] = {0};
  inet_ntop(AF_INET, &sa.sin_addr, buf, sizeof(buf));
  return buf;
}

void Socket::TuneForBulk() const {
  int size = 4 << 20;
  setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
  setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
}

std::vector<std::string> LocalIPv4Addresses() {
  std::vector<std::string> out, loopback;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET ||
        (a->ifa_flags & IFF_UP) == 0)
      continue;
    char text[INET_ADDRSTRLEN];
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof text) == nullptr)
      continue;
    ((a->ifa_flags & IFF_LOOPBACK) ? loopback : out).push_back(text);
  }
  freeifaddrs(list);
  out.insert(out.end(), loopback.begin(), loopback.end());
  return out;
}

}  // namespace horovod
