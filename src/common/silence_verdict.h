// Silence verdicts: the one wording of "a peer sent nothing past its
// deadline". The transport's transfer deadline and the engine's liveness
// check both write it; failure diagnosis reads the rank back, also from a
// peer's report, which reaches rank 0 only as text. Keeping the writer and
// the reader side by side is what keeps them in step. Pure functions.
#ifndef HOROVOD_COMMON_SILENCE_VERDICT_H_
#define HOROVOD_COMMON_SILENCE_VERDICT_H_

#include <string>

namespace horovod {

// "rank <rank> sent nothing for <seconds> s
// (HOROVOD_OPERATION_TIMEOUT_SECONDS); it is <likely_cause>", with `seconds`
// written to one decimal.
std::string SilenceVerdict(int rank, double seconds,
                           const std::string& likely_cause);

// The rank a silence verdict names, or -1 when `message` is not one.
int SilentRank(const std::string& message);

}  // namespace horovod

#endif  // HOROVOD_COMMON_SILENCE_VERDICT_H_
