// libFuzzer target: the control-message decoders (coordination/wire.h), fed
// the bytes a peer could send. Whatever decodes must re-encode to a frame
// that decodes to the same thing: the decoder accepts only what the encoder
// can say.
//
// First byte: bit 7 picks response lists over request lists; the low bits
// pick the job size (1-16). The rest is the frame.
#include <cstddef>
#include <cstdint>
#include <string>

#include "coordination/wire.h"
#include "fuzz_cache.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int job_size = 1 + (data[0] & 0x0f);
  const std::string frame(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] & 0x80) {
    horovod::ResponseCache cache(8);
    horovod::FillFuzzCache(&cache);
    horovod::ResponseList list, back;
    if (!horovod::DecodeResponseList(frame, job_size, &cache, &list).ok())
      return 0;
    const std::string again = horovod::EncodeResponseList(list, &cache);
    if (!horovod::DecodeResponseList(again, job_size, &cache, &back).ok() ||
        horovod::EncodeResponseList(back, &cache) != again)
      __builtin_trap();
  } else {
    horovod::RequestList list, back;
    if (!horovod::DecodeRequestList(frame, job_size, &list).ok()) return 0;
    const std::string again = horovod::EncodeRequestList(list);
    if (!horovod::DecodeRequestList(again, job_size, &back).ok() ||
        horovod::EncodeRequestList(back) != again)
      __builtin_trap();
  }
  return 0;
}
