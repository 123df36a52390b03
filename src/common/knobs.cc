#include "common/knobs.h"

#include <cstdlib>

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

Knobs Knobs::FromEnvironment() {
  Knobs k;
  int64_t i;
  double d;
  if (EnvInt("HOROVOD_FUSION_THRESHOLD", &i) && i >= 0) {
    k.fusion_threshold = i;
    k.fusion_threshold_set = true;
  }
  if (EnvDouble("HOROVOD_CYCLE_TIME", &d) && d >= 0) {
    k.cycle_time_ms = d;
    k.cycle_time_set = true;
  }
  if (EnvInt("HOROVOD_CACHE_CAPACITY", &i) && i >= 0 && i <= (1 << 20))
    k.cache_capacity = static_cast<int>(i);
  if (EnvDouble("HOROVOD_STALL_CHECK_TIME_SECONDS", &d) && d > 0)
    k.stall_check_s = d;
  if (EnvInt("HOROVOD_STALL_CHECK_DISABLE", &i)) k.stall_check_disable = i != 0;
  if (EnvDouble("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", &d) && d >= 0)
    k.stall_shutdown_s = d;
  if (EnvDouble("HOROVOD_OPERATION_TIMEOUT_SECONDS", &d) && d > 0)
    k.operation_timeout_s = d;
  if (EnvInt("HOROVOD_SMALL_ALLREDUCE_BYTES", &i) && i >= 0) {
    k.small_allreduce_bytes = i;
    k.small_allreduce_bytes_set = true;
  }
  if (EnvInt("HOROVOD_RING_CHUNK_BYTES", &i) && i >= 4096)
    k.ring_chunk_bytes = i;
  if (EnvInt("HOROVOD_SHM_DISABLE", &i)) k.shm_disable = i != 0;
  if (EnvInt("HOROVOD_HIERARCHICAL_ALLREDUCE", &i))
    k.hierarchical_allreduce = i != 0;
  if (EnvInt("HOROVOD_SHM_BUFFER_BYTES", &i) && i >= 4096 && i <= (1ll << 32))
    k.shm_buffer_bytes = i;
  if (EnvDouble("HOROVOD_SPIN_TIME_US", &d)) k.spin_time_us = d;
  if (EnvInt("HOROVOD_CALLER_DRIVES", &i)) k.caller_drives = i != 0;
  if (EnvInt("HOROVOD_KEEP_FREED_MEMORY", &i)) k.keep_freed_memory = i != 0;
  EnvString("HOROVOD_TIMELINE", &k.timeline);
  if (EnvInt("HOROVOD_TIMELINE_MARK_CYCLES", &i))
    k.timeline_mark_cycles = i != 0;
  if (EnvInt("HOROVOD_AUTOTUNE", &i)) k.autotune = i != 0;
  EnvString("HOROVOD_AUTOTUNE_LOG", &k.autotune_log);
  if (EnvInt("HOROVOD_AUTOTUNE_WARMUP_SAMPLES", &i) && i >= 0 && i <= 10000)
    k.autotune_warmup_samples = static_cast<int>(i);
  if (EnvInt("HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", &i) && i >= 1 && i <= 100000)
    k.autotune_steps_per_sample = static_cast<int>(i);
  if (EnvInt("HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", &i) && i >= 1 &&
      i <= 1000)
    k.autotune_max_samples = static_cast<int>(i);
  if (EnvDouble("HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", &d) && d > 0)
    k.autotune_noise = d;
  return k;
}

}  // namespace horovod
