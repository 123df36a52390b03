// TensorQueue: where framework threads hand collectives to the engine's
// loop. Holds every in-flight entry by key (process set + name), so a
// duplicate name is refused at once, and the list of entries not yet told to
// the coordinator. Enqueue wakes the loop through an eventfd, written only
// while the loop sleeps on it (or the wake hook: the shared-memory
// doorbell), so the loop sleeps instead of spinning; only the enqueue that
// starts the list wakes it, as the loop takes the list whole.
//
// Each key has a record (QueuedTensor) that outlives its submission: a
// training step submits the same names every step, and reusing the record
// keeps a steady step free of allocation and lets the loop remember which
// response-cache slot a name was found in, so it addresses the tensor by
// that slot and the record's address instead of by name. Records whose
// name has gone out of use are dropped once many have piled up.
//
// A record is idle, queued (in flight, awaiting agreement), or claimed
// (its collective is running: the loop took it by address). Only the loop
// moves a record out of queued. Thread-safe; a record's entry is written
// by Add while idle and read by the loop while queued or claimed, the
// queue's lock ordering the two.
#ifndef HOROVOD_RUNTIME_TENSOR_QUEUE_H_
#define HOROVOD_RUNTIME_TENSOR_QUEUE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "coordination/message.h"
#include "coordination/response_cache.h"
#include "runtime/futex_lock.h"
#include "runtime/handle_state.h"

namespace horovod {

struct TensorEntry {
  // Where the data lies; its shape is left empty (request.shape has it).
  TensorView tensor;
  HandleRef handle;
  Request request;

  int64_t NumBytes() const { return TensorBytes(request.dtype, request.shape); }

  // The job failed under this entry: the error names the operation and the
  // tensor, so every rank's last line says which one was lost.
  Status Failure(const Status& why) const {
    const char* op =
        request.op <= Op::kJoin ? OpName(request.op) : "process set change";
    return Status(why.code(), std::string(op) + " '" + request.name +
                                  "' failed: " + why.message());
  }
};

// A lone allreduce in the global set, as submitted, by reference: what
// TensorQueue::AddAgain compares with a record's last request field by
// field instead of building a new request to compare.
struct Resubmission {
  const std::string& name;
  const TensorView& tensor;
  ReduceOp reduce_op;
  int32_t root;
  double prescale;
  double postscale;
  int32_t rank;

  // Whether building this submission's request would give `r` again.
  bool Repeats(const Request& r) const;
};

// How many records ahead a pass over a step's records (claiming,
// executing, releasing them) fetches the one it will reach: the step's
// data has pushed the records out of the caches since they were queued,
// and each would otherwise wait for its own lines.
constexpr size_t kRecordsAhead = 16;

// One key's record. `entry` is the submission while queued or claimed.
//
// A steady step touches each record several times after its data has
// pushed the record out of the caches. Laid out on cache lines: the
// queue's and the loop's fields fill the first line, the entry's view and
// handle the second, and what a resubmission is compared with the two
// after (the request's scalars, name and shape).
class alignas(64) QueuedTensor {
 public:
  // The response-cache slot the loop found this request in and the epoch
  // of that lookup (-1: none known). Add forgets it when a submission's
  // parameters differ from the last one's. Used only by the loop.
  int cache_slot = -1;
  uint64_t found_at = 0;
  // With the slot, found by the same lookup: the bytes the ready board
  // carries with the slot (0: it goes by collective), or -1 when the
  // request is not for the board.
  int64_t board_carry = -1;

 private:
  friend class TensorQueue;
  // kDead: an orphan whose claim ended, freed with the next links reset.
  enum class State : uint8_t { kIdle, kQueued, kClaimed, kDead };
  State state_ = State::kIdle;
  bool listed_ = false;  // in the queue's list of new entries
  // Where it is filed in the queue's by_slot_ (-1: not filed).
  int filed_slot_ = -1;
  // The key it is filed under; null for an orphan (claimed when its key
  // got a new record).
  const std::string* key_ = nullptr;
  // The record added right after this one, last time: steps submit their
  // names in the same order, so the next name is found without a lookup
  // (whose bucket and node the data moved since the last step has pushed
  // out of the caches).
  QueuedTensor* next_ = nullptr;
  // The record added kPrefetchAhead calls after this one, last time: it
  // is fetched whole while this one is added, far enough ahead that it
  // has arrived when its turn comes.
  QueuedTensor* ahead_ = nullptr;
  // The state this record's submission before the current one had, kept
  // for reuse: a caller that keeps each handle until it resubmits the
  // name (a vector of handles overwritten step by step) lets go of the
  // last one only after the next Add.
  HandleRef spare_;

