// ControlLink: a framed, ordered, authenticated message pipe between rank 0
// and one worker, carrying the coordination traffic (request and response
// lists). SocketLink is the TCP link made by the rendezvous; ShmLink carries
// the same frames through byte rings in shared memory when every rank is on
// one host, so a steady-state step costs no syscall while ranks are awake.
// An ShmLink keeps the TCP socket only to notice the peer's death (the
// kernel closes it when the process dies) and to signal its own (Close).
// Its writes are non-blocking (an outbox drains as the peer reads), and a
// reader stalled on a partial frame keeps flushing its own outbox, so two
// ranks sending each other large frames cannot deadlock.
//
// Thread-safety: one thread uses a link at a time (whichever drives the
// engine's loop, or the thread that runs Fatal once the loop is gone).
#ifndef HOROVOD_TRANSPORT_CONTROL_LINK_H_
#define HOROVOD_TRANSPORT_CONTROL_LINK_H_

#include <string>

#include "common/deadline.h"
#include "net/socket.h"
#include "transport/shm_group.h"

namespace horovod {

class ControlLink {
 public:
  virtual ~ControlLink() = default;
  // May return before the frame is fully handed over (ShmLink: the rest
  // waits in an outbox); Flush and Drain push it on.
  virtual Status WriteFrame(const std::string& body, Deadline deadline) = 0;
  // Hands over what fits without blocking; true when nothing is pending.
  virtual bool Flush() { return true; }
  // Blocks until everything written has been handed over.
  virtual Status Drain(Deadline deadline) { return Status::OK(); }
  // Rejects bodies over max_len before reading them.
  virtual Status ReadFrame(size_t max_len, Deadline deadline,
                           std::string* body) = 0;
  // Something to read: data, or the peer's hang-up (ReadFrame then fails).
  // For a SocketLink this is what poll reported (MarkReadable, Probe).
  virtual bool HasData() = 0;
  // Looks for the peer's hang-up (and, on a socket, for data) without
  // blocking; cheap enough for every idle wake-up.
  virtual void Probe() = 0;
  // The caller's own poll(2) found the link's fd readable.
  virtual void MarkReadable() {}
  virtual int fd() const = 0;
  virtual bool valid() const = 0;
  virtual void Close() = 0;
};

class SocketLink : public ControlLink {
 public:
  explicit SocketLink(Socket s) : s_(std::move(s)) {}
  Status WriteFrame(const std::string& body, Deadline deadline) override {
    return s_.WriteFrame(body, deadline);
  }
  Status ReadFrame(size_t max_len, Deadline deadline,
                   std::string* body) override {
    readable_ = false;
    return s_.ReadFrame(max_len, deadline, body);
  }
  bool HasData() override { return readable_; }
  void Probe() override;
  void MarkReadable() override { readable_ = true; }
  int fd() const override { return s_.fd(); }
  bool valid() const override { return s_.valid(); }
  void Close() override { s_.Close(); }

 private:
  Socket s_;
  bool readable_ = false;
};

class ShmLink : public ControlLink {
 public:
  // `peer` is a member index of `group`; `liveness` the TCP link to it.
  ShmLink(ShmGroup* group, int peer, Socket liveness)
      : g_(group), peer_(peer), s_(std::move(liveness)) {}
  Status WriteFrame(const std::string& body, Deadline deadline) override;
  bool Flush() override;
  Status Drain(Deadline deadline) override;
  Status ReadFrame(size_t max_len, Deadline deadline,
                   std::string* body) override;
  bool HasData() override;
  void Probe() override;
  int fd() const override { return s_.fd(); }
  bool valid() const override { return s_.valid(); }
  void Close() override { s_.Close(); }

 private:
  Status Get(char* p, size_t n, Deadline deadline);
  Status Stalled(Deadline deadline, int* attempts);

  ShmGroup* g_;
  int peer_;
  Socket s_;
  bool gone_ = false;
  // Frames not yet in the ring. A writer never blocks on a full ring: both
  // sides might be writing big frames to each other at once.
  std::string outbox_;
  size_t outbox_sent_ = 0;
};

}  // namespace horovod

#endif  // HOROVOD_TRANSPORT_CONTROL_LINK_H_
