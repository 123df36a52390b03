// EngineImpl: owns the parts of a running engine and runs its loop. One
// loop iteration (Step):
//   1. take newly enqueued requests (as cache slots when cached);
//   2. rank 0: fold them and the workers' lists into the Coordinator and,
//      when it says so, broadcast a response list; workers: send their list
//      to rank 0 and wait for response lists;
//   3. execute each response list in order (same order on every rank).
// The loop sleeps in poll(2) on the queue's eventfd and the control sockets,
// or on the shared-memory doorbell, so it wakes on enqueue or on a message.
//
// Who drives: the loop thread by default; but a thread that waits on a
// handle (a synchronous collective) runs the steps itself, holding drive_mu_
// (DriveGate), and the loop thread parks until no caller has driven for
// kParkGrace. Everything the steps touch is used under drive_mu_ only.
//
// The class is declared here and defined by concern: engine_wiring.cc (start,
// transports, shared memory, shutdown), engine_submit.cc (enqueue, request
// checks, the thread census), engine_loop.cc (who drives, waiting for work),
// engine_negotiation.cc (coordinator and worker steps, executing response
// lists), engine_failure.cc (liveness, diagnosing and spreading failures);
// engine.cc is the public facade.
#ifndef HOROVOD_RUNTIME_ENGINE_IMPL_H_
#define HOROVOD_RUNTIME_ENGINE_IMPL_H_

#include <horovod/engine.h>
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <limits>
#include <mutex>
#include <string>
#include <thread>

#include "autotune/autotuner.h"
#include "common/knobs.h"
#include "common/logging.h"
#include "coordination/coordinator.h"
#include "coordination/ready_board.h"
#include "coordination/wire.h"
#include "rendezvous/peer_table.h"
#include "rendezvous/rendezvous.h"
#include "runtime/buffer_pool.h"
#include "runtime/drive_counter.h"
#include "runtime/executor.h"
#include "runtime/peer_liveness.h"
#include "runtime/process_memory.h"
#include "runtime/process_set_table.h"
#include "runtime/request_check.h"
#include "runtime/tensor_queue.h"
#include "timeline/timeline.h"
#include "transport/control_link.h"
#include "transport/loopback_transport.h"
#include "transport/shm_group.h"
#include "transport/tcp_transport.h"

