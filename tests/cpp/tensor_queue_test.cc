// TensorQueue without an engine: duplicate names, records reused across
// submissions of a name (and the cache slot remembered with them), a
// steady submission queued again as its record holds it, claims by address
// or by name in place, keys freed while a claimed collective still runs,
// failing what is queued, idle records dropped once many pile up, and the
// eventfd written only while the loop sleeps.
#include "runtime/tensor_queue.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <string>
#include <thread>
#include <vector>

#include "queue_test_util.h"

namespace horovod {
namespace {

TEST(TensorQueue, RefusesANameAlreadyQueuedAndTakesBackTheBatch) {
  TensorQueue q;
  Add(q, Entry("a"));
  TensorEntry batch[2] = {Entry("b"), Entry("a")};
  Handle handles[2];
  Status st = q.Add(batch, 2, handles);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("Duplicate tensor name 'a'"), std::string::npos)
      << st.message();
  // "b" went back with the refused batch: it may be added again.
  Add(q, Entry("b"));
  // A batch naming one tensor twice is refused whole too.
  TensorEntry twice[2] = {Entry("c"), Entry("c")};
  EXPECT_FALSE(q.Add(twice, 2, handles).ok());
  EXPECT_FALSE(handles[0].valid());  // none handed out
  Add(q, Entry("c"));
  std::vector<QueuedTensor*> fresh = New(q);
  ASSERT_EQ(fresh.size(), 3u);
  EXPECT_EQ(fresh[0]->entry.request.name, "a");
  EXPECT_EQ(fresh[1]->entry.request.name, "b");
  EXPECT_EQ(fresh[2]->entry.request.name, "c");
}

// One step of the loop's steady path: the new record, claimed and released.
QueuedTensor* RunOne(TensorQueue& q) {
  std::vector<QueuedTensor*> fresh = New(q);
  EXPECT_EQ(fresh.size(), 1u);
  if (fresh.size() != 1) return nullptr;
  std::vector<TensorEntry*> claimed;
  q.Claim(fresh.data(), 1, &claimed);
  EXPECT_NE(claimed[0], nullptr);
  q.Release(fresh.data(), 1);
  return fresh[0];
}

TEST(TensorQueue, ANameKeepsItsRecordAndCacheSlotWhileItsParametersDoNot) {
  TensorQueue q;
  float x[4];
  Add(q, Entry("g", {4}, x));
  QueuedTensor* rec = RunOne(q);
  ASSERT_NE(rec, nullptr);
  rec->cache_slot = 7;
  rec->found_at = 3;
  EXPECT_FALSE(q.Pending());

  Add(q, Entry("g", {4}, x));
  EXPECT_EQ(RunOne(q), rec);
  EXPECT_EQ(rec->cache_slot, 7);
  EXPECT_EQ(rec->found_at, 3u);

  // Another shape: the slot found for the old one no longer stands.
  Add(q, Entry("g", {2, 2}, x));
  EXPECT_EQ(RunOne(q), rec);
  EXPECT_EQ(rec->cache_slot, -1);
  EXPECT_EQ(rec->entry.request.shape, (std::vector<int64_t>{2, 2}));

  // An entry taken by name leaves with its request: nothing to compare
  // the next submission with.
  rec->cache_slot = 7;
  Add(q, Entry("g", {2, 2}, x));
  TensorEntry e;
  ASSERT_TRUE(q.Take(TensorKey(0, "g"), &e));
  EXPECT_EQ(e.tensor.data, x);
  Add(q, Entry("g", {2, 2}, x));
  EXPECT_EQ(RunOne(q), rec);
  EXPECT_EQ(rec->cache_slot, -1);
}

TEST(TensorQueue, AResubmissionDifferentOutsideTheLookupIsTakenWhole) {
  // The record keeps its request when a submission repeats it, and takes
  // every field of one that differs, also where the cache slot still
  // stands: each field changed alone.
  TensorQueue q;
  float x[4];
  TensorEntry e = Entry("g", {4}, x);
  Add(q, e);
  QueuedTensor* rec = RunOne(q);
  ASSERT_NE(rec, nullptr);
  rec->cache_slot = 7;
  auto resubmit = [&] {
    Add(q, e);
    EXPECT_EQ(RunOne(q), rec);
  };
  e.request.splits = {2, 2};
  resubmit();
  EXPECT_EQ(rec->entry.request.splits, (std::vector<int64_t>{2, 2}));
  e.request.rank = 3;
  resubmit();
  EXPECT_EQ(rec->entry.request.rank, 3);
  e.request.set_id = 5;
  resubmit();
  EXPECT_EQ(rec->entry.request.set_id, 5);
  e.request.set_ranks = {0, 3};
  resubmit();
  EXPECT_EQ(rec->entry.request.set_ranks, (std::vector<int32_t>{0, 3}));
  EXPECT_EQ(rec->cache_slot, 7);
  e.request.prescale = 2.0;  // part of the lookup
  resubmit();
  EXPECT_EQ(rec->cache_slot, -1);
  EXPECT_EQ(rec->entry.request.prescale, 2.0);
}

// A request as the engine builds it for a lone allreduce.
TEST(TensorQueue, ASubmissionRepeatingItsPredictedRecordIsQueuedAgainAsIs) {
  TensorQueue q;
  float x[4], y[4];
  const TensorEntry a = Allreduce("a", x), b = Allreduce("b", x);
  TensorView view{y, DataType::kFloat32, {4}};
  const std::string name_a = "a", name_b = "b";  // AddAgain keeps refs
  auto again = [&](const std::string& name, Handle* h) {
    return q.AddAgain({name, view, ReduceOp::kSum, 0, 1.0, 1.0, 1}, h);
  };
  auto run = [&] {  // the loop's steady step over what is new
    std::vector<QueuedTensor*> fresh = New(q);
    std::vector<TensorEntry*> claimed;
    q.Claim(fresh.data(), fresh.size(), &claimed);
    q.Release(fresh.data(), fresh.size());
    return fresh;
  };
  // Two steps by Add: the second links "b" to "a", the record after it.
  for (int step = 0; step < 2; ++step)
    EXPECT_TRUE(Add(q, a).valid() && Add(q, b).valid() && run().size() == 2);
  Handle ha, hb, h;
  ASSERT_TRUE(again(name_a, &ha) && again(name_b, &hb));
  EXPECT_TRUE(ha.valid() && hb.valid() && q.Pending());
  // Both in flight: a repeat of either is left to Add, which refuses it.
  EXPECT_FALSE(again(name_a, &h));
  EXPECT_FALSE(h.valid());
  std::vector<QueuedTensor*> fresh = run();
  ASSERT_EQ(fresh.size(), 2u);
  QueuedTensor* rec_a = fresh[0];
  EXPECT_EQ(rec_a->entry.request.name, "a");
  EXPECT_EQ(rec_a->entry.tensor.data, y);  // the new data, the old request
  EXPECT_EQ(fresh[1]->entry.request.name, "b");
  // Out of order: "b" is not the record after "b".
  EXPECT_FALSE(again(name_b, &h));
  EXPECT_FALSE(q.Pending());
  // A step whose first tensor differs is not queued again.
  view.shape = {2, 2};
  EXPECT_FALSE(again(name_a, &h));
  view.shape = {4};
  rec_a->cache_slot = 9;
  ASSERT_TRUE(again(name_a, &h));
  EXPECT_EQ(rec_a->cache_slot, 9);  // the same request: its slot stands
  q.FailAll(Status::Aborted("gone"));
  EXPECT_FALSE(again(name_b, &h));
}

TEST(TensorQueue, ClaimedRecordsRunInPlaceAndFreeTheirKeysOnRelease) {
  TensorQueue q;
  float x[4], y[4];
  auto hx = Add(q, Entry("x", {4}, x));
  Add(q, Entry("y", {4}, y));
  std::vector<QueuedTensor*> fresh = New(q);
  ASSERT_EQ(fresh.size(), 2u);
  std::vector<TensorEntry*> claimed;
  q.Claim(fresh.data(), fresh.size(), &claimed);
  ASSERT_EQ(claimed.size(), 2u);
  ASSERT_NE(claimed[0], nullptr);
  EXPECT_EQ(claimed[0]->tensor.data, x);
  EXPECT_EQ(claimed[1]->tensor.data, y);
  claimed[0]->handle->Complete(Status::OK());  // the runner finishes x
  EXPECT_TRUE(hx.Poll());
  EXPECT_FALSE(q.Pending());
  // Claimed records are no longer queued: not taken by name, not failed.
  TensorEntry e;
  EXPECT_FALSE(q.Take(TensorKey(0, "x"), &e));
  q.Release(fresh.data(), fresh.size());
  // The key is free and the record is reused.
  Add(q, Entry("x", {4}, x));
  std::vector<QueuedTensor*> again = New(q);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0], fresh[0]);
}

