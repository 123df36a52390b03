// libFuzzer target: the rendezvous text records (rendezvous/peer_table.h),
// which arrive from peers after authentication but are still not trusted.
// Whatever parses must describe valid peers.
//
// First byte: job size for the table (1-64). The rest is the text.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "rendezvous/peer_table.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int n = 1 + data[0] % 64;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  std::vector<std::string> addrs, hosts;
  if (horovod::ParsePeerTable(text, n, &addrs, &hosts).ok()) {
    if (addrs.size() != static_cast<size_t>(n) || hosts.size() != addrs.size())
      __builtin_trap();
    for (size_t r = 0; r < addrs.size(); ++r) {
      std::string host;
      int port = 0;
      if (!horovod::ParseAddress(addrs[r], &host, &port).ok() || port < 1 ||
          port > 65535 || hosts[r].empty())
        __builtin_trap();
    }
  }
  std::string addr, key, settings;
  if (horovod::ParseAnnouncement(text, &addr, &key, &settings).ok())
    (void)horovod::CompareSettings("HOROVOD_CACHE_CAPACITY=1024", settings, 1);
  return 0;
}