namespace horovod {

// Which threads submit to an engine, and how many of them are blocked in a
// wait. A rank whose every submitting thread waits can submit nothing new
// until a wait ends; only then are its waits news for rank 0's deadlock
// check (a rank with one thread still running may yet submit what the
// others wait for). Shared by the engine and each thread's record.
struct ThreadCensus {
  std::atomic<int> live{0};     // threads that enqueued and have not exited
  std::atomic<int> waiting{0};  // of those, blocked in Handle::Wait now
};

inline constexpr size_t kMaxControlFrame = 64u << 20;
inline constexpr double kShutdownWaitS = 30;
// A rank reports what it waits on once it has stayed blocked this long.
inline constexpr auto kWaitReportAfter = std::chrono::milliseconds(50);
// A caller that drives its own wait counts as waiting once the wait has
// lasted this long (from its start, so reports are no later): most
// synchronous collectives end far sooner and never pay for the records.
inline constexpr auto kWaitNoticeAfter = std::chrono::milliseconds(1);
// How long the loop thread stays parked after the last waiting caller
// stopped driving: back-to-back synchronous calls then never wake it, and
// work nobody waits for yet (async ops, rank 0 coordinating idle ranks)
// starts at most this late.
inline constexpr auto kParkGrace = std::chrono::milliseconds(1);
// A drive that goes on through a whole grace period with no drive ending
// (a large collective, or a long wait) parks the loop thread until the last
// caller leaves, which wakes it, instead of once a grace period: each of
// those wake-ups takes the core from the driving caller when the
// framework's threads keep the other cores busy. This bounds the park in
// case that wake-up is missed.
inline constexpr auto kLongPark = std::chrono::milliseconds(100);
// A caller that drove lately and is still submitting (something arrived
// within the last kParkGrace) will be back to wait on what it submits: the
// loop thread stands aside longer, up to kBurstHold after that drive.
// Taking the first part of such a burst on its own would run it as a
// separate, partial round, competing for the core with the submitting
// thread.
inline constexpr auto kBurstHold = std::chrono::milliseconds(10);
// How often a waiter that cannot drive yet looks again (try_lock only: a
// blocking lock could outlast the waiter's timeout while the holder waits
// inside a collective).
inline constexpr auto kDriveRetry = std::chrono::microseconds(50);

// How long a tensor may wait on the ready board for the other ranks before
// it goes to rank 0 as a plain cache hit. Rank 0 alone sees mismatches,
// stalls, joins and deadlocks, so this bounds how late it learns of them;
// ranks whose submissions drift further apart than this (in steady state)
// negotiate through rank 0 as before.
inline constexpr auto kBoardPatience = std::chrono::milliseconds(20);
// How long a rank with nothing to offer waits before it joins a round
// another rank started: the tensors that round offers are often just about
// to be submitted here, and joining with them agrees in one round instead
// of an empty one and another. A rank that sends rank 0 anything joins at
// once (rank 0 emits no response list while its round is open).
inline constexpr auto kBoardJoinGrace = std::chrono::milliseconds(2);
// A time not read. A waiting caller's lean steps read no clock; the board
// offers they file are stamped by the next full step that finds no round
// open, so their patience starts that much late.
inline constexpr Clock::time_point kUnread = Clock::time_point::min();
// A waiting caller whose step only has board work runs a lean one
// (EngineImpl::CallerStep); at least every this many, a full step makes
// the checks lean ones leave out.
inline constexpr int kLeanSteps = 64;
// Tensors up to this size ride on the board: every rank reduces them from
// the others' copies, with no collective.
inline constexpr uint32_t kBoardCarryBytes = 1024;

inline std::string ShutdownMessage() {
  return "Horovod has been shut down. This was caused by an exception on one "
         "of the ranks or an attempt to run a collective after shutdown.";
}

class EngineImpl {
 public:
  EngineImpl(const JobInfo& job, Knobs knobs)
      : job_(job),
        knobs_(knobs),
        cache_(knobs.cache_capacity),
        sets_(job.size),
        results_(
            BufferPool::Make(knobs.keep_freed_memory ? kKeptResultBytes : 0)) {}

  ~EngineImpl() { Shutdown(); }

  Status Start();

  const JobInfo& job() const { return job_; }

  // Only rank 0 records: it sees every rank's negotiation.
  Status StartTimeline(const std::string& path, bool mark_cycles);
  EngineMetrics Metrics() const;
  void StopTimeline() { timeline_.Stop(); }
  ProcessSetTable& sets() { return sets_; }

  // The calling thread stops counting as a submitter until it submits
  // again: it has nothing outstanding, and the rank's other threads may
  // now all be waiting.
  void LeaveCensus();

  // See Engine::ResultBuffer.
  std::shared_ptr<Buffer> ResultBuffer(size_t bytes) {
    return results_->Acquire(bytes);
  }

  // Several tensors form a group; handles[i] is set for tensors[i].
  Status Enqueue(OpType op, const TensorView* tensors, size_t n,
                 const CollectiveArgs& args, Handle* handles);

  // See Engine::Refuse.
  Status Refuse(OpType op, size_t n, const CollectiveArgs& args,
                const Status& why);

  // A request that moves no tensor data (barrier, join, process-set
  // changes): `request` names the op, its name and its own fields; the rank
  // is filled in here.
  Status EnqueueControl(Request request, Handle* handle);

  Status Shutdown();

 private:
  std::string AutoName(OpType op);
  // Whether this rank is a member of `process_set` (a registered one).
  bool IsMember(int process_set) const;
  // Refuse, for the `n` tensors of an operation named `base` (a group's
  // members named from it as Enqueue names them) on a set this rank is a
  // member of.
  Status RefuseNamed(OpType op, const std::string& base, size_t n,
                     int process_set, const Status& why);

  // Ranks on our host (equal host keys) share memory unless disabled.
  // Waiters spin before they sleep even when ranks outnumber cores: spinners
  // yield the core every few microseconds, so the rank they wait for still
  // runs, and a futex wake-up costs far more than that (np=4 on 2 cores:
  // 4 B allreduce ~90 µs sleeping at once, ~15 µs spinning).
  // The executor makes groups for smaller member lists (process sets) the
  // same way.
  Status JoinSharedMemory(TcpTransport* tcp,
                          const std::vector<std::string>& hosts);

