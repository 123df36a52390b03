// HandleState: the completion record behind a Handle, and HandleRef, the
// engine's counted reference to one. Written once per submission by
// whichever thread drives the engine's loop (Complete), read by any number
// of waiting threads. Thread-safe.
//
// The count is intrusive, so the queue can tell when only its own record
// still refers to a state (Unshared) and reuse it for the name's next
// submission: a training step then allocates no state, constructs no lock
// and touches no count shared by all handles.
#ifndef HOROVOD_RUNTIME_HANDLE_STATE_H_
#define HOROVOD_RUNTIME_HANDLE_STATE_H_

#include <horovod/engine.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>

#include "runtime/drive_gate.h"

namespace horovod {

// A step touches every state it completes three times (reset, complete,
// wait) after its data has pushed them out of the caches: what those touch
// shares the first cache line, what only some operations write the second,
// and the gate and the lock (for waits that do not finish at once) follow.
struct alignas(64) HandleState {
 private:
  std::atomic<int> refs_{0};
  // The completion in one word: kClaimed once a Complete call won,
  // kFinished once it published, and the count of sleeping waiters above
  // them (kSleeper each). One word, so a success completes in one atomic
  // read-modify-write (each is a full barrier here, and a step completes
  // a state per tensor), and a sleeper's count and the flag it waits on
  // are ordered by that word alone.
  static constexpr uint32_t kClaimed = 1, kFinished = 2, kSleeper = 4;
  std::atomic<uint32_t> word_{0};
  bool has_output_ = false;  // SetOutput since the last Reset

 public:
  // The element type of the tensor this handle was enqueued with (outputs
  // have it too), so adapters need not remember it.
  DataType dtype = DataType::kUInt8;
  int int_result = -1;  // Handle::int_result()
  Status status;
  // Set by the background loop before Complete, through SetOutput; read
  // only once finished.
  alignas(64) std::shared_ptr<Buffer> output;
  std::vector<int64_t> output_shape;
  std::vector<int64_t> received_splits;
  // Set at enqueue: the way back to the engine for waiting threads.
  std::shared_ptr<DriveGate> gate;

  // An operation's result buffer; the shapes that describe it are written
  // beside it. Noted on the first line, so that Reset reads the second
  // only after an operation with an output (not an in-place allreduce).
  void SetOutput(std::shared_ptr<Buffer> out) {
    has_output_ = true;
    output = std::move(out);
  }

  // Whether the operation finished, readable without a lock: a driving
  // waiter checks it after every loop step. True after everything
  // Complete publishes.
  bool Done() const {
    return (word_.load(std::memory_order_acquire) & kFinished) != 0;
  }

  // The first call wins; later ones (a failure racing a completion) are
  // ignored. Takes the lock only when a thread sleeps on this state.
  void Complete(const Status& s) {
    uint32_t old = 0;  // as nearly always: a failed exchange reads it
    if (s.ok()) {
      // A fresh or reset state holds OK already: a success writes nothing,
      // so it claims and publishes at once.
      do {
        if ((old & kClaimed) != 0) return;
      } while (!word_.compare_exchange_weak(old, old | kClaimed | kFinished,
                                            std::memory_order_acq_rel,
                                            std::memory_order_relaxed));
    } else {
      old = word_.fetch_or(kClaimed, std::memory_order_acq_rel);
      if ((old & kClaimed) != 0) return;
      status = s;
      old = word_.fetch_or(kFinished, std::memory_order_acq_rel);
    }
    // Sleep counts itself in the same word: either its count came first
    // and is seen here, or it sees the flag.
    if (old < kSleeper) return;
    { std::lock_guard<std::mutex> lock(mu_); }
    cv_.notify_all();
  }

  // Blocks until done or `until`; true when done.
  bool Sleep(std::chrono::steady_clock::time_point until) {
    std::unique_lock<std::mutex> lock(mu_);
    word_.fetch_add(kSleeper, std::memory_order_acq_rel);
    auto done = [this] { return Done(); };
    if (until == std::chrono::steady_clock::time_point::max())
      cv_.wait(lock, done);
    else
      cv_.wait_until(lock, until, done);
    word_.fetch_sub(kSleeper, std::memory_order_relaxed);
    return done();
  }

  // Counted references (HandleRef, Handle).
  void Ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  // Ref while Unshared, when no other thread can reach this state: no
  // atomic read-modify-write.
  void RefUnshared() { refs_.store(2, std::memory_order_relaxed); }
  void Unref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
  // True when exactly two references are held: a caller holding one of
  // them and knowing of one handle to the state knows no other thread can
  // reach it. Acquire, as Unshared.
  bool HeldTwice() const { return refs_.load(std::memory_order_acquire) == 2; }
  // True when the caller's reference is the only one: no handle or waiter
  // can read this state, so Reset may rewrite it. Acquire: whatever the
  // last other holder did before letting go is over.
  bool Unshared() const { return refs_.load(std::memory_order_acquire) == 1; }
  // Back to a fresh submission's state, keeping the lock, the gate and the
  // vectors' capacity. Only while no other thread can reach the state:
  // Unshared, or held besides by the one handle its caller is submitting
  // again with (TensorQueue::AddAgain).
  void Reset(DataType type) {
    word_.store(0, std::memory_order_relaxed);  // nobody sleeps on it
    // A success left OK in place (Complete writes only a failure).
    if (!status.ok()) status = Status::OK();
    if (has_output_) {  // the second line stays untouched for most
      output.reset();
      output_shape.clear();  // keeps the capacity
      received_splits.clear();
      has_output_ = false;
    }
    int_result = -1;
    dtype = type;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
};

// A counted reference to a HandleState, as the engine holds them (queue
// records, entries being executed). Not thread-safe itself; the state is.
class HandleRef {
 public:
  HandleRef() = default;
  // A new state, referred to by this reference only.
  static HandleRef Make() { return HandleRef(new HandleState()); }
  HandleRef(const HandleRef& o) : HandleRef(o.p_) {}
  HandleRef(HandleRef&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
  HandleRef& operator=(HandleRef o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~HandleRef() { reset(); }

  void reset() {
    if (p_ != nullptr) p_->Unref();
    p_ = nullptr;
  }
  HandleState* get() const { return p_; }
  // A new counted reference, for a Handle to adopt.
  HandleState* Share() const {
    p_->Ref();
    return p_;
  }
  HandleState* operator->() const { return p_; }
  HandleState& operator*() const { return *p_; }
  explicit operator bool() const { return p_ != nullptr; }

 private:
  explicit HandleRef(HandleState* p) : p_(p) {
    if (p_ != nullptr) p_->Ref();
  }
  HandleState* p_ = nullptr;
};

}  // namespace horovod

#endif  // HOROVOD_RUNTIME_HANDLE_STATE_H_
