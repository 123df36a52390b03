// SpanCursor: a position within a message laid out over spans (iovecs), so
// that a transport can move a message gathered from, or scattered to, many
// buffers in steps of any size, exactly as it moves a contiguous one. Does
// not own the spans. A value type; used by one thread.
#ifndef HOROVOD_TRANSPORT_SPAN_CURSOR_H_
#define HOROVOD_TRANSPORT_SPAN_CURSOR_H_

#include <sys/uio.h>

#include <algorithm>
#include <cstddef>

namespace horovod {

class SpanCursor {
 public:
  SpanCursor(const iovec* spans, size_t n) : spans_(spans), n_(n) {
    for (size_t i = 0; i < n; ++i) total_ += spans[i].iov_len;
  }

  // The message's length, and how much of it lies behind the cursor.
  size_t total() const { return total_; }
  size_t at() const { return at_; }

  // Describes the bytes from the cursor up to position `upto` in at most
  // `most` iovecs (empty spans skipped); returns how many it wrote and, in
  // *bytes, how many bytes they cover (less than asked when `most` ran out).
  int Fill(size_t upto, iovec* out, int most, size_t* bytes) const {
    size_t left = upto > at_ ? upto - at_ : 0;
    *bytes = 0;
    int k = 0;
    for (size_t i = i_, in = in_; i < n_ && left > 0 && k < most; ++i, in = 0) {
      const size_t len = std::min(left, spans_[i].iov_len - in);
      if (len == 0) continue;
      out[k++] = {static_cast<char*>(spans_[i].iov_base) + in, len};
      left -= len;
      *bytes += len;
    }
    return k;
  }

  // Moves forward `bytes`, calling fn(char* data, size_t len) on each part
  // of a span passed over, in order.
  template <typename Fn>
  void Advance(size_t bytes, Fn&& fn) {
    at_ += bytes;
    while (bytes > 0) {
      const size_t len = std::min(bytes, spans_[i_].iov_len - in_);
      if (len > 0) fn(static_cast<char*>(spans_[i_].iov_base) + in_, len);
      in_ += len;
      bytes -= len;
      if (in_ == spans_[i_].iov_len) {
        ++i_;
        in_ = 0;
      }
    }
  }
  void Advance(size_t bytes) {
    Advance(bytes, [](char*, size_t) {});
  }

 private:
  const iovec* spans_;
  size_t n_;
  size_t total_ = 0;
  size_t at_ = 0;
  size_t i_ = 0;   // the span the cursor is in
  size_t in_ = 0;  // how far into it
};

}  // namespace horovod

#endif  // HOROVOD_TRANSPORT_SPAN_CURSOR_H_