  // With every rank on this host in the shared-memory group, coordination
  // frames travel through it too and the loop sleeps on its doorbell, which
  // enqueues and incoming frames ring; otherwise the loop polls sockets and
  // the queue's eventfd.
  void UseControlLinks(std::vector<Socket> sockets);

  // Sleeps until an enqueue or a control frame may be waiting, or until
  // timeout_ms; afterwards HasData() tells which links have something.
  // The time since `begin` counts as idle, or as negotiation while work is
  // pending. Returns the time it ended, for the rest of the step: a step
  // reads the clock a few times, not at every use (a read costs about 25
  // ns here, several per step add up on a 1.5 µs collective).
  Clock::time_point AwaitEvent(int timeout_ms, Clock::time_point begin);
  // The wait itself; returns when it ended (`begin` if it did not wait).
  Clock::time_point AwaitEventUntimed(int timeout_ms, Clock::time_point begin);

  // --- background loop -----------------------------------------------------

  // The loop thread: drives whenever no waiting caller does.
  void Loop();

  // Parks the loop thread while callers drive (kParkGrace at a time, or
  // until they leave once a drive runs long), for kParkGrace after, and
  // while a burst of submissions goes on (kBurstHold); false: ask again.
  bool MayDrive();

  // A waiting caller's turn (DriveGate): run steps until `h` is done or
  // `until` passes. When another caller drives, that one may complete `h`;
  // look again shortly. The caller counts as waiting on `h` (OnWait) from
  // kWaitNoticeAfter on, until it returns.
  void DriveUntil(HandleState& h, Clock::time_point until);

  // One step with drive_mu_ held, begun at `begin`; ends the loop when the
  // job is over or failed. Returns the time the step ended.
  Clock::time_point RunStep(int max_wait_ms, Clock::time_point begin);
  // A waiting caller's shortcut with drive_mu_ held: when our board round
  // is open and every rank posts it within a few polls, reads it back and
  // executes it without the rest of a step (whose checks the next step
  // makes). True when it did; false, having changed nothing, otherwise.
  bool FinishRound();
  // A waiting caller's step while the board carries the work, with
  // drive_mu_ held: unless a control frame waits, a round is open or
  // kLeanSteps lean steps ran since the last full one, takes the new
  // submissions, sends what is not for the board its usual way, posts a
  // round and finishes it if it completes within a few polls. Leaves out
  // the full step's waits, its liveness and heartbeat checks, rank 0's
  // emitting and the metrics' timing; a lean step that sent anything or
  // posted nothing is followed by a full one. It reads the clock only to
  // send something; the offers it files are stamped by the next full step
  // (kUnread). False when it took no step.
  bool CallerStep();
  // Our own request list `l`, unless empty, to rank 0's coordinator (on
  // rank 0) or over the control link.
  Status SendOwn(const RequestList& l, Clock::time_point now);
  // Ends the loop: when a step or a round failed with `st` (fatal), or,
  // with `st` OK, when the job is over.
  void EndLoop(const Status& st);
  // Adds the step that just ended (it took `step`) to the metrics.
  void AddStepMetrics(Clock::duration step);

  // A collective failing on a broken link says only which neighbour this
  // rank lost; the control plane usually knows which rank actually died.
  // Rank 0 looks for a worker whose control link dropped or that reported a
  // failure; a worker reports its own (ReportFailure) and asks what rank 0
  // said last.
  Status RootCause(const Status& st);

  // A worker's link to rank 0 broke, or one of its transfers did. Read what
  // rank 0 sent before closing: a shutdown (a clean exit) or the reason the
  // job failed (rank 0 hears from every rank, so it names the root cause).
  // Without either, `fallback` stands, with what rank 0's silence says: a
  // closed link means rank 0 died; an open but silent one that it may be the
  // rank that hung (a transfer times out on the neighbour first, even when
  // the neighbour only waits on the hung rank like everyone else).
  Status FromCoordinator(const Status& fallback, bool about_rank0);

  // Rank 0 lost its link to worker `r`.
  static Status Disconnected(int r, const Status& cause);

  Status LostCoordinator(const Status& cause);

