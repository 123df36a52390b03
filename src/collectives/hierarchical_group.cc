#include "collectives/hierarchical_group.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <utility>

namespace horovod {

HostSplit SplitByHost(const std::vector<int>& members,
                      const std::vector<std::string>& hosts, int me) {
  HostSplit s;
  std::unordered_map<std::string, int> host_index;
  for (size_t i = 0; i < members.size(); ++i) {
    const int m = members[i];
    auto found =
        host_index.emplace(hosts[m], static_cast<int>(s.leaders.size()));
    if (found.second) {
      s.leaders.push_back(m);
      s.host_members.emplace_back();
    }
    const int h = found.first->second;
    s.host_of.push_back(h);
    s.index_in_host.push_back(static_cast<int>(s.host_members[h].size()));
    s.host_members[h].push_back(static_cast<int>(i));
    if (hosts[m] == hosts[me]) s.local.push_back(m);
    if (m == me) s.my_host = h;
  }
  s.leader = !s.local.empty() && s.local[0] == me;
  s.useful = s.leaders.size() > 1 && s.leaders.size() < members.size();
  s.even = s.useful;
  for (const auto& host : s.host_members)
    s.even = s.even && host.size() == s.host_members[0].size();
  if (s.even) {
    const int mine = s.index_in_host[static_cast<size_t>(
        std::find(members.begin(), members.end(), me) - members.begin())];
    for (const auto& host : s.host_members)
      s.stripe.push_back(members[static_cast<size_t>(host[mine])]);
    std::sort(s.stripe.begin(), s.stripe.end());
  }
  int next = 0;
  s.contiguous = true;
  for (const auto& host : s.host_members)
    for (int i : host) s.contiguous = s.contiguous && i == next++;
  return s;
}

HierarchicalGroup::HierarchicalGroup(const HostSplit& split,
                                     Hierarchy hierarchy,
                                     std::unique_ptr<CollectiveGroup> local,
                                     std::unique_ptr<CollectiveGroup> cross,
                                     std::unique_ptr<CollectiveGroup> stripe,
                                     std::unique_ptr<CollectiveGroup> flat,
                                     Scratch* fusion)
    : split_(split),
      hierarchy_(hierarchy),
      local_(std::move(local)),
      cross_(std::move(cross)),
      stripe_(std::move(stripe)),
      flat_(std::move(flat)),
      fusion_(fusion) {
  CollectiveGroup* across = stripe_ != nullptr ? stripe_.get() : cross_.get();
  if (across != nullptr)
    pipeline_ = std::make_unique<CrossPipeline>(across, hierarchy_.overlap);
}

Status HierarchicalGroup::Allreduce(const Piece* pieces, size_t n,
                                    const ReduceArgs& args,
                                    const PhaseFn* on_phase) {
  if (!hierarchy_.reductions)
    return flat_->Allreduce(pieces, n, args, on_phase);
  return AllreducePacked(pieces, n, args, fusion_, on_phase,
                         [&](char* buf, int64_t count) {
                           return HostsAllreduce(buf, count, args, on_phase);
                         });
}

void HierarchicalGroup::Stripes(int64_t count, size_t esize) {
  const int64_t members = static_cast<int64_t>(split_.local.size());
  stripe_counts_.resize(static_cast<size_t>(members));
  stripe_bytes_.resize(static_cast<size_t>(members));
  stripe_at_ = 0;
  for (int64_t i = 0; i < members; ++i) {
    const int64_t c = count / members + (i < count % members ? 1 : 0);
    stripe_counts_[static_cast<size_t>(i)] = c;
    stripe_bytes_[static_cast<size_t>(i)] = c * static_cast<int64_t>(esize);
    if (i < split_.index_in_host[static_cast<size_t>(rank())]) stripe_at_ += c;
  }
}

Status HierarchicalGroup::HostsAllreduce(char* buf, int64_t count,
                                         const ReduceArgs& args,
                                         const PhaseFn* on_phase) {
  const size_t esize = DataTypeSize(args.dtype);
  const int64_t bytes = count * static_cast<int64_t>(esize);
  const bool striped = stripe_ != nullptr;
  CollectiveGroup* across = striped ? stripe_.get() : cross_.get();
  int64_t segments = 1;
  if (bytes >= kSegmentedFrom)
    segments =
        std::max(kSegments, (bytes + kMaxSegmentBytes - 1) / kMaxSegmentBytes);
  const int64_t per = count == 0 ? 0 : (count + segments - 1) / segments;
  if (per > 0) segments = (count + per - 1) / per;
  const size_t mine =
      static_cast<size_t>(split_.index_in_host[static_cast<size_t>(rank())]);
  auto at = [&](int64_t s) { return buf + s * per * esize; };
  auto len = [&](int64_t s) { return std::min(per, count - s * per); };
  auto phase = [&](const CollectiveGroup& g, const char* name) {
    if (on_phase != nullptr) (*on_phase)(g.kind(), name);
  };
  // The host's share in: every member computes the host's reduction
  // (single leader: the leader then holds it without a gather step), or
  // member i the reduction of stripe i.
  auto host_in = [&](int64_t s) {
    if (!striped) return local_->Allreduce(at(s), len(s), args.dtype, args.op);
    Stripes(len(s), esize);
    return local_->ReduceScatter(at(s), stripe_counts_, args.dtype, args.op);
  };
  // What this rank carries across hosts: the segment, or its stripe of it.
  auto part = [&](int64_t s, char** p, int64_t* c) {
    *p = at(s);
    *c = len(s);
    if (!striped) return;
    Stripes(len(s), esize);
    *p += stripe_at_ * static_cast<int64_t>(esize);
    *c = stripe_counts_[mine];
  };
  // The result back to every member: the leader's copy (the cross-host
  // result may differ in its last bits from the host's own), or every
  // member's stripe.
  auto host_out = [&](int64_t s) {
    if (!striped)
      return local_->Broadcast(at(s), len(s) * static_cast<int64_t>(esize), 0);
    char* p;
    int64_t c;
    part(s, &p, &c);
    return local_->Allgatherv(p, at(s), stripe_bytes_);
  };
  // Every member of the host runs the same order of host phases: in s,
  // then out s - 1 (whose cross-host result it waits for first). With one
  // segment the cross-host step runs inline; with more, in the pipeline.
  Status st;
  const bool pipelined = segments > 1 && pipeline_ != nullptr;
  phase(*local_, striped ? "HOST_REDUCESCATTER" : "HOST_ALLREDUCE");
  for (int64_t s = 0; s <= segments && st.ok(); ++s) {
    if (s < segments) {
      st = host_in(s);
      if (!st.ok()) break;
      if (across != nullptr) {
        char* p;
        int64_t c;
        part(s, &p, &c);
        if (s == 0) phase(*across, "CROSS_ALLREDUCE");
        // The cross-host ring scales what it carries in its last
        // reduction; the host's last phase hands the scaled result out.
        if (pipelined)
          pipeline_->Submit(p, c, args.dtype, args.op, args.postscale);
        else
          st = across->Allreduce(p, c, args.dtype, args.op, args.postscale);
        if (!st.ok()) break;
      }
    }
    if (s > 0) {
      if (pipelined) st = pipeline_->Wait();
      if (!st.ok()) break;
      if (s == 1) phase(*local_, striped ? "HOST_ALLGATHER" : "HOST_BROADCAST");
      st = host_out(s - 1);
    }
  }
  // The pipeline's thread must be done with the buffer before it returns.
  if (pipelined) {
    Status drained = pipeline_->Drain();
    if (st.ok()) st = drained;
  }
  return st;
}

int64_t HierarchicalGroup::SumByHost(const std::vector<int64_t>& bytes) {
  hosts_.assign(split_.host_members.size(), 0);
  local_bytes_.clear();
  int64_t total = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    hosts_[split_.host_of[i]] += bytes[i];
    total += bytes[i];
  }
  for (int i : split_.host_members[split_.my_host])
    local_bytes_.push_back(bytes[i]);
  return total;
}