 public:
  alignas(64) TensorEntry entry;
};

class TensorQueue {
 public:
  TensorQueue();
  ~TensorQueue();

  // Takes entries[0, n) (their requests and views are copied; their
  // `handle` is unused) and gives each a handle, handles[i]: a state its
  // record's last submissions left that no handle refers to any more, or a
  // new one. A lone entry's handles[0] lets go of its state before one is
  // picked (it is overwritten anyway), so it may be that state.
  // All-or-nothing: refuses every entry, and hands out no handle (nor
  // touches one), if any key is already in flight.
  Status Add(const TensorEntry* entries, size_t n, Handle* handles);
  // A steady step's lone allreduce: when the record predicted to come next
  // (the one added after the last one, last time) is idle and `s` repeats
  // its last request, queues that request again with `s.tensor`'s data
  // and gives *handle a state as Add does (when *handle is the last
  // submission's and the only one, it keeps that state, renewed); else
  // touches nothing and returns false, and the caller builds the request
  // and calls Add. The request was checked when first built, and every
  // input of those checks but the data pointer is in it: the caller
  // checks that one.
  bool AddAgain(const Resubmission& s, Handle* handle);
  // The records queued since the last call, in enqueue order. Swaps with
  // the vector passed in, which the next Adds fill (so its capacity is
  // reused instead of regrown every step).
  void TakeNew(std::vector<QueuedTensor*>* fresh);
  // Removes and returns the entry, or false if this rank has none queued.
  bool Take(const std::string& key, TensorEntry* out);
  // Files queued records ts[0, n) under their cache_slot, which the loop
  // has just named them by to rank 0: ClaimNamed then finds them by the
  // response's slots. A record leaves the file when it leaves the queued
  // state.
  void FileBySlot(QueuedTensor* const* ts, size_t n);
  // Claims, under one lock, the queued entry of each of `names` in
  // `process_set`: by slots[i] when the record filed there has that key,
  // else by key (`slots` may be empty). (*claimed)[i] is that name's
  // entry, or null when this rank has none queued; `records` gets the
  // claimed records, for Release. Unlike taking the entry out, the record
  // keeps its request, so the next submission of the name finds it
  // unchanged: its record without a lookup, its strings' capacity, its
  // handle state and its cache slot.
  void ClaimNamed(int process_set, const std::vector<std::string>& names,
                  const std::vector<uint32_t>& slots,
                  std::vector<QueuedTensor*>* records,
                  std::vector<TensorEntry*>* claimed);
  // Claims queued records by address (records from TakeNew), under one
  // lock: (*claimed)[i] is ts[i]'s entry, or null when ts[i] is no longer
  // queued (the job failed). Their entries stay in the records, untouched
  // by Add, until Release.
  void Claim(QueuedTensor* const* ts, size_t n,
             std::vector<TensorEntry*>* claimed);
  // Ends the claims on ts[0, n): their keys are free again, their records
  // reusable.
  void Release(QueuedTensor* const* ts, size_t n);
  // Whether some entry is in flight (submitted and not yet executed): a
  // hint read without the lock, once a loop step, to tell waiting for work
  // from waiting on peers.
  bool Pending() const;
  // How many Adds have succeeded so far: whether submissions are still
  // arriving, read without the lock.
  uint64_t Adds() const { return adds_.load(std::memory_order_relaxed); }
  // Copies the in-flight request under `key`; false if there is none.
  bool Find(const std::string& key, Request* out);
  // The keys of the in-flight entries behind `handles`, sorted, each once;
  // handles whose entry has left the queue (executing or done) are
  // skipped. Scans every entry: for rare reports, not the data path.
  std::vector<std::string> KeysOf(
      const std::vector<const HandleState*>& handles);
  // Fails every queued entry; later Adds are refused with `status`.
  void FailAll(const Status& status);
  // Records kept: queued, claimed or idle.
  size_t Records();
  int wake_fd() const { return wake_fd_; }
  // The loop's sleep on wake_fd(): Wake writes the eventfd (a system call)
  // only while the loop sleeps, so a burst of enqueues while it works costs
  // an atomic each. `seen` is what the last EndSleep returned: false (and
  // no sleep) when a Wake came since. Sequentially consistent on both
  // sides, so either Wake sees the sleeper or the sleeper sees the Wake.
  bool BeginSleep(uint64_t seen);
  // After the sleep (or instead of it): the Wakes seen, read before the
  // loop looks at the queue, so later ones end the next sleep.
  uint64_t EndSleep();
  // Replaces the eventfd as the way Wake reaches the loop. Set before the
  // loop starts.
  void SetWakeHook(std::function<void()> hook) { wake_hook_ = std::move(hook); }
  // The gate new handle states lead their waiters to. Set before the first
  // Add.
  void SetGate(std::shared_ptr<DriveGate> gate) { gate_ = std::move(gate); }
  void Wake();
  void DrainWake();

