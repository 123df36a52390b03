// Engine::AddProcessSet's refusals: ranks that are not a set of the job's
// ranks are refused where they are passed, by value and rank, before any
// peer sees them, and the job goes on to register a good set.
#include <gtest/gtest.h>
#include <horovod/engine.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine_ranks.h"

namespace horovod {
namespace {

TEST(EngineProcessSet, RanksOutsideTheJobAreRefusedByValueAndRank) {
  const int n = 3;
  ExpectEveryRankOk(RunRanks(n, [&](Engine* e, int r, std::string* fail) {
    int id = -1;
    // 2^32 would wrap onto rank 0 in a cast to int.
    for (const std::vector<int64_t>& bad : std::vector<std::vector<int64_t>>{
             {0, int64_t{1} << 32}, {1, 1}, {n}, {-1}, {}}) {
      const Status st = e->AddProcessSet(bad, &id);
      if (st.code() != StatusCode::kInvalidArgument ||
          st.message().find("invalid process set ranks " + ShapeString(bad) +
                            " for a job of size 3") == std::string::npos ||
          st.message().find("(rank " + std::to_string(r) + ")") ==
              std::string::npos)
        *fail +=
            "not refused: " + ShapeString(bad) + " (" + st.ToString() + ");";
    }
    if (!e->AddProcessSet({0, 2}, &id).ok() || id <= 0) *fail += "add;";
    std::vector<int> ranks;
    if (!e->ProcessSetRanks(id, &ranks).ok() || ranks != std::vector<int>{0, 2})
      *fail += "ranks;";
    if (!e->Barrier().ok() || !e->Shutdown().ok()) *fail += "shutdown;";
  }));
}

}  // namespace
}  // namespace horovod
