// libFuzzer target: what a peer's shared-memory segment says about itself.
// The segment name arrives over the data link and the header is the peer's
// to write; both are checked before anything in the segment is used. A
// header that passes must be exactly the layout asked for.
//
// First byte: member count asked for (2-17); then 8 bytes of region size
// asked for; then the header page; names are tried on the whole input.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "transport/shm_group.h"
#include "transport/shm_segment.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string name(reinterpret_cast<const char*>(data), size);
  if (horovod::ShmSegment::ValidName(name) &&
      (name.size() > 64 || name[0] != '/' ||
       name.find('/', 1) != std::string::npos))
    __builtin_trap();
  if (size < 9) return 0;
  const int members = 2 + data[0] % 16;
  uint64_t region;
  std::memcpy(&region, data + 1, sizeof(region));
  char page[horovod::ShmGroup::kHeaderBytes] = {0};
  std::memcpy(page, data + 9,
              std::min(sizeof(page), static_cast<size_t>(size - 9)));
  (void)horovod::ShmGroup::CheckHeader(page, members,
                                       static_cast<size_t>(region));
  return 0;
}