  // Rank 0: a tick on each tensor's negotiation for the rank that sent it.
  void TickNegotiation(int rank, const RequestList& list);

  RequestList CollectRequests(Clock::time_point now);

  static bool Empty(const RequestList& l);

  // The calling thread submits to this engine (see ThreadCensus): a check
  // on every submission, JoinCensus the first time.
  void CountSubmitter();
  void JoinCensus();

  // A thread of this rank begins or ends waiting on an operation: callers
  // that sleep as they wait, and drivers whose wait grew long.
  void OnWait(const HandleState& h, bool begin, Clock::time_point now);

  // True while every thread that has submitted to this rank waits (see
  // ThreadCensus). Called with waiting_mu_ held.
  bool Blocked() const;

  // What this rank waits on, for rank 0's deadlock check: the keys once
  // the rank has stayed blocked, waiting on the same operations, for
  // kWaitReportAfter (synchronous collectives that finish sooner cost
  // rank 0 nothing, and this rank an atomic load per step); an empty list,
  // riding on other news, once that wait has ended.
  void TakeWaiting(RequestList* list, Clock::time_point now);

  // Milliseconds until TakeWaiting will have a wait to report.
  int WaitReportDueMs(Clock::time_point now) const;

  // Rank 0's step, begun at `begin`; *finished once the job shut down.
  Status CoordinatorStep(int max_wait_ms, Clock::time_point begin,
                         bool* finished);

  // Rank 0: takes the coordinator's response list, sends it to every
  // worker and executes it.
  Status Emit(Clock::time_point now, bool* finished);

  // Rank 0: feeds the tuner what a list moved; its new choice governs the
  // coordinator at once and every rank's executor from the next list.
  void Tune(const ResponseList& list);

  // A worker's step, begun at `begin`; *finished once the job shut down.
  Status WorkerStep(int max_wait_ms, Clock::time_point begin, bool* finished);

  // Sends heartbeats that are due, and fails the job when a peer has been
  // silent past the operation timeout (see PeerLiveness).
  Status CheckLiveness(Clock::time_point now);

  Status ExecuteList(const ResponseList& list);

  // --- the ready board (ready_board.h; engine_board.cc) --------------------
  // With every rank on this host, cached allreduces of process set 0 are
  // agreed on the board instead of through rank 0 (see BoardStep); anything
  // the board cannot agree on in kBoardPatience goes the usual way. A job of
  // one rank has a board of its own in private memory, where every round
  // agrees as it is posted.

  // Whether this rank's knobs allow a board (every rank must agree).
  bool BoardAllowed() const;
  // Sets up the board when the job can use one.
  void UseBoard();
  // Whether `r` may wait on the board.
  bool BoardEligible(const Request& r) const;
  // A request on its usual way: a hit on `slot`, the cache slot found for
  // it at this epoch, when >= 0 (returns true; rank 0's go to its own
  // coordinator's slot lane), else the whole request.
  bool SendUsually(const Request& r, int slot, RequestList* list);
  // Reads back our open round, if every rank has posted it, and executes
  // what it agreed on.
  Status BoardComplete();
  // Unless a round is open: hands stale or overdue offers, and those
  // another rank marked as overdue, to `list` (their usual way), and posts a
  // round when we have new offers, or when another rank has started one and we
  // have offers, `eager` says we just sent rank 0 something, or kBoardJoinGrace
  // has passed. At `now` kUnread (a lean step) no time runs out.
  void BoardPost(RequestList* list, Clock::time_point now, bool eager);
  Status ExecuteBoard(const ReadyBoard::Result& result);
  // The fusion to run `result` with: one built for the same round, with
  // `*again` set, or the least recently used one, emptied; for a round that
  // fuses nothing (every slot carried), unfused_, with `*again` set.
  struct BoardFusion;
  BoardFusion& FusionFor(const ReadyBoard::Result& result, bool traced,
                         bool* again);
  // Whether `f` was built for `result`'s round: the same slots, carried
  // alike, the same fusion threshold, the cache's content unchanged since.
  bool Repeats(const BoardFusion& f, const ReadyBoard::Result& result) const;
  // posted_ = the indices of offers_, ascending by slot.
  void OrderOffersBySlot();
  // Milliseconds until the boards need the loop: 0 on BoardNews or an
  // offer not yet stamped, else when the oldest offer runs out of patience
  // or a noticed round's join grace ends.
  int BoardDueMs(Clock::time_point now) const;
  // The boards hold what the loop acts on at once: our round is complete,
  // or a peer has started a round we have not noticed yet. Peers post
  // without ringing a loop that is awake, which checks this as it waits
  // (its wait then ends on the board's own cache line).
  bool BoardNews() const;

