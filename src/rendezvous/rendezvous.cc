#include "rendezvous/rendezvous.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/hmac.h"
#include "common/logging.h"
#include "rendezvous/handshake.h"
#include "rendezvous/link_acceptor.h"
#include "rendezvous/peer_table.h"
#include "rendezvous/pmix_board.h"

namespace horovod {
namespace {

// Single-host launches without a launcher-provided address (mpirun, torchrun)
// publish rank 0's port and a fresh secret in a file only this user can read.
Status PublishRendezvousFile(const std::string& path, int port,
                             const std::string& secret) {
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return Status::Internal("cannot write " + tmp);
  chmod(tmp.c_str(), 0600);
  std::fprintf(f, "%d %s\n", port, secret.c_str());
  std::fclose(f);
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return Status::Internal("cannot publish " + path);
  return Status::OK();
}

Status ReadRendezvousFile(const std::string& path, Deadline deadline, int* port,
                          std::string* secret) {
  while (true) {
    struct stat st;
    if (stat(path.c_str(), &st) == 0) {
      if (st.st_uid != getuid() || (st.st_mode & 077) != 0)
        return Status::Aborted("refusing rendezvous file " + path +
                               ": not private to this user");
      std::ifstream in(path);
      if (in >> *port >> *secret && *port > 0 && *port < 65536)
        return Status::OK();
    }
    if (deadline.Expired())
      return Status::Timeout("rank 0 did not publish " + path +
                             " before the start timeout");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// Under mpirun across hosts rank 0 posts "port secret addr,addr,..." (its
// addresses, as it cannot know which one the others reach) through PMIx.
std::string PmixKey(const JobInfo& job) {
  return "horovod." +
         job.rendezvous_file.substr(job.rendezvous_file.rfind('/') + 1);
}

Status PostThroughPmix(const JobInfo& job, int port, const std::string& secret,
                       PmixBoard* board) {
  std::string addrs;
  for (const std::string& a : LocalIPv4Addresses())
    if (a.rfind("127.", 0) != 0)  // the others are on other hosts
      addrs += (addrs.empty() ? "" : ",") + a;
  if (addrs.empty())
    return Status::Aborted(
        "rank 0 has no network address other hosts could reach");
  HVD_RETURN_IF_ERROR(board->Open());
  return board->Publish(PmixKey(job),
                        std::to_string(port) + " " + secret + " " + addrs);
}

Status ReadFromPmix(const JobInfo& job, Deadline deadline, PmixBoard* board,
                    int* port, std::string* secret,
                    std::vector<std::string>* hosts) {
  HVD_RETURN_IF_ERROR(board->Open());
  std::string posted;
  HVD_RETURN_IF_ERROR(board->ReadRank0(PmixKey(job), deadline, &posted));
  std::istringstream in(posted);
  std::string list;
  if (!(in >> *port >> *secret >> list) || *port <= 0 || *port > 65535)
    return Status::Aborted("rank 0's PMIx rendezvous entry is malformed");
  hosts->clear();
  std::istringstream items(list);
  for (std::string a; std::getline(items, a, ',');)
    if (!a.empty()) hosts->push_back(a);
  return Status::OK();
}

// Connects to rank 0 at the first of `hosts` that answers: one host gets
// the whole deadline (rank 0 may still be starting), each of several a
// share of it (rank 0 listens already; an address that refuses is not its).
Status DialRank0(const std::vector<std::string>& hosts, int port,
                 Deadline deadline, Socket* out, std::string* reached) {
  std::string errors;
  for (const std::string& h : hosts) {
    Deadline attempt =
        hosts.size() == 1
            ? deadline
            : Deadline::After(std::min(2.0, deadline.RemainingMs() / 1000.0));
    Status st = Socket::Connect(h, port, attempt, out);
    if (st.ok()) {
      *reached = h;
      return st;
    }
    errors += (errors.empty() ? "" : "; ") + h + ": " + st.message();
  }
  return Status::Timeout(errors);
}

// Text from a peer, fit for a log line.
std::string Printable(const std::string& text) {
  std::string out;
  for (char c : text.substr(0, 400)) out += (c < ' ' || c > '~') ? '?' : c;
  return out;
}

std::string SanitizedHostKey(const std::string& key) {
  std::string out;
  for (char c : key.substr(0, 200)) out += (c <= ' ' || c > '~') ? '_' : c;
  return out.empty() ? "unknown" : out;
}

// A rendezvous failure rank 0 passes on to the workers already connected,
// in place of the peer table, so they report the absent ranks too.
constexpr char kFailureMark = '!';
constexpr double kVerdictGraceS = 3;

}  // namespace

Status EstablishMesh(const JobInfo& job, Mesh* out) {
  const int n = job.size;
  Deadline deadline = Deadline::After(job.start_timeout_s);
  // A worker may have started its clock before rank 0 did: it waits a
  // little longer for the table, so rank 0's verdict on a failed rendezvous
  // (which ranks never came) reaches it rather than a bare timeout.
  Deadline verdict_deadline =
      Deadline::After(job.start_timeout_s + kVerdictGraceS);
  out->data.clear();
  out->control.clear();
  out->data.resize(n);
  out->hosts.assign(n, SanitizedHostKey(job.host_key));
  if (n == 1) return Status::OK();

  PmixBoard board;  // open until every rank has connected
  HandshakeParams hp;
  hp.secret = job.secret;
  hp.my_rank = job.rank;
  hp.job_size = n;
  Socket listener;
  std::vector<std::string> addrs(n);

  if (job.rank == 0) {
    std::string bind =
        job.controller_addr.empty() ? job.bind_addr : job.controller_addr;
    int port = 0;
    HVD_RETURN_IF_ERROR(Socket::Listen(bind, job.controller_port,
                                       std::max(128, n), &listener, &port));
    if (job.controller_port == 0) {
      if (job.rendezvous_file.empty())
        return Status::InvalidArgument(
            "no controller port and no rendezvous file");
      uint8_t raw[32];
      if (!SecureRandom(raw, sizeof(raw)))
        return Status::Internal("no secure random source");
      hp.secret = HexEncode(raw, sizeof(raw));
      HVD_RETURN_IF_ERROR(
          job.rendezvous_pmix
              ? PostThroughPmix(job, port, hp.secret, &board)
              : PublishRendezvousFile(job.rendezvous_file, port, hp.secret));
    } else if (hp.secret.empty()) {
      return Status::InvalidArgument(
          "HOROVOD_SECRET_KEY is not set: a multi-process job needs the job "
          "secret (horovodrun sets it)");
    }
    addrs[0] =
        (bind.empty() || bind == "0.0.0.0" ? std::string("127.0.0.1") : bind) +
        ":" + std::to_string(port);
    out->control.resize(n);
    AcceptorOptions options;
    options.first_frame_max = kMaxAnnouncementBytes;
    std::vector<std::string> settings(n);
    Status st =
        LinkAcceptor(listener, hp, LinkKind::kControl, options)
            .Run(
                deadline, &out->control, [](int r) { return r != 0; },
                [&](int r, const std::string& announcement) {
                  return ParseAnnouncement(announcement, &addrs[r],
                                           &out->hosts[r], &settings[r]);
                });
    // Settings that differ fail every rank alike, once all are here.
    for (int r = 1; r < n && st.ok(); ++r)
      st = CompareSettings(job.settings, settings[r], r);
    if (!job.rendezvous_file.empty() && job.controller_port == 0 &&
        !job.rendezvous_pmix)
      std::remove(job.rendezvous_file.c_str());
    if (!st.ok()) {
      for (auto& s : out->control)
        if (s.valid())
          (void)s.WriteFrame(kFailureMark + st.message(), Deadline::After(1));
      return st;
    }
    std::ostringstream table;
    for (int r = 0; r < n; ++r)
      table << addrs[r] << " " << out->hosts[r] << "\n";
    for (int r = 1; r < n; ++r)
      HVD_RETURN_IF_ERROR(out->control[r].WriteFrame(table.str(), deadline));
  } else {
    int port = job.controller_port;
    std::vector<std::string> rank0_hosts = {
        job.controller_addr.empty() ? "127.0.0.1" : job.controller_addr};
    if (port == 0 && job.rendezvous_pmix) {
      HVD_RETURN_IF_ERROR(
          ReadFromPmix(job, deadline, &board, &port, &hp.secret, &rank0_hosts));
    } else if (port == 0) {
      HVD_RETURN_IF_ERROR(
          ReadRendezvousFile(job.rendezvous_file, deadline, &port, &hp.secret));
    } else if (hp.secret.empty()) {
      return Status::InvalidArgument(
          "HOROVOD_SECRET_KEY is not set: a multi-process job needs the job "
          "secret (horovodrun sets it)");
    }
    out->control.resize(1);
    Socket ctl;
    std::string host;
    Status st = DialRank0(rank0_hosts, port, deadline, &ctl, &host);
    if (!st.ok())
      return Status::Timeout("rank " + std::to_string(job.rank) +
                             " could not reach rank 0: " + st.message());
    hp.kind = LinkKind::kControl;
    HVD_RETURN_IF_ERROR(ClientHandshake(ctl, hp, 0, deadline));
    std::string local =
        job.bind_addr.empty() ? ctl.LocalAddress() : job.bind_addr;
    int my_port = 0;
    HVD_RETURN_IF_ERROR(
        Socket::Listen(local, 0, std::max(128, n), &listener, &my_port));
    HVD_RETURN_IF_ERROR(ctl.WriteFrame(local + ":" + std::to_string(my_port) +
                                           " " + out->hosts[job.rank] + " " +
                                           job.settings,
                                       deadline));
    std::string table;
    st = ctl.ReadFrame(static_cast<size_t>(n) * 520 + 64, verdict_deadline,
                       &table);
    if (!st.ok())
      return Status::Timeout(
          "rank " + std::to_string(job.rank) +
          " did not receive the peer table from rank 0: " + st.message() +
          " (another rank may have failed to start)");
    if (!table.empty() && table[0] == kFailureMark)
      return Status::Timeout(
          "rank " + std::to_string(job.rank) +
          ": the rendezvous failed on rank 0: " + Printable(table.substr(1)));
    HVD_RETURN_IF_ERROR(ParsePeerTable(table, n, &addrs, &out->hosts));
    // Under PMIx rank 0 listens on every interface and cannot know which
    // address the others reach: its data links go where the control link
    // went. (Elsewhere the table's own entry stands: the control link may
    // have come through something else, a proxy or a forwarded port.)
    if (job.rendezvous_pmix) addrs[0] = host + ":" + std::to_string(port);
    out->control[0] = std::move(ctl);
    // Dial every lower rank.
    hp.kind = LinkKind::kData;
    for (int r = 0; r < job.rank; ++r) {
      std::string h;
      int p;
      HVD_RETURN_IF_ERROR(ParseAddress(addrs[r], &h, &p));
      Socket s;
      HVD_RETURN_IF_ERROR(Socket::Connect(h, p, deadline, &s));
      HVD_RETURN_IF_ERROR(ClientHandshake(s, hp, r, deadline));
      out->data[r] = std::move(s);
    }
  }
  // Accept every higher rank's data link.
  HVD_RETURN_IF_ERROR(
      LinkAcceptor(listener, hp, LinkKind::kData, AcceptorOptions())
          .Run(
              deadline, &out->data, [&](int r) { return r > job.rank; },
              [](int, const std::string&) { return Status::OK(); }));
  for (auto& s : out->data)
    if (s.valid()) s.TuneForBulk();
  return Status::OK();
}

}  // namespace horovod
