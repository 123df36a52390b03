// EngineBinding: what kernels see of the engine before, during and after a
// binding, that unbinding waits for leases out, and the per-engine
// numbering of unnamed kernel operations.
#include "kernels/engine_binding.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace horovod {
namespace kernels {
namespace {

HvdFrameworkApi TableOfVersion(uint32_t version) {
  HvdFrameworkApi api{};
  api.version = version;
  return api;
}

TEST(EngineBinding, LeasesSeeTheBoundEngineOnly) {
  EngineBinding b;
  EXPECT_FALSE(EngineBinding::Lease(b));
  const HvdFrameworkApi api = TableOfVersion(HVD_FRAMEWORK_API_VERSION);
  int engine = 0;
  ASSERT_TRUE(b.Bind(&api, &engine));
  {
    EngineBinding::Lease lease(b);
    ASSERT_TRUE(lease);
    EXPECT_EQ(&lease.api(), &api);
    EXPECT_EQ(lease.engine(), &engine);
  }
  ASSERT_TRUE(b.Bind(nullptr, nullptr));
  EXPECT_FALSE(EngineBinding::Lease(b));
}

TEST(EngineBinding, RefusesATableOfAnotherVersion) {
  EngineBinding b;
  const HvdFrameworkApi api = TableOfVersion(HVD_FRAMEWORK_API_VERSION + 1);
  int engine = 0;
  EXPECT_FALSE(b.Bind(&api, &engine));
  EXPECT_FALSE(EngineBinding::Lease(b));
}

TEST(EngineBinding, UnbindingWaitsForLeasesOut) {
  EngineBinding b;
  const HvdFrameworkApi api = TableOfVersion(HVD_FRAMEWORK_API_VERSION);
  int engine = 0;
  ASSERT_TRUE(b.Bind(&api, &engine));
  std::atomic<bool> unbound{false};
  std::thread unbinder;
  {
    EngineBinding::Lease lease(b);
    unbinder = std::thread([&] {
      b.Bind(nullptr, nullptr);
      unbound = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(unbound.load());  // the engine is still in use here
  }
  unbinder.join();
  EXPECT_TRUE(unbound.load());
}

TEST(EngineBinding, NumbersPerProcessSetFromZeroForEachEngine) {
  EngineBinding b;
  const HvdFrameworkApi api = TableOfVersion(HVD_FRAMEWORK_API_VERSION);
  int engine = 0;
  ASSERT_TRUE(b.Bind(&api, &engine));
  EXPECT_EQ(b.NextNumber(0), 0);
  EXPECT_EQ(b.NextNumber(0), 1);
  EXPECT_EQ(b.NextNumber(3), 0);
  ASSERT_TRUE(b.Bind(&api, &engine));  // a new engine
  EXPECT_EQ(b.NextNumber(0), 0);
}

}  // namespace
}  // namespace kernels
}  // namespace horovod
