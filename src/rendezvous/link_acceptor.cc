#include "rendezvous/link_acceptor.h"

#include <poll.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>

#include "common/logging.h"

namespace horovod {
namespace {

// Individual log lines for the first rejections, then one per this many.
constexpr int kLoggedRejections = 8;
constexpr int kRejectionSummaryEvery = 100;

std::string Ranks(const std::vector<Socket>& links,
                  const LinkAcceptor::Wanted& wanted) {
  std::string s;
  for (size_t r = 0; r < links.size(); ++r) {
    if (!wanted(static_cast<int>(r)) || links[r].valid()) continue;
    s += (s.empty() ? "" : ", ") + std::to_string(r);
  }
  return "[" + s + "]";
}

// Reads into dst[*have, want) what has arrived; *full once it is all there.
Status Fill(const Socket& s, char* dst, size_t want, size_t* have, bool* full) {
  while (*have < want) {
    size_t got = 0;
    HVD_RETURN_IF_ERROR(s.ReadSome(dst + *have, want - *have, &got));
    if (got == 0) break;
    *have += got;
  }
  *full = *have == want;
  return Status::OK();
}

}  // namespace

struct LinkAcceptor::Pending {
  Pending(Socket sock, std::string from, const HandshakeParams& hp,
          double handshake_s)
      : s(std::move(sock)),
        peer(std::move(from)),
        deadline(Deadline::After(handshake_s)),
        hs(hp) {}
  Socket s;
  std::string peer;
  Deadline deadline;
  HandshakeResponder hs;
  uint32_t header[2] = {0, 0};  // the first frame's magic and length
  size_t header_got = 0;
  std::string frame;
  size_t frame_got = 0;
};

LinkAcceptor::LinkAcceptor(const Socket& listener, const HandshakeParams& hp,
                           LinkKind kind, AcceptorOptions options)
    : listener_(listener), hp_(hp), kind_(kind), options_(options) {}

void LinkAcceptor::Reject(const Pending& p, const std::string& why) {
  ++rejected_;
  if (rejected_ <= kLoggedRejections)
    HVD_LOG(kWarning, "rank " << hp_.my_rank << " rejected a connection from "
                              << p.peer << ": " << why);
  else if (rejected_ % kRejectionSummaryEvery == 0)
    HVD_LOG(kWarning, "rank " << hp_.my_rank << " has rejected " << rejected_
                              << " connections during the rendezvous (latest "
                              << p.peer << ": " << why << ")");
}

Status LinkAcceptor::Advance(Pending* p, bool* complete) {
  *complete = false;
  uint8_t buf[64];
  std::string reply;
  while (!p->hs.done()) {
    size_t got = 0;
    HVD_RETURN_IF_ERROR(
        p->s.ReadSome(buf, std::min(sizeof(buf), p->hs.wanted()), &got));
    if (got == 0) return Status::OK();
    HVD_RETURN_IF_ERROR(p->hs.Take(buf, got, &reply));
    // A 64-byte reply to a fresh connection fits its socket buffer.
    if (!reply.empty())
      HVD_RETURN_IF_ERROR(
          p->s.WriteAll(reply.data(), reply.size(), p->deadline));
  }
  if (p->hs.kind() != kind_) return Status::Aborted("unexpected link kind");
  if (!p->s.sealed()) p->s.Seal(p->hs.session_key(), false);
  if (options_.first_frame_max == 0) {
    *complete = true;
    return Status::OK();
  }
  bool full = false;
  if (p->header_got < sizeof(p->header)) {
    HVD_RETURN_IF_ERROR(Fill(p->s, reinterpret_cast<char*>(p->header),
                             sizeof(p->header), &p->header_got, &full));
    if (!full) return Status::OK();
    if (p->header[0] != kFrameMagic) return Status::Aborted("bad frame magic");
    const size_t seal = p->s.sealed() ? Socket::kSealBytes : 0;
    if (p->header[1] > options_.first_frame_max + seal)
      return Status::Aborted("frame of " + std::to_string(p->header[1]) +
                             " bytes exceeds the limit of " +
                             std::to_string(options_.first_frame_max));
    p->frame.resize(p->header[1]);
  }
  HVD_RETURN_IF_ERROR(
      Fill(p->s, &p->frame[0], p->frame.size(), &p->frame_got, complete));
  if (*complete) return p->s.Unseal(&p->frame);
  return Status::OK();
}

Status LinkAcceptor::Run(Deadline deadline, std::vector<Socket>* links,
                         const Wanted& wanted, const OnLink& on_link) {
  auto missing = [&] {
    for (size_t r = 0; r < links->size(); ++r)
      if (wanted(static_cast<int>(r)) && !(*links)[r].valid()) return true;
    return false;
  };
  auto usable = [&](int rank) {
    return rank >= 0 && rank < static_cast<int>(links->size()) &&
           wanted(rank) && !(*links)[static_cast<size_t>(rank)].valid();
  };
  std::deque<std::unique_ptr<Pending>> pending;  // oldest first
  std::vector<pollfd> fds;
  while (missing()) {
    if (deadline.Expired())
      return Status::Timeout(
          "rendezvous timed out: rank(s) " + Ranks(*links, wanted) +
          " did not connect to rank " + std::to_string(hp_.my_rank) +
          " within the start timeout");
    Deadline wake = deadline;
    fds.assign(1, pollfd{listener_.fd(), POLLIN, 0});
    for (auto& p : pending) {
      fds.push_back(pollfd{p->s.fd(), POLLIN, 0});
      if (p->deadline.at() < wake.at()) wake = p->deadline;
    }
    poll(fds.data(), fds.size(), wake.RemainingMs() + 1);
    // Connections with something to read, then those out of time.
    for (size_t i = 0; i < pending.size(); ++i) {
      Pending& p = *pending[i];
      if (fds[i + 1].revents == 0 && !p.deadline.Expired()) continue;
      bool complete = false;
      Status st = fds[i + 1].revents ? Advance(&p, &complete) : Status::OK();
      if (st.ok() && !complete && p.deadline.Expired())
        st = Status::Timeout(
            "handshake not completed within " +
            std::to_string(static_cast<int>(options_.handshake_s)) + " s");
      if (st.ok() && complete && !usable(p.hs.client_rank()))
        st = Status::Aborted("unexpected or duplicate rank " +
                             std::to_string(p.hs.client_rank()));
      if (st.ok() && complete) st = on_link(p.hs.client_rank(), p.frame);
      if (!st.ok()) {
        Reject(p, st.message());
        p.s.Close();
      } else if (complete) {
        (*links)[static_cast<size_t>(p.hs.client_rank())] = std::move(p.s);
      }
    }
    pending.erase(std::remove_if(pending.begin(), pending.end(),
                                 [](const std::unique_ptr<Pending>& p) {
                                   return !p->s.valid();
                                 }),
                  pending.end());
    if (!(fds[0].revents & POLLIN)) continue;
    // A bounded batch, so connections accepted now are read before the next
    // batch can push them out.
    const size_t batch = std::max<size_t>(1, options_.max_pending / 4);
    for (size_t i = 0; i < batch; ++i) {
      Socket s;
      std::string peer;
      bool got = false;
      Status st = listener_.TryAccept(&s, &peer, &got);
      if (st.code() == StatusCode::kTimeout && !pending.empty()) {
        // Out of file descriptors: make room.
        Reject(*pending.front(), "dropped: out of file descriptors");
        pending.pop_front();
        continue;
      }
      HVD_RETURN_IF_ERROR(st);
      if (!got) break;
      if (pending.size() >= options_.max_pending) {
        Reject(*pending.front(), "dropped: over " +
                                     std::to_string(options_.max_pending) +
                                     " connections handshaking at once");
        pending.pop_front();
      }
      pending.push_back(std::make_unique<Pending>(std::move(s), peer, hp_,
                                                  options_.handshake_s));
    }
  }
  return Status::OK();
}

}  // namespace horovod