Status HierarchicalGroup::ReduceScatter(void* buf,
                                        const std::vector<int64_t>& counts,
                                        DataType dtype, ReduceOp op) {
  // A host's blocks are one run only when its members are consecutive.
  if (!hierarchy_.reductions || !split_.contiguous)
    return flat_->ReduceScatter(buf, counts, dtype, op);
  const int64_t total = SumByHost(counts);  // in elements here
  int64_t mine_at = 0;
  for (int h = 0; h < split_.my_host; ++h) mine_at += hosts_[h];
  HVD_RETURN_IF_ERROR(local_->Allreduce(buf, total, dtype, op));
  if (cross_ != nullptr)
    HVD_RETURN_IF_ERROR(cross_->ReduceScatter(buf, hosts_, dtype, op));
  const int64_t esize = static_cast<int64_t>(DataTypeSize(dtype));
  return local_->Broadcast(static_cast<char*>(buf) + mine_at * esize,
                           hosts_[split_.my_host] * esize, 0);
}

Status HierarchicalGroup::Allgatherv(const void* send, void* recv,
                                     const std::vector<int64_t>& bytes) {
  if (!hierarchy_.movement) return flat_->Allgatherv(send, recv, bytes);
  const int64_t total = SumByHost(bytes);
  // Hosts' blocks one after another ("host-major"): the result itself
  // when each host's members are consecutive, else a staging area.
  char* out = split_.contiguous ? static_cast<char*>(recv)
                                : staging_.Get(static_cast<size_t>(total));
  offsets_.assign(hosts_.size() + 1, 0);
  for (size_t h = 0; h < hosts_.size(); ++h)
    offsets_[h + 1] = offsets_[h] + hosts_[h];
  char* mine = out + offsets_[split_.my_host];
  HVD_RETURN_IF_ERROR(local_->Allgatherv(send, mine, local_bytes_));
  if (cross_ != nullptr)
    HVD_RETURN_IF_ERROR(cross_->Allgatherv(mine, out, hosts_));
  HVD_RETURN_IF_ERROR(local_->Broadcast(out, total, 0));
  if (split_.contiguous) return Status::OK();
  // Member order: each member's block from its place in its host's run.
  int64_t at = 0;
  std::vector<int64_t>& within = sizes_;  // bytes before it in its host
  within.assign(hosts_.size(), 0);
  for (size_t i = 0; i < bytes.size(); ++i) {
    const int h = split_.host_of[i];
    std::memcpy(static_cast<char*>(recv) + at, out + offsets_[h] + within[h],
                static_cast<size_t>(bytes[i]));
    within[h] += bytes[i];
    at += bytes[i];
  }
  return Status::OK();
}