// Queues "x" and "y" and takes them as the loop does, with the cache slots
// the loop found them in.
std::vector<QueuedTensor*> QueueXY(TensorQueue& q, float* x, int x_slot,
                                   float* y, int y_slot) {
  Add(q, Entry("x", {4}, x));
  Add(q, Entry("y", {4}, y));
  std::vector<QueuedTensor*> fresh = New(q);
  if (fresh.size() == 2) {
    fresh[0]->cache_slot = x_slot;
    fresh[1]->cache_slot = y_slot;
  }
  return fresh;
}

// A response from rank 0 names its tensors: they are claimed by name in
// place, so the records keep their requests (and so their cache slots)
// for the next step, and a name this rank lacks is a null entry.
TEST(TensorQueue, ClaimedByNameRecordsKeepTheirRequestsForTheNextStep) {
  TensorQueue q;
  float x[4], y[4];
  std::vector<QueuedTensor*> fresh = QueueXY(q, x, 3, y, 4);
  ASSERT_EQ(fresh.size(), 2u);
  std::vector<QueuedTensor*> records;
  std::vector<TensorEntry*> claimed;
  q.ClaimNamed(0, {"y", "absent", "x"}, {}, &records, &claimed);
  ASSERT_EQ(claimed.size(), 3u);
  ASSERT_NE(claimed[0], nullptr);
  EXPECT_EQ(claimed[0]->tensor.data, y);
  EXPECT_EQ(claimed[1], nullptr);
  ASSERT_NE(claimed[2], nullptr);
  EXPECT_EQ(claimed[2]->tensor.data, x);
  EXPECT_EQ(records, (std::vector<QueuedTensor*>{fresh[1], fresh[0]}));
  EXPECT_FALSE(q.Pending());
  // Claimed: not claimed again, not taken by name.
  q.ClaimNamed(0, {"x"}, {}, &records, &claimed);
  EXPECT_EQ(claimed[0], nullptr);
  EXPECT_TRUE(records.empty());
  TensorEntry e;
  EXPECT_FALSE(q.Take(TensorKey(0, "x"), &e));
  // Another process set's key is another tensor.
  q.Release(fresh.data(), fresh.size());
  EXPECT_EQ(fresh[0]->entry.request.name, "x");
  Add(q, Entry("x", {4}, x));
  q.ClaimNamed(1, {"x"}, {}, &records, &claimed);
  EXPECT_EQ(claimed[0], nullptr);
  // The next submission finds the record, its request and its slot.
  std::vector<QueuedTensor*> again = New(q);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0], fresh[0]);
  EXPECT_EQ(again[0]->cache_slot, 3);
}

