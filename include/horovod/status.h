// Status: the error type that crosses every module boundary of the engine.
// A value type; cheap to copy when OK (no allocation). Thread-compatible.
#ifndef HOROVOD_STATUS_H_
#define HOROVOD_STATUS_H_

#include <string>
#include <utility>

namespace horovod {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 1,  // bad local input: nothing was enqueued
  kMismatch = 2,         // ranks disagreed about a tensor; the job continues
  kAborted = 3,          // a peer died or the engine shut down
  kTimeout = 4,          // a deadline passed
  kInternal = 5,
  kTampered = 6,  // a sealed frame or message failed its MAC on the way
};

class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message)
      : code_(code), message_(std::move(message)) {}

  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string m) {
    return Status(StatusCode::kInvalidArgument, std::move(m));
  }
  static Status Mismatch(std::string m) {
    return Status(StatusCode::kMismatch, std::move(m));
  }
  static Status Aborted(std::string m) {
    return Status(StatusCode::kAborted, std::move(m));
  }
  static Status Timeout(std::string m) {
    return Status(StatusCode::kTimeout, std::move(m));
  }
  static Status Internal(std::string m) {
    return Status(StatusCode::kInternal, std::move(m));
  }
  static Status Tampered(std::string m) {
    return Status(StatusCode::kTampered, std::move(m));
  }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

}  // namespace horovod

#define HVD_RETURN_IF_ERROR(expr)       \
  do {                                  \
    ::horovod::Status _hvd_st = (expr); \
    if (!_hvd_st.ok()) return _hvd_st;  \
  } while (0)

#endif  // HOROVOD_STATUS_H_
