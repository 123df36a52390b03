// EngineMetrics: where one rank's engine spent its time since it started,
// by phase, with the work that time moved. Cumulative: subtract two
// snapshots (Engine::Metrics) to look at an interval. Plain values.
//
// The loop's phases add up to the time the loop ran (whichever thread drove
// it): idle + negotiate + bookkeeping + copy + transfer.
#ifndef HOROVOD_ENGINE_METRICS_H_
#define HOROVOD_ENGINE_METRICS_H_

#include <cstdint>

namespace horovod {

struct EngineMetrics {
  // Loop steps that executed a response list, the responses (one per
  // collective, fused tensors counting once) and the tensors they carried.
  uint64_t cycles = 0;
  uint64_t responses = 0;
  uint64_t tensors = 0;
  uint64_t bytes = 0;  // the tensors' sizes (inputs)
  // Requests this rank named by response-cache slot (sent to rank 0, or
  // posted on the ready board when every rank shares one host), and those
  // it sent to rank 0 in full (rank 0 sends none: its requests go to its
  // coordinator directly, though it posts on the board like the others).
  uint64_t cache_hits = 0;
  uint64_t cache_misses = 0;
  // Of the slots posted on the ready board, those that waited out its
  // patience for the other ranks and went to rank 0: this rank reached
  // them that much earlier than some other rank.
  uint64_t board_overdue = 0;

  // Seconds of the loop, by phase.
  double idle_s = 0;         // nothing submitted: waiting for work
  double negotiate_s = 0;    // submitted work waiting on the other ranks'
                             // requests and rank 0's answer
  double bookkeeping_s = 0;  // building, sending and reading messages,
                             // the coordinator, the queue, completing handles
  double copy_s = 0;         // packing into and out of the fusion buffer
  double transfer_s = 0;     // the collectives: moving and reducing data,
                             // including waits for peers inside them
  // Seconds threads spent blocked in Handle::Wait, summed over threads
  // (a waiting thread may drive the loop meanwhile, so this overlaps the
  // loop's phases).
  double wait_s = 0;
};

}  // namespace horovod

#endif  // HOROVOD_ENGINE_METRICS_H_