// Records named to rank 0 by slot are claimed by the response's slots; a
// slot that has come to hold another tensor, or a record that left the
// queue, leaves the key to decide.
TEST(TensorQueue, RecordsFiledBySlotAreClaimedByTheResponsesSlots) {
  TensorQueue q;
  float x[4], y[4];
  std::vector<QueuedTensor*> fresh = QueueXY(q, x, 5, y, 2);
  ASSERT_EQ(fresh.size(), 2u);
  q.FileBySlot(fresh.data(), fresh.size());
  std::vector<QueuedTensor*> records;
  std::vector<TensorEntry*> claimed;
  // Slot 5 is x's, but this response's tensor there is "y": found by key.
  q.ClaimNamed(0, {"y"}, {5}, &records, &claimed);
  ASSERT_NE(claimed[0], nullptr);
  EXPECT_EQ(claimed[0]->tensor.data, y);
  q.Release(records.data(), records.size());
  // y left the file when it was claimed: slot 2 names nothing now.
  Add(q, Entry("y", {4}, y));
  New(q);
  q.ClaimNamed(0, {"x", "y"}, {5, 2}, &records, &claimed);
  ASSERT_NE(claimed[0], nullptr);
  EXPECT_EQ(claimed[0]->tensor.data, x);
  ASSERT_NE(claimed[1], nullptr);  // by key
  EXPECT_EQ(claimed[1]->tensor.data, y);
  q.Release(records.data(), records.size());

  // A record taken out by name is no longer filed: its slot finds nothing
  // queued, and its next submission is found by key.
  Add(q, Entry("x", {4}, x));
  fresh = New(q);
  q.FileBySlot(fresh.data(), fresh.size());
  TensorEntry e;
  ASSERT_TRUE(q.Take(TensorKey(0, "x"), &e));
  q.ClaimNamed(0, {"x"}, {5}, &records, &claimed);
  EXPECT_EQ(claimed[0], nullptr);
  // Failing what is queued unfiles it too.
  Add(q, Entry("x", {4}, x));
  fresh = New(q);
  fresh[0]->cache_slot = 5;
  q.FileBySlot(fresh.data(), fresh.size());
  q.FailAll(Status::Aborted("gone"));
  q.ClaimNamed(0, {"x"}, {5}, &records, &claimed);
  EXPECT_EQ(claimed[0], nullptr);
}

