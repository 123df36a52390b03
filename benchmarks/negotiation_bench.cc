// Negotiation without the network: one step of N cached tensors agreed
// through rank 0's coordinator, in one process. Each worker's request list
// is encoded and decoded as on the wire, rank 0's coordinator takes every
// list and answers, the answer is encoded, decoded by a worker and
// executed into both caches (the executor's cache refresh, not its data).
//
//   build-bench/negotiation_bench [-n TENSORS] [-r RANKS] [-s STEPS]
//
// Prints, for the tensors named by cache slot (the steady state) and by
// name (every request in full, as before the cache knew them):
//   NEGOTIATION,<ranks>,<tensors>,<slot|name>,<median_step_us>,<min_step_us>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "coordination/coordinator.h"
#include "coordination/wire.h"

namespace {

using horovod::Clock;
using horovod::Coordinator;
using horovod::CoordinatorConfig;
using horovod::Request;
using horovod::RequestList;
using horovod::Response;
using horovod::ResponseCache;
using horovod::ResponseList;

// Puts an executed list's tensors into `cache` as every rank does.
void Execute(const ResponseList& list, uint64_t epoch, ResponseCache* cache) {
  for (const Response& r : list.responses) {
    if (!ResponseCache::Cacheable(r)) continue;
    for (size_t i = 0; i < r.names.size(); ++i)
      if (r.slots.size() != r.names.size() || !cache->Refresh(r.slots[i], r, i))
        cache->Put(r, i, epoch);
  }
}

double Run(int n, int ranks, int steps, bool by_slot) {
  ResponseCache root_cache(4096), worker_cache(4096);
  CoordinatorConfig config;
  config.size = ranks;
  Coordinator coordinator(config, &root_cache);
  // Names as a model's gradients have them: past the short-string buffer.
  std::vector<Request> requests(n);
  for (int i = 0; i < n; ++i) {
    requests[i].name = "allreduce.layer" + std::to_string(i / 10) +
                       ".conv.weight." + std::to_string(i);
    requests[i].shape = {1024};
  }
  ResponseList answer, received;
  RequestList mine, decoded;
  std::vector<double> times;
  uint64_t epoch = 0;
  for (int step = 0; step < steps; ++step) {
    const Clock::time_point start = Clock::now();
    for (int rank = 0; rank < ranks; ++rank) {
      mine.epoch = epoch;
      mine.requests.clear();
      mine.cache_hits.clear();
      for (Request& q : requests) {
        const ResponseCache& cache = rank == 0 ? root_cache : worker_cache;
        const int slot = by_slot ? cache.Find(q) : -1;
        if (slot >= 0) {
          mine.cache_hits.push_back(static_cast<uint32_t>(slot));
        } else {
          q.rank = rank;
          mine.requests.push_back(q);
        }
      }
      if (rank == 0) {
        coordinator.AddRequestList(0, mine, start);
        continue;
      }
      const std::string frame = horovod::EncodeRequestList(mine);
      if (!horovod::DecodeRequestList(frame, ranks, &decoded).ok())
        std::abort();
      coordinator.AddRequestList(rank, decoded, start);
    }
    coordinator.TakeResponses(start, &answer);
    for (Response& r : answer.responses)
      if (r.slots.size() != r.names.size()) r.slots = root_cache.SlotsFor(r);
    const std::string frame = horovod::EncodeResponseList(answer, &root_cache);
    if (!horovod::DecodeResponseList(frame, ranks, &worker_cache, &received)
             .ok())
      std::abort();
    ++epoch;
    Execute(answer, epoch, &root_cache);
    Execute(received, epoch, &worker_cache);
    if (step >= steps / 5)  // the first steps fill the caches
      times.push_back(
          std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  std::printf("NEGOTIATION,%d,%d,%s,%.1f,%.1f\n", ranks, n,
              by_slot ? "slot" : "name", times[times.size() / 2] * 1e6,
              times[0] * 1e6);
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int n = 1000, ranks = 2, steps = 400;
  for (int a = 1; a + 1 < argc; a += 2) {
    const std::string flag = argv[a];
    const int v = std::atoi(argv[a + 1]);
    if (flag == "-n") {
      n = std::max(1, v);
    } else if (flag == "-r") {
      ranks = std::max(1, v);
    } else if (flag == "-s") {
      steps = std::max(5, v);
    } else {
      std::fprintf(stderr, "usage: %s [-n TENSORS] [-r RANKS] [-s STEPS]\n",
                   argv[0]);
      return 2;
    }
  }
  Run(n, ranks, steps, true);
  Run(n, ranks, steps, false);
  return 0;
}
