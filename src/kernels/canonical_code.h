// CanonicalCode: an engine status as the canonical error code (gRPC's
// numbering) that both TensorFlow's TF_Code and XLA's FFI error codes use.
// Only input refused before anything was enqueued is the caller's
// INVALID_ARGUMENT; every other failure happened between ranks.
#ifndef HOROVOD_KERNELS_CANONICAL_CODE_H_
#define HOROVOD_KERNELS_CANONICAL_CODE_H_

#include <horovod/status.h>

namespace horovod {
namespace kernels {

enum CanonicalCodeValue : int {
  kCanonicalInvalidArgument = 3,
  kCanonicalDeadlineExceeded = 4,
  kCanonicalFailedPrecondition = 9,
  kCanonicalAborted = 10,
  kCanonicalInternal = 13,
};

// `status_code` is a horovod::StatusCode value (framework_api.h's wait()).
inline int CanonicalCode(int status_code, bool rejected) {
  switch (static_cast<StatusCode>(status_code)) {
    case StatusCode::kInvalidArgument:
      return rejected ? kCanonicalInvalidArgument : kCanonicalInternal;
    case StatusCode::kMismatch:
      return kCanonicalFailedPrecondition;
    case StatusCode::kTimeout:
      return kCanonicalDeadlineExceeded;
    case StatusCode::kAborted:
      return kCanonicalAborted;
    default:
      return kCanonicalInternal;
  }
}

}  // namespace kernels
}  // namespace horovod

#endif  // HOROVOD_KERNELS_CANONICAL_CODE_H_
