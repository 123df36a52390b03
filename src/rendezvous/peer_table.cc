#include "rendezvous/peer_table.h"

#include <algorithm>
#include <cstdlib>
#include <utility>
#include <vector>

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

namespace {

// Printable ASCII without spaces.
bool Printable(const std::string& s) {
  for (char c : s)
    if (c <= ' ' || c > '~') return false;
  return true;
}

// "NAME=value;..." as (name, value) pairs, in order.
std::vector<std::pair<std::string, std::string>> SplitSettings(
    const std::string& s) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t end = s.find(';', pos);
    if (end == std::string::npos) end = s.size();
    const std::string item = s.substr(pos, end - pos);
    const size_t eq = item.find('=');
    out.emplace_back(item.substr(0, eq),
                     eq == std::string::npos ? "" : item.substr(eq + 1));
    pos = end + 1;
  }
  return out;
}

// The value of `name` among `settings`, or "(unset)".
std::string SettingOf(
    const std::vector<std::pair<std::string, std::string>>& settings,
    const std::string& name) {
  for (const auto& kv : settings)
    if (kv.first == name) return kv.second;
  return "(unset)";
}

}  // namespace

Status ParseAnnouncement(const std::string& text, std::string* addr,
                         std::string* host_key, std::string* settings) {
  size_t space = text.find(' ');
  if (space == std::string::npos || text.size() > kMaxAnnouncementBytes)
    return Status::Aborted("malformed rank announcement");
  *addr = text.substr(0, space);
  const size_t second = text.find(' ', space + 1);
  *host_key =
      text.substr(space + 1, second == std::string::npos ? std::string::npos
                                                         : second - space - 1);
  settings->clear();
  if (second != std::string::npos) *settings = text.substr(second + 1);
  if (!Printable(*settings)) return Status::Aborted("malformed settings");
  if (host_key->empty()) return Status::Aborted("empty host key");
  if (!Printable(*host_key)) return Status::Aborted("malformed host key");
  std::string h;
  int p;
  return ParseAddress(*addr, &h, &p);
}

Status CompareSettings(const std::string& mine, const std::string& theirs,
                       int rank) {
  if (mine == theirs) return Status::OK();
  const auto a = SplitSettings(mine), b = SplitSettings(theirs);
  // Every name either side has, rank 0's first.
  for (const auto* side : {&a, &b})
    for (const auto& kv : *side) {
      const std::string va = SettingOf(a, kv.first),
                        vb = SettingOf(b, kv.first);
      if (va != vb)
        return Status::InvalidArgument(
            kv.first + " differs between ranks: " + va + " on rank 0, " + vb +
            " on rank " + std::to_string(rank) +
            "; it must be equal on every rank");
    }
  return Status::InvalidArgument("settings differ between rank 0 and rank " +
                                 std::to_string(rank));
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
    std::string settings;
    HVD_RETURN_IF_ERROR(ParseAnnouncement(
        table.substr(pos, end - pos), &(*addrs)[r], &(*hosts)[r], &settings));
    if (!settings.empty()) return Status::Aborted("malformed peer table");
    pos = end + 1;
  }
  return Status::OK();
}

HostPlacement PlaceByHostKeys(const std::vector<std::string>& hosts, int rank) {
  HostPlacement p;
  std::vector<std::string> seen;  // hosts in order of their lowest rank
  std::vector<int> ranks;         // ranks on each
  for (size_t r = 0; r < hosts.size(); ++r) {
    size_t h = 0;
    while (h < seen.size() && seen[h] != hosts[r]) ++h;
    if (h == seen.size()) {
      seen.push_back(hosts[r]);
      ranks.push_back(0);
    }
    ++ranks[h];
    if (static_cast<int>(r) == rank) p.cross_rank = static_cast<int>(h);
  }
  p.cross_size = std::max<int>(1, static_cast<int>(seen.size()));
  for (int n : ranks) p.homogeneous = p.homogeneous && n == ranks[0];
  return p;
}

}  // namespace horovod
