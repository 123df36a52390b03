#include "timeline/timeline.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/logging.h"

namespace horovod {
namespace {

// How often new events reach the file, at most.
constexpr auto kFlushInterval = std::chrono::milliseconds(100);
// Rewriting the whole file may take at most 1/kMaxRewriteShare of the time.
constexpr int kMaxRewriteShare = 20;

void AppendJsonString(std::string* out, const std::string& s) {
  out->push_back('"');
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out->append(buf);
    } else {
      out->push_back(static_cast<char>(c));
    }
  }
  out->push_back('"');
}

bool WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Copies the first `n` bytes of `from` to the end of `to`: in the kernel
// where it can, through a buffer where it cannot.
bool CopyPrefix(int from, int to, uint64_t n) {
  loff_t in = 0;
  while (n > 0) {
    ssize_t c = copy_file_range(from, &in, to, nullptr, n, 0);
    if (c < 0 && errno == EINTR) continue;
    if (c <= 0) break;
    n -= static_cast<uint64_t>(c);
  }
  char buf[1 << 16];
  while (n > 0) {
    ssize_t r = pread(from, buf, std::min<uint64_t>(n, sizeof(buf)), in);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0 || !WriteAll(to, buf, static_cast<size_t>(r))) return false;
    in += r;
    n -= static_cast<uint64_t>(r);
  }
  return true;
}

}  // namespace

Timeline::~Timeline() { Stop(); }

Status Timeline::Start(const std::string& path, bool mark_cycles) {
  if (path.empty())
    return Status::InvalidArgument("timeline file path is empty");
  Stop();
  std::lock_guard<std::mutex> lock(mu_);
  path_ = path;
  t0_ = std::chrono::steady_clock::now();
  tensors_.clear();
  next_pid_ = 1;
  pending_.clear();
  stopping_ = false;
  file_fd_ = -1;
  body_len_ = 0;
  min_gap_ = {};
  warned_ = true;  // a failure here is reported by the Status below
  const auto since_epoch =
      std::chrono::duration_cast<std::chrono::microseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count();
  // The writer is not running yet: publishing under mu_ is safe.
  if (!Publish("[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"args\":"
               "{\"name\":\"horovod\",\"start_time_since_epoch_in_micros\":" +
               std::to_string(since_epoch) + "}}"))
    return Status::InvalidArgument("cannot write the timeline file '" + path +
                                   "': " + std::strerror(errno));
  warned_ = false;
  mark_cycles_.store(mark_cycles);
  active_.store(true);
  writer_ = std::thread([this] { WriterLoop(); });
  return Status::OK();
}

void Timeline::Stop() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!writer_.joinable()) return;
  active_.store(false);
  for (auto& kv : tensors_) CloseSpans(kv.second);
  stopping_ = true;
  wake_.notify_all();
  lock.unlock();
  writer_.join();  // it publishes what is left before it returns
  if (file_fd_ >= 0) close(file_fd_);
  file_fd_ = -1;
}

void Timeline::WriterLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    wake_.wait_for(
        lock,
        std::max<std::chrono::steady_clock::duration>(kFlushInterval, min_gap_),
        [this] { return stopping_; });
    const bool last = stopping_;
    if (!pending_.empty()) {
      std::string chunk;
      chunk.swap(pending_);
      lock.unlock();
      auto t = std::chrono::steady_clock::now();
      Publish(chunk);
      min_gap_ = (std::chrono::steady_clock::now() - t) * kMaxRewriteShare;
      lock.lock();
    }
    if (last) return;
  }
}