  // The job cannot continue: tell the peers why (best effort), break every
  // link so they notice at once, and fail every pending operation.
  void Fatal(const std::string& reason);
  // A worker's failure, told to rank 0 (once); then StopWaits.
  void ReportFailure(const std::string& reason);
  // Ends every wait on this rank: its shared-memory peers see its failed
  // flag, its TCP links close.
  void StopWaits(const std::string& reason);

  // The most bytes of let-go results kept for reuse (ResultBuffer): a
  // framework that keeps results alive at once needs that much anyway, and
  // sizes that never recur stop adding up past this.
  static constexpr size_t kKeptResultBytes = size_t{1} << 30;

  JobInfo job_;
  Knobs knobs_;
  ResponseCache cache_;
  ProcessSetTable sets_;
  std::shared_ptr<BufferPool> results_;
  TensorQueue queue_;
  std::unique_ptr<LoopbackFabric> fabric_;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<ShmGroup> shm_;  // every rank on this host
  ShmGroupFactory make_shm_;       // empty without shared memory
  AdaptiveSpin loop_spin_;  // waits for work on the shared-memory doorbell
  std::vector<std::unique_ptr<ControlLink>> control_;
  Doorbell* bell_ = nullptr;  // set when control frames go through shm_
  Doorbell::Seen bell_seen_;
  std::vector<pollfd> pollfds_;
  uint64_t wakes_seen_ = 0;  // the queue's Wakes at the last look (no bell_)
  std::unique_ptr<PeerLiveness> liveness_;
  std::unique_ptr<Coordinator> coordinator_;
  Timeline timeline_;
  std::unique_ptr<Autotuner> tuner_;          // rank 0 with HOROVOD_AUTOTUNE
  int64_t tuned_small_allreduce_bytes_ = -1;  // for the next response list
  std::unique_ptr<Executor> executor_;
  std::thread thread_;
  std::shared_ptr<DriveGate> gate_;
  std::mutex waiting_mu_;
  std::vector<const HandleState*> waiters_;  // what threads wait on now
  static constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
  // Clock ticks at which the current waits become worth reporting.
  std::atomic<int64_t> report_due_{kNever};
  std::atomic<uint64_t> episode_{0};  // begins and ends of waits so far
  // Used by the thread running steps only:
  uint64_t reported_episode_ = 0;  // episode_ when rank 0 last heard
  bool rank0_has_waits_ = false;   // rank 0 holds a non-empty list
  std::shared_ptr<ThreadCensus> census_ = std::make_shared<ThreadCensus>();
  std::mutex drive_mu_;                  // held by whoever runs steps
  std::atomic<int> callers_{0};          // waiters driving or about to
  std::atomic<uint64_t> drive_ends_{0};  // drives that ended so far
  std::mutex park_mu_;
  std::condition_variable park_cv_;
  std::atomic<bool> parked_{false};
  // Parked until the callers are gone (kLongPark); the last one wakes it.
  std::atomic<bool> parked_for_callers_{false};
  // Under park_mu_: drive_ends_ at the last look, when that count was
  // first seen, and at the last park.
  uint64_t ends_seen_ = 0;
  Clock::time_point ends_seen_at_;
  uint64_t park_ends_seen_ = 0;
  uint64_t adds_seen_ = 0;  // queue_.Adds() at the last look (park_mu_)
  std::atomic<bool> shutdown_requested_{false};
  std::atomic<bool> loop_done_{false};
  bool shutdown_sent_ = false;
  // Rank 0's shutdown list, found while reading after a failed write (rank
  // 0 may exit as soon as it has sent it): the job ended normally.
  bool shutdown_received_ = false;
  bool failure_reported_ = false;
  uint64_t epoch_ = 0;
  // EngineMetrics: the running step's share of the times and cycles,
  // added to the totals when the step ends: by one thread at a time (the
  // one holding drive_mu_), read by any, so atomics without a lock. The
  // work counts are counted at once instead (here and in Executor::Work),
  // before the handles they concern complete: a thread that saw its handle
  // complete finds its tensor in Metrics().
  EngineMetrics step_metrics_;
  struct StepTotals {
    DriveCounter<uint64_t> cycles;
    DriveCounter<double> idle_s, negotiate_s, bookkeeping_s, copy_s, transfer_s;
  };
  StepTotals totals_;
  DriveCounter<uint64_t> cache_hits_;
  DriveCounter<uint64_t> cache_misses_;
  DriveCounter<uint64_t> board_overdue_;
  // Workers: by cache slot, the key of the tensor last sent by that slot,
  // to resend it in full if rank 0 finds the hit stale ("" for none).
  std::vector<std::string> hit_keys_;
  // A request waiting on the board under its cache slot. Its queue record
  // stays queued (its entry untouched) until the round that agrees on it
  // claims it, or the offer goes the usual way.
  struct BoardOffer {
    QueuedTensor* tensor;
    uint32_t slot;
    uint64_t found_at;  // epoch_ at the lookup: the slot may change later
    Clock::time_point since;
    uint32_t carry;  // bytes posted with the slot (0: too big to carry)

