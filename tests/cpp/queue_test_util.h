// What the TensorQueue suites share: entries and their submission, and
// the loop's side of a step (taking what is new, claiming, completing,
// releasing), done by hand.
#ifndef HOROVOD_TESTS_CPP_QUEUE_TEST_UTIL_H_
#define HOROVOD_TESTS_CPP_QUEUE_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "runtime/tensor_queue.h"

namespace horovod {

inline TensorEntry Entry(const std::string& name,
                         std::vector<int64_t> shape = {4},
                         void* data = nullptr) {
  TensorEntry e;
  e.request.name = name;
  e.request.shape = std::move(shape);
  e.tensor.data = data;
  return e;
}

// Adds one entry; returns its handle.
inline Handle Add(TensorQueue& q, TensorEntry e, Status* st = nullptr) {
  Handle h;
  Status s = q.Add(&e, 1, &h);
  if (st != nullptr)
    *st = s;
  else
    EXPECT_TRUE(s.ok()) << s.ToString();
  return h;
}

inline std::vector<QueuedTensor*> New(TensorQueue& q) {
  std::vector<QueuedTensor*> fresh;
  q.TakeNew(&fresh);
  return fresh;
}

inline TensorEntry Allreduce(const std::string& name, float* data) {
  TensorEntry e = Entry(name, {4}, data);
  e.request.rank = 1;
  e.tensor.dtype = e.request.dtype;
  return e;
}

// The loop's step over one new submission, completed with `st`; its
// state.
inline HandleState* RunOneAndComplete(TensorQueue& q, const Status& st) {
  std::vector<QueuedTensor*> fresh = New(q);
  EXPECT_EQ(fresh.size(), 1u);
  if (fresh.size() != 1) return nullptr;
  std::vector<TensorEntry*> claimed;
  q.Claim(fresh.data(), 1, &claimed);
  HandleState* state = claimed[0]->handle.get();
  claimed[0]->handle->Complete(st);
  q.Release(fresh.data(), 1);
  return state;
}

}  // namespace horovod

#endif  // HOROVOD_TESTS_CPP_QUEUE_TEST_UTIL_H_