bool Timeline::Publish(const std::string& chunk) {
  static const char kClose[] = "\n]\n";
  const std::string tmp = path_ + ".tmp" + std::to_string(getpid());
  int fd = open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  bool ok = fd >= 0 && (file_fd_ < 0 || CopyPrefix(file_fd_, fd, body_len_)) &&
            WriteAll(fd, chunk.data(), chunk.size()) &&
            WriteAll(fd, kClose, sizeof(kClose) - 1) &&
            rename(tmp.c_str(), path_.c_str()) == 0;
  if (!ok) {
    if (!warned_)
      HVD_LOG(kWarning, "cannot write the timeline file '"
                            << path_ << "': " << std::strerror(errno)
                            << "; events are dropped");
    warned_ = true;
    if (fd >= 0) {
      close(fd);
      unlink(tmp.c_str());
    }
    return false;
  }
  if (file_fd_ >= 0) close(file_fd_);
  file_fd_ = fd;
  body_len_ += chunk.size();
  return true;
}

Timeline::TensorState& Timeline::StateOf(const std::string& tensor) {
  auto it = tensors_.find(tensor);
  if (it != tensors_.end()) return it->second;
  TensorState& s = tensors_[tensor];
  s.pid = next_pid_++;
  pending_ += ",\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":";
  pending_ += std::to_string(s.pid);
  pending_ += ",\"args\":{\"name\":";
  AppendJsonString(&pending_, tensor);
  pending_ += "}},\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":";
  pending_ += std::to_string(s.pid);
  pending_ += ",\"args\":{\"sort_index\":";
  pending_ += std::to_string(s.pid);
  pending_ += "}}";
  return s;
}

void Timeline::Event(char ph, const char* name, int pid, const char* extra) {
  const auto ts = std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::steady_clock::now() - t0_)
                      .count();
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                ",\n{\"ph\":\"%c\",\"name\":\"%s\",\"ts\":%lld,\"pid\":%d,"
                "\"tid\":0%s}",
                ph, name, static_cast<long long>(ts), pid, extra);
  pending_ += buf;
}

void Timeline::CloseSpans(TensorState& s) {
  switch (s.phase) {
    case Phase::kActivity:
      Event('E', "", s.pid);
      [[fallthrough]];
    case Phase::kOp:
    case Phase::kNegotiating:
      Event('E', "", s.pid);
      break;
    case Phase::kIdle:
      break;
  }
  s.phase = Phase::kIdle;
}

void Timeline::NegotiateTick(const std::string& tensor, const std::string& op,
                             int rank) {
  if (!active()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!active()) return;  // stopped meanwhile: its spans are closed
  TensorState& s = StateOf(tensor);
  if (s.phase != Phase::kNegotiating) {
    CloseSpans(s);
    Event('B', ("NEGOTIATE_" + op).c_str(), s.pid);
    s.phase = Phase::kNegotiating;
  }
  Event('X', std::to_string(rank).c_str(), s.pid, ",\"dur\":0");
}

void Timeline::OpStart(const std::string& tensor, const std::string& op) {
  if (!active()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!active()) return;  // stopped meanwhile: its spans are closed
  TensorState& s = StateOf(tensor);
  CloseSpans(s);
  Event('B', op.c_str(), s.pid);
  Event('B', "QUEUE", s.pid);
  s.phase = Phase::kActivity;
}

void Timeline::Activity(const std::string& tensor,
                        const std::string& activity) {
  if (!active()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!active()) return;  // stopped meanwhile: its spans are closed
  auto it = tensors_.find(tensor);
  if (it == tensors_.end()) return;
  TensorState& s = it->second;
  if (s.phase != Phase::kActivity && s.phase != Phase::kOp) return;
  if (s.phase == Phase::kActivity) Event('E', "", s.pid);
  Event('B', activity.c_str(), s.pid);
  s.phase = Phase::kActivity;
}

void Timeline::OpEnd(const std::string& tensor) {
  if (!active()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!active()) return;  // stopped meanwhile: its spans are closed
  auto it = tensors_.find(tensor);
  if (it != tensors_.end()) CloseSpans(it->second);
}

void Timeline::MarkCycleStart() {
  if (!active() || !mark_cycles()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!active()) return;
  Event('i', "CYCLE_START", 0, ",\"s\":\"g\"");
}

}  // namespace horovod