    const Request& request() const { return tensor->entry.request; }
    const void* operand() const {
      const TensorView& v = tensor->entry.tensor;
      return v.input != nullptr ? v.input : v.data;
    }
  };
  std::unique_ptr<ReadyBoard> board_;
  std::unique_ptr<Buffer> solo_area_;  // the board's area in a one-rank job
  std::vector<BoardOffer> offers_;     // in arrival order
  bool board_news_ = false;            // offers not yet posted
  // When we first saw another rank's round that we have not joined.
  Clock::time_point behind_since_ = Clock::time_point::max();
  // Indices into offers_ of the open round's offers, ascending by slot;
  // offers_ only grows at its end while a round is open.
  std::vector<size_t> posted_;
  std::vector<uint32_t> slot_starts_;  // OrderOffersBySlot's counts, reused
  std::vector<ReadyBoard::Offer> post_;
  ReadyBoard::Result board_result_;
  TensorSpares board_spares_;                 // what board responses shed
  std::vector<QueuedTensor*> fresh_;          // CollectRequests' intake, reused
  std::vector<QueuedTensor*> named_by_slot_;  // and its hits, to file
  // Response lists refilled in place from step to step: the one a worker
  // decodes, the one rank 0 takes from its coordinator.
  ResponseList received_, emitted_;
  std::vector<char> taken_;  // per offer: executed by the current round
  // The current round's agreed tensors, in slot order, and their entries
  // once claimed (null: no longer queued); each fused response's share.
  std::vector<QueuedTensor*> agreed_;
  std::vector<TensorEntry*> claimed_;
  // How ExecuteBoard fused a round's agreed slots: the fused responses
  // (storage reused from round to round; the first bytes.size() are the
  // round's), each one's bytes, entries and element counts (one per
  // tensor); and what they were built from, so
  // that a round agreeing on the same slots, carried alike, with the
  // cache's content unchanged, runs them again without reading the cache
  // per tensor.
  struct BoardFusion {
    std::vector<Response> responses;
    std::vector<int64_t> bytes;
    std::vector<std::vector<TensorEntry*>> entries;
    std::vector<std::vector<int64_t>> elements;
    std::vector<uint32_t> slots;
    std::vector<int> target;  // per agreed slot: its response (-1: carried)
    bool valid = false;       // false: built by a traced round (names)
    uint64_t cache_version = 0;
    int64_t fusion_threshold = 0;
    uint64_t last_use = 0;
  };
  // A few: a step's rounds may differ (a model's gradients, then a
  // metric's scalars), and each keeps its own.
  static constexpr size_t kBoardFusions = 4;
  std::vector<BoardFusion> fusions_ = std::vector<BoardFusion>(kBoardFusions);
  BoardFusion unfused_;  // a round's that fuses nothing: stays empty
  int lean_steps_ = 0;   // since the last full step
  uint64_t fusion_clock_ = 0;
  std::atomic<uint64_t> auto_name_counter_[8] = {};
};

}  // namespace horovod

#endif  // HOROVOD_RUNTIME_ENGINE_IMPL_H_
