// Knobs: the engine's tuning, one field per HOROVOD_* variable. The knob
// table (src/common/knobs.cc) declares each variable once (name, type,
// range, horovodrun flag, summary; the default is the field's initializer
// here), and docs/knobs.md documents it; a test holds the three together.
// Engine::Start reads them from the environment unless the caller passes
// its own. A plain value.
#ifndef HOROVOD_KNOBS_H_
#define HOROVOD_KNOBS_H_

#include <cstdint>
#include <string>

namespace horovod {

struct Knobs {
  // HOROVOD_FUSION_THRESHOLD: bytes per fused allreduce; 0 disables fusion.
  int64_t fusion_threshold = 128ll * 1024 * 1024;
  bool fusion_threshold_set = false;  // given explicitly: autotune keeps it
  // HOROVOD_CYCLE_TIME (ms): how long the coordinator waits for more tensors
  // to fuse when others are known to be on their way.
  double cycle_time_ms = 1.0;
  bool cycle_time_set = false;
  // HOROVOD_CACHE_CAPACITY: response cache entries; 0 disables the cache.
  int cache_capacity = 1024;
  // HOROVOD_STALL_CHECK_TIME_SECONDS: warn about tensors some ranks lack.
  double stall_check_s = 60;
  // HOROVOD_STALL_CHECK_DISABLE: 1 turns the stall warnings off.
  bool stall_check_disable = false;
  // HOROVOD_STALL_SHUTDOWN_TIME_SECONDS: fail stalled tensors (0 = never).
  double stall_shutdown_s = 600;
  // HOROVOD_OPERATION_TIMEOUT_SECONDS: longest a peer may stay silent while
  // a transfer with it is in progress.
  double operation_timeout_s = 300;
  // HOROVOD_SMALL_ALLREDUCE_BYTES: below this, allreduce uses recursive
  // doubling (latency-optimal); at or above, the pipelined ring.
  int64_t small_allreduce_bytes = 64 * 1024;
  bool small_allreduce_bytes_set = false;
  // HOROVOD_RING_CHUNK_BYTES: pipelining granularity of the ring.
  int64_t ring_chunk_bytes = 1 << 20;
  // HOROVOD_SHM_DISABLE: 1 makes ranks on one host talk over TCP instead of
  // shared memory.
  bool shm_disable = false;
  // HOROVOD_HIERARCHICAL_ALLREDUCE: 0 makes allreduce over ranks on several
  // hosts one flat ring instead of reduce within each host, allreduce
  // across hosts, broadcast within each host (the default).
  bool hierarchical_allreduce = true;
  // HOROVOD_HIERARCHICAL_ALLGATHER: 0 makes allgather, broadcast and
  // alltoall over ranks on several hosts flat instead of within each host,
  // between one leader per host, and within each host again (the default).
  bool hierarchical_allgather = true;
  // HOROVOD_HIERARCHICAL_STRIPED: 1 (default) lets every rank of a host
  // carry a stripe of a hierarchical allreduce across hosts when every
  // host holds as many ranks; 0 keeps one leader per host.
  bool hierarchical_striped = true;
  // HOROVOD_DATA_MAC: 1 gives every message on the TCP data links a
  // Poly1305 tag under a per-message key, so bytes altered on the way fail
  // the collective; 0 (default) leaves data links to their handshake.
  bool data_mac = false;
  // HOROVOD_SHM_BUFFER_BYTES: size of each half of a rank's shared-memory
  // region; larger collectives go through it in rounds.
  int64_t shm_buffer_bytes = 4 << 20;
  // HOROVOD_SPIN_TIME_US: the longest a waiting rank busy-polls before it
  // sleeps, and only while recent waits were that short (AdaptiveSpin).
  double spin_time_us = 50;
  // HOROVOD_CALLER_DRIVES: 1 (default) lets a thread waiting on a handle run
  // the engine's loop itself while the loop thread stands aside; 0 leaves
  // all work to the loop thread.
  bool caller_drives = true;
  // HOROVOD_KEEP_FREED_MEMORY: 1 (default) makes glibc keep freed memory
  // for reuse, so results frameworks allocate afresh each step do not fault
  // in new pages each time (runtime/process_memory.h); 0 leaves malloc be.
  bool keep_freed_memory = true;
  // HOROVOD_TIMELINE: Chrome-trace file rank 0 records into from the start;
  // "DYNAMIC": none until hvd.start_timeline(). Empty: off.
  std::string timeline;
  // HOROVOD_TIMELINE_MARK_CYCLES: 1 adds a CYCLE_START mark per loop cycle.
  bool timeline_mark_cycles = false;
  // HOROVOD_AUTOTUNE: 1 lets rank 0 search fusion threshold, cycle time and
  // the small-allreduce crossover (those not set explicitly) for the highest
  // throughput. Details: docs/autotune.md.
  bool autotune = false;
  // HOROVOD_AUTOTUNE_LOG: CSV file of every autotune sample.
  std::string autotune_log;
  // HOROVOD_AUTOTUNE_WARMUP_SAMPLES: samples discarded at the start.
  int autotune_warmup_samples = 3;
  // HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE: steps (response lists that moved
  // data) measured per sample.
  int autotune_steps_per_sample = 10;
  // HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES: samples before settling.
  int autotune_max_samples = 20;
  // HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE: measurement noise variance,
  // relative to the variance of the scores.
  double autotune_noise = 0.8;

  // Every field from its HOROVOD_* variable where that is set and valid;
  // a value that does not parse or lies outside the knob's range is
  // ignored with a warning naming the value and the range.
  static Knobs FromEnvironment();
};

}  // namespace horovod

#endif  // HOROVOD_KNOBS_H_
