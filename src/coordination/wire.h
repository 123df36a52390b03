// Wire codec for the control messages. Little-endian, versioned, and
// defensive: the decoder validates every length against the bytes remaining
// and every enum against its range before allocating or trusting anything,
// and reports malformed input as a Status (never a crash or a huge alloc).
//
// Response lists are compressed against the ResponseCache: a response whose
// every tensor sits in the cache with identical parameters travels as slot
// numbers. Encoder and decoder must hold identical caches (see
// response_cache.h for why they do).
#ifndef HOROVOD_COORDINATION_WIRE_H_
#define HOROVOD_COORDINATION_WIRE_H_

#include <horovod/status.h>

#include <string>

#include "coordination/message.h"
#include "coordination/response_cache.h"

namespace horovod {

// The longest tensor name and the most dimensions a request may carry. The
// decoder refuses a message past either as malformed, which ends the job,
// so the sending rank refuses the call first (CheckRequest).
constexpr size_t kWireMaxName = 4096;
constexpr size_t kWireMaxDims = 64;
// A refusal's reason travels cut to this many bytes.
constexpr size_t kWireMaxRefusal = 2048;

std::string EncodeRequestList(const RequestList& list);
Status DecodeRequestList(const std::string& bytes, int job_size,
                         RequestList* out);

// `cache` may be null (no compression).
std::string EncodeResponseList(const ResponseList& list,
                               const ResponseCache* cache);
Status DecodeResponseList(const std::string& bytes, int job_size,
                          const ResponseCache* cache, ResponseList* out);

}  // namespace horovod

#endif  // HOROVOD_COORDINATION_WIRE_H_
