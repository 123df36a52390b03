// Refusals: a rank that refuses its own input for an operation (Enqueue's
// checks, or a binding's through Engine::Refuse) fails that operation on
// every member with its reason instead of leaving the others waiting for
// it, and every rank goes on from the same point.
#include <gtest/gtest.h>
#include <horovod/engine.h>

#include <string>
#include <vector>

#include "engine_ranks.h"

namespace horovod {
namespace {

TensorView Floats(std::vector<float>* v) {
  TensorView t;
  t.data = v->data();
  t.shape = {static_cast<int64_t>(v->size())};
  return t;
}

bool Has(const Status& st, const std::string& text) {
  return st.message().find(text) != std::string::npos;
}

TEST(EngineRefusal, ThePeersFailWithTheRefusingRanksReasonAndGoOn) {
  const int n = 3;
  ExpectEveryRankOk(RunRanks(n, [&](Engine* e, int r, std::string* fail) {
    std::vector<float> v(4, 1.0f), w(4, 1.0f);
    CollectiveArgs a;
    a.name = "b";
    a.root = r == 0 ? 7 : 0;  // rank 0's is no rank of the job
    Handle h;
    Status st = e->Broadcast(Floats(&v), a, &h);
    if (r == 0) {
      if (st.code() != StatusCode::kInvalidArgument || !Has(st, "root rank 7"))
        *fail += "rank 0 not refused: " + st.ToString() + ";";
    } else {
      st = st.ok() ? h.Wait() : st;
      if (st.ok() ||
          !Has(st, "broadcast of tensor 'b' was refused by rank 0: ") ||
          !Has(st, "root rank 7"))
        *fail += "peer not failed with the reason: " + st.ToString() + ";";
    }
    // A binding's refusal of a group, unnamed: the numbering still agrees
    // (the next unnamed allreduce pairs up on every rank).
    CollectiveArgs g;
    std::vector<Handle> hs;
    if (r == 2) {
      st = e->Refuse(OpType::kAllreduce, 2, g,
                     Status::InvalidArgument("no dtype like it"));
      if (!Has(st, "no dtype like it")) *fail += "refuse returned;";
    } else {
      st = e->GroupedAllreduce({Floats(&v), Floats(&w)}, g, &hs);
      for (const Handle& x : hs) {
        const Status done = x.Wait();
        if (!Has(done, "was refused by rank 2: no dtype like it"))
          *fail += "group member not failed: " + done.ToString() + ";";
      }
    }
    std::fill(v.begin(), v.end(), static_cast<float>(r));
    st = e->Allreduce(Floats(&v), CollectiveArgs(), &h);
    if (!st.ok() || !h.Wait().ok() || v[0] != 0.0f + 1.0f + 2.0f)
      *fail += "the job did not go on: " + h.status().ToString() + ";";
    if (!e->Shutdown().ok()) *fail += "shutdown;";
  }));
}

}  // namespace
}  // namespace horovod
