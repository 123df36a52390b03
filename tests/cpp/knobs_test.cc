// The knob table drives Knobs::FromEnvironment: a value in range lands in
// its field (and marks it given, for autotune); one out of range, or one
// that does not parse, is ignored and the default kept.
#include "common/knobs.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <set>
#include <string>

namespace horovod {
namespace {

// Sets variables for one test and removes them afterwards.
class Env {
 public:
  ~Env() {
    for (const std::string& n : names_) unsetenv(n.c_str());
  }
  void Set(const std::string& name, const std::string& value) {
    setenv(name.c_str(), value.c_str(), 1);
    names_.insert(name);
  }

 private:
  std::set<std::string> names_;
};

TEST(Knobs, ValuesInRangeLandInTheirFields) {
  Env env;
  env.Set("HOROVOD_FUSION_THRESHOLD", "1024");
  env.Set("HOROVOD_CYCLE_TIME", "2.5");
  env.Set("HOROVOD_CACHE_CAPACITY", "7");
  env.Set("HOROVOD_SHM_DISABLE", "1");
  env.Set("HOROVOD_TIMELINE", "/tmp/t.json");
  env.Set("HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "0");
  const Knobs k = Knobs::FromEnvironment();
  EXPECT_EQ(k.fusion_threshold, 1024);
  EXPECT_TRUE(k.fusion_threshold_set);
  EXPECT_EQ(k.cycle_time_ms, 2.5);
  EXPECT_TRUE(k.cycle_time_set);
  EXPECT_FALSE(k.small_allreduce_bytes_set);
  EXPECT_EQ(k.cache_capacity, 7);
  EXPECT_TRUE(k.shm_disable);
  EXPECT_EQ(k.timeline, "/tmp/t.json");
  EXPECT_EQ(k.autotune_warmup_samples, 0);
}

TEST(Knobs, ValuesOutOfRangeOrUnparsedKeepTheDefault) {
  Env env;
  env.Set("HOROVOD_RING_CHUNK_BYTES", "100");         // below 4096
  env.Set("HOROVOD_CACHE_CAPACITY", "-5");            // below 0
  env.Set("HOROVOD_OPERATION_TIMEOUT_SECONDS", "0");  // must be > 0
  env.Set("HOROVOD_SHM_BUFFER_BYTES", "8589934592");  // above 4 GiB
  env.Set("HOROVOD_FUSION_THRESHOLD", "lots");
  env.Set("HOROVOD_SPIN_TIME_US", "nan");
  const Knobs k = Knobs::FromEnvironment(), d;
  EXPECT_EQ(k.ring_chunk_bytes, d.ring_chunk_bytes);
  EXPECT_EQ(k.cache_capacity, d.cache_capacity);
  EXPECT_EQ(k.operation_timeout_s, d.operation_timeout_s);
  EXPECT_EQ(k.shm_buffer_bytes, d.shm_buffer_bytes);
  EXPECT_EQ(k.fusion_threshold, d.fusion_threshold);
  EXPECT_FALSE(k.fusion_threshold_set);
  EXPECT_EQ(k.spin_time_us, d.spin_time_us);
}

TEST(Knobs, TheTableNamesEachVariableOnceWithItsDefaultAndRange) {
  std::set<std::string> names;
  for (const KnobSpec& s : KnobTable()) {
    EXPECT_EQ(std::string(s.name).rfind("HOROVOD_", 0), 0u) << s.name;
    EXPECT_TRUE(names.insert(s.name).second) << s.name << " twice";
    EXPECT_NE(std::string(s.summary), "") << s.name;
  }
  auto find = [](const std::string& name) -> const KnobSpec& {
    for (const KnobSpec& s : KnobTable())
      if (name == s.name) return s;
    ADD_FAILURE() << name << " missing";
    return KnobTable()[0];
  };
  EXPECT_EQ(KnobDefault(find("HOROVOD_FUSION_THRESHOLD")), "134217728");
  EXPECT_EQ(KnobDefault(find("HOROVOD_CYCLE_TIME")), "1");
  EXPECT_EQ(KnobDefault(find("HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE")),
            "0.8");
  EXPECT_EQ(KnobDefault(find("HOROVOD_HIERARCHICAL_ALLREDUCE")), "1");
  EXPECT_EQ(KnobDefault(find("HOROVOD_TIMELINE")), "none");
  EXPECT_EQ(KnobDefault(find("HOROVOD_START_TIMEOUT")), "30");
  EXPECT_EQ(KnobRange(find("HOROVOD_SHM_BUFFER_BYTES")), "[4096, 4294967296]");
  EXPECT_EQ(KnobRange(find("HOROVOD_OPERATION_TIMEOUT_SECONDS")), "> 0");
  EXPECT_EQ(KnobRange(find("HOROVOD_FUSION_THRESHOLD")), ">= 0");
  EXPECT_EQ(KnobRange(find("HOROVOD_SHM_DISABLE")), "");
}

TEST(Knobs, AgreedSettingsListTheKnobsEveryRankMustShare) {
  Knobs k;
  k.cache_capacity = 7;
  k.hierarchical_allreduce = true;
  k.fusion_threshold = 5;  // rank 0's alone: not listed
  const std::string s = AgreedSettings(k);
  EXPECT_NE(s.find("HOROVOD_CACHE_CAPACITY=7"), std::string::npos) << s;
  EXPECT_NE(s.find("HOROVOD_HIERARCHICAL_ALLREDUCE=1"), std::string::npos) << s;
  EXPECT_NE(s.find("HOROVOD_SHM_BUFFER_BYTES=4194304"), std::string::npos) << s;
  EXPECT_EQ(s.find("HOROVOD_FUSION_THRESHOLD"), std::string::npos) << s;
  EXPECT_EQ(s.find(' '), std::string::npos) << s;
  EXPECT_EQ(AgreedSettings(Knobs()), AgreedSettings(Knobs()));
  EXPECT_NE(AgreedSettings(Knobs()), s);
}

}  // namespace
}  // namespace horovod
