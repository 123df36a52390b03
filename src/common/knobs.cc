#include "common/knobs.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/logging.h"

namespace horovod {

bool EnvString(const char* name, std::string* out) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return false;
  *out = v;
  return true;
}

bool EnvInt(const char* name, int64_t* out) {
  std::string s;
  if (!EnvString(name, &s)) return false;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (end == s.c_str() || *end != '\0') {
    HVD_LOG(kWarning, "ignoring " << name << "=" << s << ": not an integer");
    return false;
  }
  *out = v;
  return true;
}

bool EnvDouble(const char* name, double* out) {
  std::string s;
  if (!EnvString(name, &s)) return false;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0') {
    HVD_LOG(kWarning, "ignoring " << name << "=" << s << ": not a number");
    return false;
  }
  *out = v;
  return true;
}

namespace {

constexpr double kBig = 9.2e18;  // "no upper bound" for 64-bit counts

// An integer knob held in an int64_t or an int field.
template <typename Field>
KnobSpec Int(const char* name, Field field, double min, double max,
             const char* flags, const char* summary) {
  KnobSpec k{name, KnobType::kInt, field};
  k.min = min;
  k.max = max;
  k.flags = flags;
  k.summary = summary;
  return k;
}

KnobSpec Real(const char* name, double Knobs::*field, double min, bool open,
              const char* flags, const char* summary) {
  KnobSpec k{name, KnobType::kDouble, field};
  k.min = min;
  k.max = 1e300;
  k.min_open = open;
  k.flags = flags;
  k.summary = summary;
  return k;
}

KnobSpec Flag(const char* name, bool Knobs::*field, const char* flags,
              const char* summary) {
  KnobSpec k{name, KnobType::kBool, field};
  k.flags = flags;
  k.summary = summary;
  return k;
}

KnobSpec Text(const char* name, std::string Knobs::*field, const char* flags,
              const char* summary) {
  KnobSpec k{name, KnobType::kString, field};
  k.flags = flags;
  k.summary = summary;
  return k;
}

KnobSpec Given(KnobSpec k, bool Knobs::*given) {
  k.given = given;
  return k;
}

// Read outside Knobs: by the rendezvous or logging, or set for the job.
KnobSpec Other(const char* name, KnobType type, const char* shown_default,
               const char* flags, const char* summary, bool job) {
  KnobSpec k{name, type, std::monostate{}};
  k.other_default = shown_default;
  k.flags = flags;
  k.summary = summary;
  k.job = job;
  return k;
}

KnobSpec Agreed(KnobSpec k) {
  k.agree = true;
  return k;
}

KnobSpec Job(const char* name, KnobType type, const char* summary) {
  return Other(name, type, "", "", summary, true);
}

std::vector<KnobSpec> MakeTable() {
  using K = Knobs;
  const KnobType kInt = KnobType::kInt, kDouble = KnobType::kDouble,
                 kString = KnobType::kString, kBool = KnobType::kBool;
  return {
      Given(Int("HOROVOD_FUSION_THRESHOLD", &K::fusion_threshold, 0, kBig,
                "--fusion-threshold-mb",
                "largest fused allreduce in bytes; 0 disables fusion"),
            &K::fusion_threshold_set),
      Given(Real("HOROVOD_CYCLE_TIME", &K::cycle_time_ms, 0, false,
                 "--cycle-time-ms",
                 "ms the coordinator waits for more tensors to fuse"),
            &K::cycle_time_set),
      Agreed(Int("HOROVOD_CACHE_CAPACITY", &K::cache_capacity, 0, 1 << 20,
                 "--cache-capacity", "response-cache entries; 0 disables it")),
      Agreed(Given(Int("HOROVOD_SMALL_ALLREDUCE_BYTES",
                       &K::small_allreduce_bytes, 0, kBig, "",
                       "below this, allreduce uses recursive doubling, else "
                       "the ring"),
                   &K::small_allreduce_bytes_set)),
      Agreed(Int("HOROVOD_RING_CHUNK_BYTES", &K::ring_chunk_bytes, 4096, kBig,
                 "", "ring pipelining granularity")),
      Flag("HOROVOD_SHM_DISABLE", &K::shm_disable, "",
           "1: ranks on one host use TCP instead of shared memory"),
      Agreed(Flag("HOROVOD_HIERARCHICAL_ALLREDUCE", &K::hierarchical_allreduce,
                  "--hierarchical-allreduce --no-hierarchical-allreduce",
                  "reduce within hosts, across leaders, broadcast within "
                  "hosts")),
      Agreed(Flag("HOROVOD_HIERARCHICAL_ALLGATHER", &K::hierarchical_allgather,
                  "--hierarchical-allgather --no-hierarchical-allgather",
                  "allgather, broadcast and alltoall within hosts, across "
                  "leaders, within hosts")),
      Agreed(Flag("HOROVOD_HIERARCHICAL_STRIPED", &K::hierarchical_striped, "",
                  "on even hosts every rank carries a stripe of an "
                  "allreduce across hosts")),
      Agreed(Flag("HOROVOD_DATA_MAC", &K::data_mac, "--data-mac",
                  "every message on a TCP data link carries a MAC")),
      Agreed(Int("HOROVOD_SHM_BUFFER_BYTES", &K::shm_buffer_bytes, 4096,
                 4294967296.0, "",
                 "each half of a rank's shared-memory region")),
      Real("HOROVOD_SPIN_TIME_US", &K::spin_time_us, 0, false, "",
           "longest busy-poll of a waiting rank before it sleeps"),
      Flag("HOROVOD_CALLER_DRIVES", &K::caller_drives, "",
           "a thread waiting on a handle runs the engine loop itself"),
      Flag("HOROVOD_KEEP_FREED_MEMORY", &K::keep_freed_memory, "",
           "glibc keeps freed memory, so fresh results do not fault"),
      Other("HOROVOD_GRADIENT_OVERLAP", kString, "auto", "",
            "torch's DistributedOptimizer: 1 starts allreduces in backward, "
            "0 in step()",
            false),
      Text("HOROVOD_TIMELINE", &K::timeline, "--timeline-filename",
           "Chrome trace file rank 0 records into; DYNAMIC: on request"),
      Flag("HOROVOD_TIMELINE_MARK_CYCLES", &K::timeline_mark_cycles,
           "--timeline-mark-cycles", "marks every loop cycle in the timeline"),
      Flag("HOROVOD_AUTOTUNE", &K::autotune, "--autotune",
           "rank 0 tunes the knobs not set explicitly"),
      Text("HOROVOD_AUTOTUNE_LOG", &K::autotune_log, "--autotune-log-file",
           "CSV file of every autotune sample"),
      Int("HOROVOD_AUTOTUNE_WARMUP_SAMPLES", &K::autotune_warmup_samples, 0,
          10000, "--autotune-warmup-samples",
          "autotune samples discarded first"),
      Int("HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", &K::autotune_steps_per_sample, 1,
          100000, "--autotune-steps-per-sample", "steps measured per sample"),
      Int("HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", &K::autotune_max_samples, 1,
          1000, "--autotune-bayes-opt-max-samples",
          "samples before autotune settles"),
      Real("HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", &K::autotune_noise, 0,
           true, "--autotune-gaussian-process-noise",
           "measurement noise, relative to the scores' variance"),
      Real("HOROVOD_STALL_CHECK_TIME_SECONDS", &K::stall_check_s, 0, true,
           "--stall-check-warning-time-seconds",
           "warn about tensors some ranks have not submitted"),
      Flag("HOROVOD_STALL_CHECK_DISABLE", &K::stall_check_disable,
           "--no-stall-check", "1 turns the stall warnings off"),
      Real("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", &K::stall_shutdown_s, 0,
           false, "--stall-check-shutdown-time-seconds",
           "fail stalled tensors after this long; 0 never"),
      Real("HOROVOD_OPERATION_TIMEOUT_SECONDS", &K::operation_timeout_s, 0,
           true, "", "longest a peer may stay silent"),
      Other("HOROVOD_START_TIMEOUT", kDouble, "30", "--start-timeout",
            "seconds the ranks have to find each other at init", false),
      Other("HOROVOD_ELASTIC_TIMEOUT", kDouble, "600", "--elastic-timeout",
            "seconds a round of an elastic job may take to form", false),
      Other("HOROVOD_SPARK_START_TIMEOUT", kDouble, "600", "",
            "seconds horovod.spark.run waits for all its tasks", false),
      Other("HOROVOD_LOG_LEVEL", kString, "warning", "--log-level",
            "trace, debug, info, warning or error", false),
      Other("HOROVOD_LOG_HIDE_TIME", kBool, "0",
            "--log-hide-timestamp --log-without-timestamp",
            "1: log lines without the time they were written", false),
      Job("HOROVOD_RANK", kInt, "this process's rank"),
      Job("HOROVOD_SIZE", kInt, "the number of ranks"),
      Job("HOROVOD_LOCAL_RANK", kInt, "rank among this host's ranks"),
      Job("HOROVOD_LOCAL_SIZE", kInt, "ranks on this host"),
      Job("HOROVOD_CROSS_RANK", kInt, "this host's index"),
      Job("HOROVOD_CROSS_SIZE", kInt, "the number of hosts"),
      Job("HOROVOD_HOSTNAME", kString, "names this rank's host"),
      Job("HOROVOD_CONTROLLER_ADDR", kString, "where rank 0 listens"),
      Job("HOROVOD_CONTROLLER_PORT", kInt, "the port rank 0 listens on"),
      Job("HOROVOD_SECRET_KEY", kString, "the job's secret (never logged)"),
      Job("HOROVOD_BIND_ADDR", kString, "interface this rank listens on"),
      Job("HOROVOD_RUN_ADDR", kString,
          "where horovod.run's launcher serves the function"),
      Job("HOROVOD_RUN_PORT", kInt, "the port it serves it on"),
      Job("HOROVOD_ELASTIC_DRIVER", kString,
          "where horovodrun's elastic driver forms the rounds"),
      Job("HOROVOD_ELASTIC_WORKER", kString, "this elastic worker's id"),
  };
}

// Whole numbers as integers, others in the shortest form that reads back
// the same.
std::string Number(double v) {
  if (v == static_cast<double>(static_cast<long long>(v)) && v > -1e18 &&
      v < 1e18)
    return std::to_string(static_cast<long long>(v));
  char buf[64];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

// Applies the variable's value to `k` when it is set, parses and fits.
void Apply(const KnobSpec& s, Knobs* k) {
  auto fits = [&](double v) {
    const bool ok = (s.min_open ? v > s.min : v >= s.min) && v <= s.max;
    std::string given;
    if (!ok && EnvString(s.name, &given))
      HVD_LOG(kWarning, "ignoring " << s.name << "=" << given
                                    << ": outside its range " << KnobRange(s)
                                    << "; keeping " << KnobDefault(s));
    return ok;
  };
  int64_t i;
  double d;
  std::string text;
  bool set = false;
  if (auto f = std::get_if<int64_t Knobs::*>(&s.field)) {
    if ((set = EnvInt(s.name, &i) && fits(static_cast<double>(i)))) k->** f = i;
  } else if (auto f = std::get_if<int Knobs::*>(&s.field)) {
    if ((set = EnvInt(s.name, &i) && fits(static_cast<double>(i))))
      k->** f = static_cast<int>(i);
  } else if (auto f = std::get_if<double Knobs::*>(&s.field)) {
    if ((set = EnvDouble(s.name, &d) && fits(d))) k->** f = d;
  } else if (auto f = std::get_if<bool Knobs::*>(&s.field)) {
    if ((set = EnvInt(s.name, &i))) k->** f = i != 0;
  } else if (auto f = std::get_if<std::string Knobs::*>(&s.field)) {
    if ((set = EnvString(s.name, &text))) k->** f = text;
  }
  if (set && s.given != nullptr) k->*s.given = true;
}

}  // namespace

const std::vector<KnobSpec>& KnobTable() {
  static const std::vector<KnobSpec> table = MakeTable();
  return table;
}

std::string KnobValue(const KnobSpec& s, const Knobs& k) {
  if (auto f = std::get_if<int64_t Knobs::*>(&s.field))
    return std::to_string(k.**f);
  if (auto f = std::get_if<int Knobs::*>(&s.field))
    return std::to_string(k.**f);
  if (auto f = std::get_if<double Knobs::*>(&s.field)) return Number(k.**f);
  if (auto f = std::get_if<bool Knobs::*>(&s.field)) return k.**f ? "1" : "0";
  if (auto f = std::get_if<std::string Knobs::*>(&s.field))
    return (k.**f).empty() ? "none" : k.**f;
  return "";
}

std::string KnobDefault(const KnobSpec& s) {
  static const Knobs defaults;
  if (std::holds_alternative<std::monostate>(s.field)) return s.other_default;
  return KnobValue(s, defaults);
}

std::string AgreedSettings(const Knobs& k) {
  std::string out;
  for (const KnobSpec& s : KnobTable()) {
    if (!s.agree) continue;
    if (!out.empty()) out += ';';
    out += std::string(s.name) + "=" + KnobValue(s, k);
  }
  return out;
}

std::string KnobRange(const KnobSpec& s) {
  if (s.type != KnobType::kInt && s.type != KnobType::kDouble) return "";
  if (std::holds_alternative<std::monostate>(s.field)) return "";
  const std::string low = (s.min_open ? "> " : ">= ") + Number(s.min);
  if (s.max >= kBig) return low;
  return "[" + Number(s.min) + ", " + Number(s.max) + "]";
}

Knobs Knobs::FromEnvironment() {
  Knobs k;
  for (const KnobSpec& s : KnobTable()) Apply(s, &k);
  return k;
}

}  // namespace horovod