Status HierarchicalGroup::Broadcast(void* buf, int64_t bytes, int root) {
  if (!hierarchy_.movement) return flat_->Broadcast(buf, bytes, root);
  const int root_host = split_.host_of[root];
  if (split_.my_host == root_host)
    HVD_RETURN_IF_ERROR(
        local_->Broadcast(buf, bytes, split_.index_in_host[root]));
  if (cross_ != nullptr)
    HVD_RETURN_IF_ERROR(cross_->Broadcast(buf, bytes, root_host));
  if (split_.my_host != root_host)
    HVD_RETURN_IF_ERROR(local_->Broadcast(buf, bytes, 0));
  return Status::OK();
}

Status HierarchicalGroup::Alltoallv(const void* send,
                                    const std::vector<int64_t>& send_bytes,
                                    void* recv,
                                    const std::vector<int64_t>& recv_bytes,
                                    int64_t max_pair_bytes) {
  if (!hierarchy_.movement)
    return flat_->Alltoallv(send, send_bytes, recv, recv_bytes, max_pair_bytes);
  return HostMajorAlltoall(send, send_bytes, recv, recv_bytes);
}

// 1. The host's members share their send and receive sizes, then their
//    send buffers (so the leader holds every block leaving the host).
// 2. The leader packs, for each host h, its members' blocks for h's
//    members (source-major), and the leaders exchange those.
// 3. The leader's receipts reach every member of the host, and each takes
//    its own blocks into member order.
Status HierarchicalGroup::HostMajorAlltoall(
    const void* send, const std::vector<int64_t>& send_bytes, void* recv,
    const std::vector<int64_t>& recv_bytes) {
  const size_t n = send_bytes.size();
  const std::vector<int>& here = split_.host_members[split_.my_host];
  const size_t local_n = here.size();
  const size_t hosts = split_.host_members.size();
  // Row j of matrix_: local member j's send sizes, then its receive sizes.
  matrix_.resize(local_n * 2 * n);
  sizes_.assign(n * 2, 0);
  std::copy(send_bytes.begin(), send_bytes.end(), sizes_.begin());
  std::copy(recv_bytes.begin(), recv_bytes.end(), sizes_.begin() + n);
  local_bytes_.assign(local_n, static_cast<int64_t>(2 * n * sizeof(int64_t)));
  HVD_RETURN_IF_ERROR(
      local_->Allgatherv(sizes_.data(), matrix_.data(), local_bytes_));
  auto sent = [&](size_t j, size_t d) { return matrix_[j * 2 * n + d]; };
  auto got = [&](size_t j, size_t s) { return matrix_[j * 2 * n + n + s]; };
  // Every member's send buffer, in local order.
  offsets_.assign(local_n + 1, 0);
  for (size_t j = 0; j < local_n; ++j) {
    int64_t t = 0;
    for (size_t d = 0; d < n; ++d) t += sent(j, d);
    offsets_[j + 1] = offsets_[j] + t;
  }
  for (size_t j = 0; j < local_n; ++j)
    local_bytes_[j] = offsets_[j + 1] - offsets_[j];
  char* all_sent = gathered_.Get(static_cast<size_t>(offsets_[local_n]));
  HVD_RETURN_IF_ERROR(local_->Allgatherv(send, all_sent, local_bytes_));
  // Bytes arriving at this host from each host, source-major.
  cross_recv_.assign(hosts, 0);
  int64_t arriving = 0;
  for (size_t j = 0; j < local_n; ++j)
    for (size_t s = 0; s < n; ++s) {
      cross_recv_[split_.host_of[s]] += got(j, s);
      arriving += got(j, s);
    }
  char* arrived = received_.Get(static_cast<size_t>(arriving));
  if (cross_ != nullptr) {
    cross_send_.assign(hosts, 0);
    int64_t leaving = offsets_[local_n];
    char* packed = staging_.Get(static_cast<size_t>(leaving));
    int64_t at = 0;
    for (size_t h = 0; h < hosts; ++h)
      for (size_t j = 0; j < local_n; ++j) {
        int64_t from = offsets_[j];
        for (size_t d = 0; d < n; ++d) {
          if (split_.host_of[d] == static_cast<int>(h)) {
            std::memcpy(packed + at, all_sent + from,
                        static_cast<size_t>(sent(j, d)));
            at += sent(j, d);
            cross_send_[h] += sent(j, d);
          }
          from += sent(j, d);
        }
      }
    // Each pair of hosts exchanges at most every local pair's blocks.
    size_t widest = 0;
    for (const auto& m : split_.host_members)
      widest = std::max(widest, m.size());
    HVD_RETURN_IF_ERROR(
        cross_->Alltoallv(packed, cross_send_, arrived, cross_recv_,
                          static_cast<int64_t>(widest * widest) * leaving));
  }
  HVD_RETURN_IF_ERROR(local_->Broadcast(arrived, arriving, 0));
  // From host g's run: for each of g's members s (ascending), the blocks
  // s sent to each of our members in local order. Members ascend within
  // each host, so one cursor per host walks its run.
  const size_t me =
      static_cast<size_t>(split_.index_in_host[static_cast<size_t>(rank())]);
  cursor_.assign(hosts, 0);
  for (size_t g = 1; g < hosts; ++g)
    cursor_[g] = cursor_[g - 1] + cross_recv_[g - 1];
  int64_t out = 0;
  for (size_t s = 0; s < n; ++s) {
    const size_t g = static_cast<size_t>(split_.host_of[s]);
    int64_t at = cursor_[g];
    for (size_t j = 0; j < local_n; ++j) {
      if (j == me) {
        std::memcpy(static_cast<char*>(recv) + out, arrived + at,
                    static_cast<size_t>(recv_bytes[s]));
        out += recv_bytes[s];
      }
      at += got(j, s);
    }
    cursor_[g] = at;
  }
  return Status::OK();
}

}  // namespace horovod