// The state a claimed submission completes, found by the test as the loop
// finds it; completed with `st` and released.
TEST(TensorQueue, ANameResubmittedWhileItsCollectiveRunsGetsANewRecord) {
  TensorQueue q;
  float x[4], z[4];
  Add(q, Entry("x", {4}, x));
  std::vector<QueuedTensor*> first = New(q);
  std::vector<TensorEntry*> claimed;
  q.Claim(first.data(), 1, &claimed);
  ASSERT_NE(claimed[0], nullptr);
  // Its handle may complete before the claim ends; the name is free then.
  Add(q, Entry("x", {4}, z));
  EXPECT_EQ(claimed[0]->tensor.data, x);  // the running one is untouched
  std::vector<QueuedTensor*> second = New(q);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_NE(second[0], first[0]);
  EXPECT_EQ(second[0]->entry.tensor.data, z);
  q.Release(first.data(), 1);  // drops the orphaned record
  TensorEntry e;
  ASSERT_TRUE(q.Take(TensorKey(0, "x"), &e));
  EXPECT_EQ(e.tensor.data, z);
}

// Records are found by following last step's order when names come in the
// same order; any other order, a new name or a name whose collective still
// runs finds the right record all the same.
TEST(TensorQueue, NamesInAnyOrderFindTheirOwnRecords) {
  TensorQueue q;
  float data[4][4];
  const std::vector<std::vector<int>> orders = {
      {0, 1, 2, 3}, {0, 1, 2, 3}, {3, 2, 1, 0}, {0, 2, 1, 3}, {0, 1, 2, 3}};
  std::vector<QueuedTensor*> record(4, nullptr);  // by name, first seen
  for (const std::vector<int>& order : orders) {
    for (int k : order) Add(q, Entry("n" + std::to_string(k), {4}, data[k]));
    std::vector<QueuedTensor*> fresh = New(q);
    ASSERT_EQ(fresh.size(), order.size());
    for (size_t i = 0; i < order.size(); ++i) {
      EXPECT_EQ(fresh[i]->entry.request.name, "n" + std::to_string(order[i]));
      EXPECT_EQ(fresh[i]->entry.tensor.data, data[order[i]]);
      if (record[order[i]] == nullptr) record[order[i]] = fresh[i];
      EXPECT_EQ(fresh[i], record[order[i]]);  // reused, whatever the order
    }
    std::vector<TensorEntry*> claimed;
    q.Claim(fresh.data(), fresh.size(), &claimed);
    q.Release(fresh.data(), fresh.size());
  }
  EXPECT_EQ(q.Records(), 4u);
}

// Many names resubmitted while their collectives ran: the orphaned records
// are freed in batches, and every later submission still finds its own.
TEST(TensorQueue, OrphansAreFreedAndLeaveNoStaleLinks) {
  TensorQueue q;
  float x[4];
  const int names = 10;
  for (int round = 0; round < 3 * int(TensorQueue::kMaxOrphans); ++round) {
    std::vector<QueuedTensor*> fresh;
    if (round > 0) fresh = New(q);
    std::vector<TensorEntry*> claimed;
    q.Claim(fresh.data(), fresh.size(), &claimed);
    for (int k = 0; k < names; ++k)
      Add(q, Entry("o" + std::to_string(k), {4}, x));
    q.Release(fresh.data(), fresh.size());
    ASSERT_LE(q.Records(), names + TensorQueue::kMaxOrphans + names + 1);
  }
  std::vector<QueuedTensor*> fresh = New(q);
  ASSERT_EQ(fresh.size(), size_t(names));
  for (int k = 0; k < names; ++k)
    EXPECT_EQ(fresh[k]->entry.request.name, "o" + std::to_string(k));
}

