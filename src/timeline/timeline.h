// Timeline: records what the engine does to each tensor as a Chrome trace
// (JSON array format; opens in Perfetto or chrome://tracing). Each tensor is
// a trace process; its negotiation (NEGOTIATE_<OP>, one zero-length tick per
// rank that reported the tensor ready), then its operation (<OP>) with the
// activities inside it (QUEUE, MEMCPY_IN_FUSION_BUFFER, the transport phase,
// MEMCPY_OUT_FUSION_BUFFER). Optional CYCLE_START instants mark loop cycles.
//
// The file is valid JSON at every moment: events collect in memory and a
// writer thread publishes them by writing a complete new file beside the old
// one and renaming it over the old (atomic), at most every kFlushInterval
// and never so often that rewriting costs more than a few percent of time.
//
// Ownership: the engine owns one Timeline. Thread-safety: every method may be
// called from any thread; the event methods are meant for the engine's loop
// and cost one atomic load when the timeline is off.
#ifndef HOROVOD_TIMELINE_TIMELINE_H_
#define HOROVOD_TIMELINE_TIMELINE_H_

#include <horovod/status.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

namespace horovod {

class Timeline {
 public:
  Timeline() = default;
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // Starts recording into `path` (replacing it). A timeline already running
  // is finished first. The file exists, holding a valid trace, on return.
  Status Start(const std::string& path, bool mark_cycles);
  // Closes every open span, writes the file a last time and stops.
  void Stop();
  bool active() const { return active_.load(std::memory_order_relaxed); }

  // Rank `rank` reported `tensor` ready; the first report opens
  // NEGOTIATE_<op>.
  // Names are JSON-escaped; op and activity names are upper-case words.
  void NegotiateTick(const std::string& tensor, const std::string& op,
                     int rank);
  // Negotiation over: the operation `op` starts and waits in QUEUE until
  // the executor reaches it.
  void OpStart(const std::string& tensor, const std::string& op);
  // Ends the tensor's current activity and begins `activity`.
  void Activity(const std::string& tensor, const std::string& activity);
  // Ends the tensor's activity and operation.
  void OpEnd(const std::string& tensor);
  void MarkCycleStart();
  bool mark_cycles() const {
    return mark_cycles_.load(std::memory_order_relaxed);
  }

 private:
  enum class Phase { kIdle, kNegotiating, kOp, kActivity };
  struct TensorState {
    int pid = 0;
    Phase phase = Phase::kIdle;
  };

  TensorState& StateOf(const std::string& tensor);  // mu_ held
  void Event(char ph, const char* name, int pid, const char* extra = "");
  void CloseSpans(TensorState& s);  // mu_ held
  void WriterLoop();
  // Writes the published file plus `chunk` as a new file and renames it
  // over the old; false (and one logged warning) if that fails.
  bool Publish(const std::string& chunk);

  std::atomic<bool> active_{false};
  std::atomic<bool> mark_cycles_{false};

  std::mutex mu_;
  std::condition_variable wake_;
  std::string path_;
  std::chrono::steady_clock::time_point t0_;
  std::unordered_map<std::string, TensorState> tensors_;
  int next_pid_ = 1;
  std::string pending_;  // events not yet in the file, each ",\n{...}"
  bool stopping_ = false;
  std::thread writer_;

  // Used by whoever publishes: Start (before the writer runs), then the
  // writer thread.
  int file_fd_ = -1;       // the published file, open for reading
  uint64_t body_len_ = 0;  // its bytes before the closing "\n]\n"
  std::chrono::steady_clock::duration min_gap_{};
  bool warned_ = false;
};

}  // namespace horovod

#endif  // HOROVOD_TIMELINE_TIMELINE_H_
