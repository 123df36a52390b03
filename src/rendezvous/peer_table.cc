#include "rendezvous/peer_table.h"

#include <cstdlib>

namespace horovod {

Status ParseAddress(const std::string& text, std::string* host, int* port) {
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || text.size() > 256)
    return Status::Aborted("malformed peer address");
  *host = text.substr(0, colon);
  char* end = nullptr;
  long p = std::strtol(text.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || p <= 0 || p > 65535)
    return Status::Aborted("malformed peer port");
  *port = static_cast<int>(p);
  return Status::OK();
}

Status ParseAnnouncement(const std::string& text, std::string* addr,
                         std::string* host_key) {
  size_t space = text.find(' ');
  if (space == std::string::npos || text.size() > 512)
    return Status::Aborted("malformed rank announcement");
  *addr = text.substr(0, space);
  *host_key = text.substr(space + 1);
  if (host_key->empty()) return Status::Aborted("empty host key");
  for (char c : *host_key)
    if (c <= ' ' || c > '~') return Status::Aborted("malformed host key");
  std::string h;
  int p;
  return ParseAddress(*addr, &h, &p);
}

Status ParsePeerTable(const std::string& table, int n,
                      std::vector<std::string>* addrs,
                      std::vector<std::string>* hosts) {
  if (n < 1) return Status::Aborted("peer table for no ranks");
  addrs->assign(n, std::string());
  hosts->assign(n, std::string());
  size_t pos = 0;
  for (int r = 0; r < n; ++r) {
    if (pos >= table.size())
      return Status::Aborted("truncated peer table from rank 0");
    size_t end = table.find('\n', pos);
    if (end == std::string::npos) end = table.size();
    HVD_RETURN_IF_ERROR(ParseAnnouncement(table.substr(pos, end - pos),
                                          &(*addrs)[r], &(*hosts)[r]));
    pos = end + 1;
  }
  return Status::OK();
}

}  // namespace horovod
