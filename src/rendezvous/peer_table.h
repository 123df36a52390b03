// Peer table: the text records of the rendezvous, read from the network
// after authentication but still untrusted (a bug or a corrupted peer must
// not crash a rank). A rank announces itself to rank 0 as
// "<address>:<port> <host key> <settings>"; rank 0 answers with one
// "<address>:<port> <host key>" line per rank.
// Every parser bounds its input and rejects anything malformed with a
// Status. Pure functions; thread-safe.
#ifndef HOROVOD_RENDEZVOUS_PEER_TABLE_H_
#define HOROVOD_RENDEZVOUS_PEER_TABLE_H_

#include <horovod/status.h>

#include <string>
#include <vector>

namespace horovod {

// "<host>:<port>", port 1-65535, at most 256 characters.
Status ParseAddress(const std::string& text, std::string* host, int* port);
// Longest announcement a rank may send.
inline constexpr size_t kMaxAnnouncementBytes = 1024;

// "<address> <host key>[ <settings>]"; the key and the settings are
// printable ASCII without spaces.
Status ParseAnnouncement(const std::string& text, std::string* addr,
                         std::string* host_key, std::string* settings);
// Rank `rank`'s settings ("NAME=value;...", JobInfo::settings) against rank
// 0's: an InvalidArgument naming the first setting that differs, both
// values and both ranks.
Status CompareSettings(const std::string& mine, const std::string& theirs,
                       int rank);
// `n` announcement lines separated by '\n'; (*addrs)[r] and (*hosts)[r] for
// rank r.
Status ParsePeerTable(const std::string& table, int n,
                      std::vector<std::string>* addrs,
                      std::vector<std::string>* hosts);

// Where rank `rank` stands among the hosts, from every rank's host key:
// hosts are numbered in the order of their lowest rank; homogeneous when
// every host holds as many ranks. Launchers that only give local numbers
// (mpirun, torchrun) cannot tell an uneven spread; this can.
struct HostPlacement {
  int cross_rank = 0;  // our host's number
  int cross_size = 1;  // hosts
  bool homogeneous = true;
};
HostPlacement PlaceByHostKeys(const std::vector<std::string>& hosts, int rank);

}  // namespace horovod

#endif  // HOROVOD_RENDEZVOUS_PEER_TABLE_H_
