// TensorQueue's handle states: reused once no handle holds them, given
// back by a handle its caller passes in again, and renewed in place under
// a handle a steady caller keeps.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "queue_test_util.h"
#include "runtime/handle_state.h"

namespace horovod {
namespace {

// A name's next submission reuses a state only once no handle refers to
// it: a handle kept across resubmissions keeps its own result.
TEST(TensorQueue, HandleStatesAreReusedOnlyOnceNoHandleHoldsThem) {
  TensorQueue q;
  float x[4];
  Handle h1 = Add(q, Entry("g", {4}, x));
  HandleState* s1 = RunOneAndComplete(q, Status::Mismatch("first"));
  EXPECT_EQ(h1.status().message(), "first");
  h1 = Handle();  // let go: the next submission may reuse its state

  Handle h2 = Add(q, Entry("g", {4}, x));
  EXPECT_FALSE(h2.Poll());  // reset for the new submission
  EXPECT_EQ(RunOneAndComplete(q, Status::Mismatch("second")), s1);

  // h2 is kept while the name is submitted again: a new state.
  Handle h3 = Add(q, Entry("g", {4}, x));
  HandleState* s3 = RunOneAndComplete(q, Status::Mismatch("third"));
  EXPECT_NE(s3, s1);
  ASSERT_TRUE(h2.Poll());
  EXPECT_EQ(h2.status().message(), "second");
  EXPECT_EQ(h3.status().message(), "third");

  // A vector of handles overwritten step by step lets go of h2 only now;
  // the record kept its state to reuse, while h3's stays untouched.
  h2 = Handle();
  Handle h4 = Add(q, Entry("g", {4}, x));
  EXPECT_EQ(RunOneAndComplete(q, Status::OK()), s1);
  EXPECT_TRUE(h4.status().ok());
  EXPECT_EQ(h3.status().message(), "third");
}

// A caller that keeps each name's handle where it submits the name again
// (a vector of handles) passes that handle back in: a lone submission lets
// go of it first and gets its state back, the one its last wait read. A
// refused submission leaves it alone.
TEST(TensorQueue, AHandleOverwrittenBySubmittingAgainGivesBackItsState) {
  TensorQueue q;
  float x[4];
  TensorEntry e = Entry("g", {4}, x);
  Handle slot;
  ASSERT_TRUE(q.Add(&e, 1, &slot).ok());
  HandleState* first = RunOneAndComplete(q, Status::OK());
  ASSERT_TRUE(slot.Poll());
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE(q.Add(&e, 1, &slot).ok());
    EXPECT_FALSE(slot.Poll());
    EXPECT_EQ(RunOneAndComplete(q, Status::Mismatch("again")), first);
    ASSERT_TRUE(slot.Poll());
    EXPECT_EQ(slot.status().message(), "again");
  }
  ASSERT_TRUE(q.Add(&e, 1, &slot).ok());
  EXPECT_EQ(q.Add(&e, 1, &slot).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(slot.valid());  // still the queued submission's
  EXPECT_EQ(RunOneAndComplete(q, Status::OK()), first);
  EXPECT_TRUE(slot.Poll());
}

// A steady caller that keeps each name's handle and passes it back when it
// submits the name again (a vector of handles) keeps the handle's state,
// renewed in place, unless another copy of the handle still refers to it:
// that copy keeps its result, and the submission gets another state.
TEST(TensorQueue, ASteadyResubmissionRenewsTheStateUnderTheHandleKept) {
  TensorQueue q;
  float x[4];
  const TensorEntry a = Allreduce("a", x), b = Allreduce("b", x);
  TensorView view{x, DataType::kFloat32, {4}};
  const std::string name_a = "a", name_b = "b";  // AddAgain keeps refs
  auto again = [&](const std::string& name, Handle* h) {
    return q.AddAgain({name, view, ReduceOp::kSum, 0, 1.0, 1.0, 1}, h);
  };
  // The loop's step: every state it ran completed with `st`.
  auto run = [&](const Status& st) {
    std::vector<QueuedTensor*> fresh = New(q);
    std::vector<TensorEntry*> claimed;
    q.Claim(fresh.data(), fresh.size(), &claimed);
    std::vector<HandleState*> states;
    for (TensorEntry* e : claimed) {
      states.push_back(e->handle.get());
      e->handle->Complete(st);
    }
    q.Release(fresh.data(), fresh.size());
    return states;
  };
  for (int step = 0; step < 2; ++step) {  // links "b" after "a"
    EXPECT_TRUE(Add(q, a).valid() && Add(q, b).valid());
    run(Status::OK());
  }
  Handle ha, hb;
  ASSERT_TRUE(again(name_a, &ha) && again(name_b, &hb));
  const std::vector<HandleState*> first = run(Status::Mismatch("one"));
  ASSERT_EQ(first.size(), 2u);
  ASSERT_TRUE(ha.Poll() && hb.Poll());
  const Handle copy = hb;  // b's result is still read elsewhere

  ASSERT_TRUE(again(name_a, &ha) && again(name_b, &hb));
  EXPECT_FALSE(ha.Poll());  // a's state, renewed for the new submission
  EXPECT_FALSE(hb.Poll());  // b's submission has a state of its own
  ASSERT_TRUE(copy.Poll());
  EXPECT_EQ(copy.status().message(), "one");
  const std::vector<HandleState*> second = run(Status::OK());
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(second[0], first[0]);
  EXPECT_NE(second[1], first[1]);
  ASSERT_TRUE(ha.Poll() && hb.Poll());
  EXPECT_TRUE(ha.status().ok());  // the failure before was reset
  EXPECT_TRUE(hb.status().ok());
  EXPECT_EQ(copy.status().message(), "one");
}

}  // namespace
}  // namespace horovod
