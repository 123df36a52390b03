#include "transport/shm_group.h"

#include <poll.h>

#include <chrono>
#include <cstddef>
#include <cstring>

#include "common/deadline.h"
#include "common/logging.h"

namespace horovod {

// The first page of every segment. Each counter has a cache line of its own
// so that a waiter polling it does not steal the line its owner writes.
struct ShmGroup::Control {
  uint64_t magic;
  uint32_t version;
  uint32_t members;
  uint64_t region_bytes;
  uint64_t board_bytes;
  char pad0[32];
  std::atomic<uint32_t> arrived;  // barriers this member has reached
  char pad1[60];
  std::atomic<uint32_t> waiters;  // peers asleep on `arrived`
  char pad2[60];
  Doorbell bell;  // rung when a control frame or local work arrives
  // Set when this member gave up on the collective in progress (Abort):
  // peers waiting for it stop waiting at once.
  std::atomic<uint32_t> failed;
  char pad4[60];
};

struct RingHeader {
  std::atomic<uint64_t> head;
  char pad0[56];
  std::atomic<uint64_t> tail;
  char pad1[56];
};

namespace {

constexpr uint64_t kMagic = 0x3153484d44565648ull;  // "HVVDMHS1"
constexpr uint32_t kVersion = 4;
constexpr size_t kControlBytes = 4096;
constexpr size_t kRingDataBytes = 64 << 10;
constexpr size_t kRingBytes = sizeof(RingHeader) + kRingDataBytes;
constexpr size_t kNameBytes = 64;
constexpr int kSleepSliceMs = 5;

bool Reached(uint32_t value, uint32_t target) {
  return static_cast<int32_t>(value - target) >= 0;
}

size_t RingsBytes(int members) { return members * kRingBytes; }

// Where the regions begin: page-aligned, as the buffers they are copied
// to and from usually are (copies run faster between equally aligned
// addresses).
size_t RegionsOffset(int members) {
  const size_t end = kControlBytes + RingsBytes(members);
  return (end + 4095) / 4096 * 4096;
}

size_t SegmentBytes(int members, size_t region_bytes, size_t board_bytes) {
  return RegionsOffset(members) + 2 * region_bytes + board_bytes;
}

// Exchanges a fixed-size record with every other member, pairwise.
Status ExchangeAll(Transport* t, const std::vector<int>& members, int me,
                   const void* mine, size_t len,
                   std::vector<std::string>* out) {
  const int n = static_cast<int>(members.size());
  out->assign(n, std::string(len, '\0'));
  std::memcpy(&(*out)[me][0], mine, len);
  for (int k = 1; k < n; ++k) {
    int dst = members[(me + k) % n], src_i = (me - k + n) % n;
    HVD_RETURN_IF_ERROR(t->SendRecv(dst, mine, len, members[src_i],
                                    &(*out)[src_i][0], len, 0, nullptr));
  }
  return Status::OK();
}

}  // namespace

ShmGroup::~ShmGroup() = default;

ShmGroup::Control* ShmGroup::control(int m) const {
  static_assert(sizeof(Control) <= kControlBytes,
                "the control block must fit its page");
  return reinterpret_cast<Control*>(segments_[m].data());
}

char* ShmGroup::region(int m) const {
  return segments_[m].data() + RegionsOffset(size()) +
         static_cast<size_t>(parity_) * config_.region_bytes;
}

char* ShmGroup::board(int m) const {
  if (config_.board_bytes == 0) return nullptr;
  return segments_[m].data() + RegionsOffset(size()) + 2 * config_.region_bytes;
}

Doorbell* ShmGroup::doorbell(int m) const { return &control(m)->bell; }

ShmGroup::Ring ShmGroup::ring(int from, int to) const {
  char* base = segments_[from].data() + kControlBytes + to * kRingBytes;
  auto* h = reinterpret_cast<RingHeader*>(base);
  return Ring{&h->head, &h->tail, base + sizeof(RingHeader), kRingDataBytes};
}

Status ShmGroup::Create(Transport* transport, const std::vector<int>& members,
                        const std::vector<int>& liveness_fds,
                        const ShmConfig& config,
                        std::unique_ptr<ShmGroup>* out) {
  out->reset();
  std::unique_ptr<ShmGroup> g(new ShmGroup());
  g->members_ = members;
  g->config_ = config;
  g->config_.region_bytes = (config.region_bytes + 63) / 64 * 64;
  g->spin_ = AdaptiveSpin(config.spin_us);
  const int n = static_cast<int>(members.size());
  for (int i = 0; i < n; ++i)
    if (members[i] == transport->rank()) g->me_ = i;
  if (g->me_ < 0 || n < 2)
    return Status::Internal("shared memory group without this rank");
  g->segments_.resize(n);
  g->liveness_fds_.assign(n, -1);
  for (int i = 0; i < n; ++i)
    if (members[i] < static_cast<int>(liveness_fds.size()))
      g->liveness_fds_[i] = liveness_fds[members[i]];
  const size_t bytes =
      SegmentBytes(n, g->config_.region_bytes, g->config_.board_bytes);

  // A member that cannot create its segment still takes part in both
  // exchanges (with an empty name), so that everyone agrees to fall back.
  ShmSegment& mine = g->segments_[g->me_];
  Status created = ShmSegment::Create(bytes, &mine);
  char name[kNameBytes] = {0};
  if (created.ok()) {
    Control* c = g->control(g->me_);
    c->magic = kMagic;
    c->version = kVersion;
    c->members = static_cast<uint32_t>(n);
    c->region_bytes = g->config_.region_bytes;
    c->board_bytes = g->config_.board_bytes;
    std::strncpy(name, mine.name().c_str(), kNameBytes - 1);
  } else {
    HVD_LOG(kWarning,
            "rank " + std::to_string(transport->rank()) +
                ": no shared memory, using TCP: " + created.message());
  }
  std::vector<std::string> names;
  HVD_RETURN_IF_ERROR(
      ExchangeAll(transport, members, g->me_, name, kNameBytes, &names));
  char ok = created.ok() ? 1 : 0;
  for (int i = 0; i < n && ok; ++i) {
    if (i == g->me_) continue;
    std::string peer(names[i].c_str());
    Status st = peer.empty()
                    ? Status::Internal("peer has no segment")
                    : ShmSegment::Attach(peer, bytes, &g->segments_[i]);
    if (st.ok())
      st = CheckHeader(g->control(i), n, g->config_.region_bytes,
                       g->config_.board_bytes);
    if (!st.ok()) {
      if (!peer.empty())
        HVD_LOG(kWarning, "rank " + std::to_string(transport->rank()) +
                              ": cannot use rank " +
                              std::to_string(members[i]) +
                              "'s shared memory, using TCP: " + st.message());
      ok = 0;
    }
  }
  std::vector<std::string> verdicts;
  Status st = ExchangeAll(transport, members, g->me_, &ok, 1, &verdicts);
  mine.Unlink();  // every peer has attached or given up by now
  HVD_RETURN_IF_ERROR(st);
  for (const std::string& v : verdicts)
    if (v[0] != 1) return Status::OK();  // fall back, everyone alike
  *out = std::move(g);
  return Status::OK();
}

Status ShmGroup::CheckHeader(const void* page, int members, size_t region_bytes,
                             size_t board_bytes) {
  static_assert(
      offsetof(Control, board_bytes) + sizeof(uint64_t) <= kHeaderBytes,
      "the checked fields lie within the header");
  // Field by field from bytes: the page need not hold a live Control.
  const char* p = static_cast<const char*>(page);
  uint64_t magic, region, board;
  uint32_t version, count;
  std::memcpy(&magic, p + offsetof(Control, magic), sizeof(magic));
  std::memcpy(&version, p + offsetof(Control, version), sizeof(version));
  std::memcpy(&count, p + offsetof(Control, members), sizeof(count));
  std::memcpy(&region, p + offsetof(Control, region_bytes), sizeof(region));
  std::memcpy(&board, p + offsetof(Control, board_bytes), sizeof(board));
  if (magic != kMagic || version != kVersion)
    return Status::InvalidArgument("not a horovod shared memory segment");
  if (count != static_cast<uint32_t>(members) || region != region_bytes ||
      board != board_bytes)
    return Status::InvalidArgument(
        "segment header does not match: " + std::to_string(count) +
        " members with " + std::to_string(region) + "-byte regions, expected " +
        std::to_string(members) + " with " + std::to_string(region_bytes) +
        " (is HOROVOD_SHM_BUFFER_BYTES the same on every rank?)" +
        (board != board_bytes
             ? " and boards of " + std::to_string(board) + " bytes, expected " +
                   std::to_string(board_bytes)
             : std::string()));
  return Status::OK();
}

Status ShmGroup::Barrier() {
  ++seq_;
  Control* c = control(me_);
  c->arrived.store(seq_, std::memory_order_seq_cst);
  if (c->waiters.load(std::memory_order_seq_cst) != 0)
    FutexWakeAll(&c->arrived);
  for (int m = 0; m < size(); ++m)
    if (m != me_) HVD_RETURN_IF_ERROR(WaitFor(m, seq_));
  return Status::OK();
}

Status ShmGroup::WaitFor(int m, uint32_t target) {
  Control* c = control(m);
  auto reached = [&] {
    return Reached(c->arrived.load(std::memory_order_acquire), target);
  };
  if (reached()) return Status::OK();
  // Timed from the spin's window: the untimed polls before it (see
  // SpinUntil) took under a microsecond, short by any measure.
  std::chrono::steady_clock::time_point start{};
  if (SpinUntil(reached, spin_.spin_us(), &start)) {
    if (start == std::chrono::steady_clock::time_point{})
      spin_.Record(0);
    else
      spin_.RecordSince(start);
    return Status::OK();
  }
  if (start == std::chrono::steady_clock::time_point{})
    start = std::chrono::steady_clock::now();  // it did not spin
  Deadline deadline = Deadline::After(config_.timeout_s);
  while (true) {
    c->waiters.fetch_add(1, std::memory_order_seq_cst);
    uint32_t v = c->arrived.load(std::memory_order_seq_cst);
    if (!Reached(v, target)) FutexWait(&c->arrived, v, kSleepSliceMs);
    c->waiters.fetch_sub(1, std::memory_order_seq_cst);
    if (reached()) {
      spin_.RecordSince(start);
      return Status::OK();
    }
    HVD_RETURN_IF_ERROR(PeerFailure(m));
    if (deadline.Expired())
      return Status::Timeout(
          "rank " + std::to_string(members_[m]) + " made no progress for " +
          std::to_string(static_cast<int>(config_.timeout_s)) +
          " s in a shared-memory collective "
          "(HOROVOD_OPERATION_TIMEOUT_SECONDS)");
  }
}

Status ShmGroup::PeerFailure(int m) const {
  if (aborted_.load()) {
    std::lock_guard<std::mutex> lock(reason_mu_);
    return Status::Aborted(reason_);
  }
  if (control(m)->failed.load(std::memory_order_acquire) != 0)
    return Status::Aborted("rank " + std::to_string(members_[m]) +
                           " gave up on this collective (it failed there)");
  int fd = liveness_fds_[m];
  if (fd < 0) return Status::OK();
  pollfd p = {fd, POLLRDHUP, 0};
  if (poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
    return Status::Aborted("rank " + std::to_string(members_[m]) +
                           " disconnected; it probably died");
  return Status::OK();
}

void ShmGroup::Abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(reason_mu_);
    if (aborted_.load()) return;
    reason_ = reason;
  }
  aborted_.store(true);
  // Peers asleep waiting for this member wake and see why.
  if (me_ >= 0 && me_ < static_cast<int>(segments_.size()) &&
      segments_[me_].data() != nullptr) {
    Control* c = control(me_);
    c->failed.store(1, std::memory_order_release);
    FutexWakeAll(&c->arrived);
  }
}

}  // namespace horovod