  // Idle records kept before those not listed are dropped; names used once
  // (the automatic names of unnamed calls) pile up to this many.
  static constexpr size_t kMaxIdle = 4096;
  // Orphans kept before the dead ones are freed.
  static constexpr size_t kMaxOrphans = 64;

 private:
  // Queued -> idle (under mu_).
  void Unqueue(QueuedTensor* t);
  // Queued -> claimed (under mu_; pending_ is the caller's to update).
  void ClaimLocked(QueuedTensor* t);
  // Takes t out of by_slot_, if it is filed there (under mu_).
  void Unfile(QueuedTensor* t);
  // The record added after the last one, last time, when it is idle;
  // else null (under mu_).
  QueuedTensor* NextIdle() const;
  // The record for r's key when it is NextIdle(); else null (under mu_).
  QueuedTensor* Predicted(const Request& r) const;
  // Starts fetching what the resubmissions after t, just added, will
  // touch (under mu_). A steady step's data moved through the caches
  // since its records were last used: the record kPrefetchAhead after t
  // gets its lines fetched, and the one half as far its name, shape and
  // handle state (its own lines fetched that many calls before). Several
  // calls ahead: a C++ loop submits the next tensor far sooner than a
  // fetch from memory arrives, and on a busy host a fetch takes longer
  // still.
  void PrefetchAfter(const QueuedTensor* t) const;
  // t was just added: it is the last one, and the successor kPrefetchAhead
  // calls on of the record added that many calls before (under mu_).
  void NoteAdded(QueuedTensor* t);
  // Idle -> queued, with a fresh handle state (under mu_).
  void QueueLocked(QueuedTensor* t);
  // Idle -> queued, its state left as it is (under mu_).
  void MarkQueued(QueuedTensor* t);
  // Hands out the states of ts[0, n), just queued, as handles[0, n)
  // (unless null: the caller holds them already) and lists those not
  // listed; true when the list was empty (the loop needs waking). Under
  // mu_.
  bool ListLocked(QueuedTensor* const* ts, size_t n, Handle* handles);
  // Gives t's entry a reset state for its next submission: the entry's
  // last one or t's spare when no handle refers to it any more, else a new
  // one (the last one then becomes the spare). Under mu_.
  void RenewState(QueuedTensor* t, DataType dtype);
  // Drops idle records that no list refers to, and dead orphans (under
  // mu_).
  void Sweep();
  // Frees dead orphans and forgets every record's successor, so no link
  // points at a freed record (under mu_).
  void ResetLinks();

  FutexLock mu_;
  std::unordered_map<std::string, std::unique_ptr<QueuedTensor>> records_;
  std::vector<std::unique_ptr<QueuedTensor>> orphans_;
  size_t idle_ = 0;
  QueuedTensor* last_added_ = nullptr;
  // The last kPrefetchAhead records added, oldest at recent_at_.
  static constexpr size_t kPrefetchAhead = 8;
  QueuedTensor* recent_[kPrefetchAhead] = {};
  size_t recent_at_ = 0;
  size_t queued_ = 0;
  std::vector<QueuedTensor*> added_;  // by the running Add
  std::string key_;                   // lookups, reused
  std::vector<QueuedTensor*> fresh_;
  // Queued records by the cache slot they were last named by (FileBySlot);
  // null where none is.
  std::vector<QueuedTensor*> by_slot_;
  std::atomic<bool> pending_{false};  // queued_ > 0, set under mu_
  std::atomic<uint64_t> adds_{0};     // written under mu_
  Status closed_;
  int wake_fd_;
  std::atomic<uint64_t> wakes_{0};
  std::atomic<bool> sleeping_{false};
  std::function<void()> wake_hook_;
  std::shared_ptr<DriveGate> gate_;
};

}  // namespace horovod

#endif  // HOROVOD_RUNTIME_TENSOR_QUEUE_H_