TEST(TensorQueue, FailAllFailsWhatIsQueuedAndRefusesMore) {
  TensorQueue q;
  auto ha = Add(q, Entry("a"));
  auto hb = Add(q, Entry("b"));
  std::vector<QueuedTensor*> fresh = New(q);
  std::vector<TensorEntry*> claimed;
  q.Claim(&fresh[1], 1, &claimed);  // b's collective is running
  q.FailAll(Status::Aborted("gone"));
  ASSERT_TRUE(ha.Poll());
  EXPECT_EQ(ha.status().code(), StatusCode::kAborted);
  EXPECT_NE(ha.status().message().find("allreduce 'a' failed: gone"),
            std::string::npos)
      << ha.status().message();
  EXPECT_FALSE(hb.Poll());  // its runner completes it
  // A claim after the failure finds nothing queued.
  q.Claim(&fresh[0], 1, &claimed);
  EXPECT_EQ(claimed[0], nullptr);
  Status st;
  Add(q, Entry("c"), &st);
  EXPECT_EQ(st.code(), StatusCode::kAborted);
}

TEST(TensorQueue, ARecordTakenByNameBeforeTheLoopSawItIsNoNews) {
  TensorQueue q;
  Add(q, Entry("a"));
  TensorEntry e;
  ASSERT_TRUE(q.Take(TensorKey(0, "a"), &e));
  EXPECT_TRUE(New(q).empty());
  // Queued again before the loop looked: listed once.
  Add(q, Entry("b"));
  ASSERT_TRUE(q.Take(TensorKey(0, "b"), &e));
  Add(q, Entry("b"));
  EXPECT_EQ(New(q).size(), 1u);
}

TEST(TensorQueue, NamesUsedOnceDoNotPileUp) {
  TensorQueue q;
  TensorEntry e;
  // Far more one-time names than the queue keeps idle; every one of them
  // still behaves as new and queued work survives the sweeps.
  Add(q, Entry("kept"));
  for (size_t i = 0; i < 3 * TensorQueue::kMaxIdle; ++i) {
    const std::string name = "once." + std::to_string(i);
    Add(q, Entry(name));
    ASSERT_EQ(New(q).size(), i == 0 ? 2u : 1u);
    ASSERT_TRUE(q.Take(TensorKey(0, name), &e));
    ASSERT_LE(q.Records(), TensorQueue::kMaxIdle + 2);
  }
  EXPECT_TRUE(q.Take(TensorKey(0, "kept"), &e));
  Request r;
  EXPECT_FALSE(q.Find(TensorKey(0, "once.0"), &r));
}

// Whether the queue's eventfd has a wake-up waiting, without waiting.
bool Readable(const TensorQueue& q) {
  pollfd p{q.wake_fd(), POLLIN, 0};
  return poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
}

TEST(TensorQueue, EnqueuesWriteTheEventfdOnlyToASleepingLoop) {
  TensorQueue q;
  uint64_t seen = q.EndSleep();
  // The loop is awake: enqueues cost no system call, and the next sleep
  // does not begin (they are news).
  Add(q, Entry("a"));
  Add(q, Entry("b"));
  EXPECT_FALSE(Readable(q));
  EXPECT_FALSE(q.BeginSleep(seen));
  seen = q.EndSleep();
  EXPECT_EQ(New(q).size(), 2u);
  // Nothing since: the loop sleeps, and the next enqueue wakes it.
  ASSERT_TRUE(q.BeginSleep(seen));
  EXPECT_FALSE(Readable(q));
  Add(q, Entry("c"));
  EXPECT_TRUE(Readable(q));
  seen = q.EndSleep();
  q.DrainWake();
  EXPECT_FALSE(Readable(q));
  // The loop, awake, has not taken "c" yet: an enqueue behind it is no
  // news beyond "c" (the loop takes both at once) and wakes nothing.
  Add(q, Entry("d"));
  EXPECT_EQ(q.EndSleep(), seen);
  EXPECT_EQ(New(q).size(), 2u);
  // Awake again: a plain Wake (a waiter asking for the loop) is news too.
  q.Wake();
  EXPECT_FALSE(Readable(q));
  EXPECT_FALSE(q.BeginSleep(seen));
}

TEST(TensorQueue, AWakeRacingTheSleepIsNeverLost) {
  // Either the waker sees the sleeper (and writes the eventfd) or the
  // sleeper sees the wake (and does not sleep): the loop never sleeps
  // through one.
  for (int round = 0; round < 2000; ++round) {
    TensorQueue q;
    const uint64_t seen = q.EndSleep();
    std::thread waker([&q] { q.Wake(); });
    if (q.BeginSleep(seen)) {
      pollfd p{q.wake_fd(), POLLIN, 0};
      ASSERT_EQ(poll(&p, 1, 5000), 1) << "round " << round;
    }
    waker.join();
    q.EndSleep();
  }
}

}  // namespace
}  // namespace horovod
