#include "runtime/tensor_queue.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>

namespace horovod {
namespace {

// What ResponseCache::SameLookup leaves out of a request; the key (process
// set and name) only when not `key_equal` already.
bool SameRest(const Request& a, const Request& b, bool key_equal) {
  return a.rank == b.rank &&
         (key_equal || (a.process_set == b.process_set && a.name == b.name)) &&
         a.splits == b.splits && a.set_id == b.set_id &&
         a.set_ranks == b.set_ranks;
}

// Whether a and b hold the same n bytes, compared inline for runs as short
// as a name or a shape: a steady submission compares both, where a libc
// call costs more than the compare.
bool SameBytes(const void* a, const void* b, size_t n) {
  if (n > 64) return std::memcmp(a, b, n) == 0;
  const char* x = static_cast<const char*>(a);
  const char* y = static_cast<const char*>(b);
  uint64_t diff = 0;
  auto word = [&](size_t at) {
    uint64_t u, v;
    std::memcpy(&u, x + at, 8);
    std::memcpy(&v, y + at, 8);
    diff |= u ^ v;
  };
  if (n < 8) {
    for (size_t i = 0; i < n; ++i) diff |= static_cast<uint8_t>(x[i] ^ y[i]);
    return diff == 0;
  }
  for (size_t i = 0; i + 8 <= n; i += 8) word(i);
  word(n - 8);  // the tail, overlapping the last whole word
  return diff == 0;
}

template <typename T>
bool SameContents(const T& a, const T& b) {
  return a.size() == b.size() &&
         SameBytes(a.data(), b.data(), a.size() * sizeof(a[0]));
}

}  // namespace

TensorQueue::TensorQueue() : wake_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

TensorQueue::~TensorQueue() {
  if (wake_fd_ >= 0) close(wake_fd_);
}

Status TensorQueue::Add(const TensorEntry* entries, size_t n, Handle* handles) {
  if (n == 0) return Status::OK();
  bool wake_loop;  // this Add starts the loop's list
  {
    std::lock_guard<FutexLock> lock(mu_);
    if (!closed_.ok()) return entries[0].Failure(closed_);
    // Queues each entry as its key is checked; a duplicate (in flight, or
    // earlier in this batch) takes back what this call queued.
    added_.clear();
    for (size_t i = 0; i < n; ++i) {
      const TensorEntry& e = entries[i];
      QueuedTensor* t = Predicted(e.request);
      const bool predicted = t != nullptr;  // its key compared equal
      if (t == nullptr) {
        const std::string& key =
            TensorKey(e.request.process_set, e.request.name, &key_);
        auto it = records_.try_emplace(key);
        std::unique_ptr<QueuedTensor>& slot = it.first->second;
        if (it.second) {
          slot = std::make_unique<QueuedTensor>();
          ++idle_;
        } else if (slot->state_ == QueuedTensor::State::kQueued) {
          for (QueuedTensor* a : added_) Unqueue(a);
          return Status::InvalidArgument(
              "Duplicate tensor name '" + e.request.name + "' on rank " +
              std::to_string(e.request.rank) +
              ": an operation with this name is already in flight. Give "
              "each in-flight tensor a unique name.");
        } else if (slot->state_ == QueuedTensor::State::kClaimed) {
          // Its collective is still running (its handle may already be
          // complete): the key is free, the record is not.
          slot->key_ = nullptr;
          orphans_.push_back(std::move(slot));
          slot = std::make_unique<QueuedTensor>();
          ++idle_;
        }
        t = slot.get();
        t->key_ = &it.first->first;
        if (last_added_ != nullptr) last_added_->next_ = t;
      }
      NoteAdded(t);
      // A steady step resubmits what the record holds: compared, not
      // copied, its strings and shape stay clean in the caches.
      const bool same_lookup =
          ResponseCache::SameLookup(t->entry.request, e.request);
      if (!same_lookup) t->cache_slot = -1;
      if (!same_lookup || !SameRest(t->entry.request, e.request, predicted))
        t->entry.request = e.request;  // reuses the strings' capacity
      t->entry.tensor = e.tensor;
      // A lone entry can no longer be refused: the caller's handle, about
      // to be overwritten, lets go of its state now, so a caller that
      // keeps the last step's handle there gets that state back, still in
      // the caches since its wait, instead of the one before it.
      if (n == 1) handles[0] = Handle();
      QueueLocked(t);
      added_.push_back(t);
    }
    wake_loop = ListLocked(added_.data(), n, handles);
    if (idle_ > kMaxIdle) Sweep();
    if (orphans_.size() > kMaxOrphans) ResetLinks();
  }
  if (wake_loop) Wake();
  return Status::OK();
}

bool Resubmission::Repeats(const Request& r) const {
  // Within the request's first two cache lines. An allreduce has no set's
  // ranks, and a request outside a group (group_size 0) no group name.
  return r.op == Op::kAllreduce && r.process_set == 0 && r.group_size == 0 &&
         r.rank == rank && r.dtype == tensor.dtype &&
         r.device == tensor.device && r.reduce_op == reduce_op &&
         r.root == root && r.prescale == prescale && r.postscale == postscale &&
         r.set_id == 0 && r.splits.empty() &&
         SameContents(r.shape, tensor.shape) && SameContents(r.name, name);
}

bool TensorQueue::AddAgain(const Resubmission& s, Handle* handle) {
  bool wake_loop;
  {
    std::lock_guard<FutexLock> lock(mu_);
    if (!closed_.ok()) return false;  // Add refuses it, saying why
    QueuedTensor* t = NextIdle();
    if (t == nullptr || !s.Repeats(t->entry.request)) return false;
    NoteAdded(t);
    TensorView& view = t->entry.tensor;  // its shape stays empty
    view.data = s.tensor.data;
    view.dtype = s.tensor.dtype;
    view.device = s.tensor.device;
    view.input = s.tensor.input;
    HandleState* last = t->entry.handle.get();
    if (last != nullptr && handle->state_ == last && last->HeldTwice()) {
      // The caller kept the handle of this name's last submission and
      // nobody else refers to its state: renewed under that handle, with
      // no reference let go and taken again (each an atomic
      // read-modify-write, a full barrier here).
      last->Reset(t->entry.request.dtype);
      MarkQueued(t);
      wake_loop = ListLocked(&t, 1, nullptr);
    } else {
      *handle = Handle();  // as Add does for a lone entry
      QueueLocked(t);
      wake_loop = ListLocked(&t, 1, handle);
    }
    PrefetchAfter(t);
  }
  if (wake_loop) Wake();
  return true;
}

void TensorQueue::QueueLocked(QueuedTensor* t) {
  RenewState(t, t->entry.request.dtype);
  MarkQueued(t);
}

void TensorQueue::MarkQueued(QueuedTensor* t) {
  t->state_ = QueuedTensor::State::kQueued;
  --idle_;
  ++queued_;
}

bool TensorQueue::ListLocked(QueuedTensor* const* ts, size_t n,
                             Handle* handles) {
  pending_.store(true, std::memory_order_relaxed);
  adds_.store(adds_.load(std::memory_order_relaxed) + 1,
              std::memory_order_relaxed);
  // The states are unshared until handed out (RenewState).
  for (size_t i = 0; handles != nullptr && i < n; ++i) {
    HandleState* state = ts[i]->entry.handle.get();
    state->RefUnshared();
    handles[i] = Handle(state);
  }
  // The loop takes the whole list at once (TakeNew, under this lock):
  // while it holds records it has not taken, the Add that listed the
  // first of them has woken it, and it will see the rest.
  const bool untaken = !fresh_.empty();
  for (size_t i = 0; i < n; ++i)
    if (!ts[i]->listed_) {
      ts[i]->listed_ = true;
      fresh_.push_back(ts[i]);
    }
  return !untaken && !fresh_.empty();
}

void TensorQueue::RenewState(QueuedTensor* t, DataType dtype) {
  HandleRef& last = t->entry.handle;
  // The last state first: a caller that let go of it before submitting
  // again (as a lone entry's does) has just touched it, and a steady step
  // then cycles through one state per name instead of two. Reused in
  // place: no reference moves, no count touched.
  if (last && last->Unshared()) {
    last->Reset(dtype);
    return;
  }
  if (t->spare_ && t->spare_->Unshared()) {
    std::swap(last, t->spare_);
    last->Reset(dtype);
    return;
  }
  HandleRef fresh = HandleRef::Make();
  fresh->gate = gate_;
  fresh->dtype = dtype;
  if (last) t->spare_ = std::move(last);
  last = std::move(fresh);
}

void TensorQueue::Unqueue(QueuedTensor* t) {
  Unfile(t);
  t->state_ = QueuedTensor::State::kIdle;
  --queued_;
  ++idle_;
  pending_.store(queued_ > 0, std::memory_order_relaxed);
}

QueuedTensor* TensorQueue::NextIdle() const {
  QueuedTensor* t = last_added_ != nullptr ? last_added_->next_ : nullptr;
  return t != nullptr && t->state_ == QueuedTensor::State::kIdle ? t : nullptr;
}

void TensorQueue::PrefetchAfter(const QueuedTensor* t) const {
  if (const QueuedTensor* far = t->ahead_)
    for (size_t at = 0; at < sizeof(QueuedTensor); at += 64)
      __builtin_prefetch(reinterpret_cast<const char*>(far) + at, 1);
  // Half as far: the successor of the record added that many calls
  // before t (just added: the newest in recent_).
  const QueuedTensor* back =
      recent_[(recent_at_ + kPrefetchAhead / 2 - 1) % kPrefetchAhead];
  const QueuedTensor* near = back != nullptr ? back->ahead_ : nullptr;
  // Only an idle record's fields are read: the loop may be writing a
  // claimed one.
  if (near == nullptr || near->state_ != QueuedTensor::State::kIdle) return;
  const Request& r = near->entry.request;
  __builtin_prefetch(r.name.data());
  __builtin_prefetch(r.shape.data());
  // The state's first line: what renewing it reads and writes (the
  // second only after an operation with an output, which a step of
  // allreduces has none of).
  if (const HandleState* state = near->entry.handle.get())
    __builtin_prefetch(state, 1);
}

void TensorQueue::NoteAdded(QueuedTensor* t) {
  last_added_ = t;
  QueuedTensor*& back = recent_[recent_at_];
  // Written only when it changed: a steady step's records stay clean.
  if (back != nullptr && back->ahead_ != t) back->ahead_ = t;
  back = t;
  recent_at_ = (recent_at_ + 1) % kPrefetchAhead;
}

QueuedTensor* TensorQueue::Predicted(const Request& r) const {
  QueuedTensor* t = NextIdle();
  // An idle record's request is its last submission's, of its key (or
  // moved out by Take: then it matches nothing and the key is looked up).
  return t != nullptr && t->entry.request.process_set == r.process_set &&
                 t->entry.request.name == r.name
             ? t
             : nullptr;
}

void TensorQueue::Sweep() {
  for (auto it = records_.begin(); it != records_.end();) {
    const QueuedTensor& t = *it->second;
    if (t.state_ == QueuedTensor::State::kIdle && !t.listed_) {
      it = records_.erase(it);
      --idle_;
    } else {
      ++it;
    }
  }
  ResetLinks();
}

void TensorQueue::ResetLinks() {
  orphans_.erase(std::remove_if(orphans_.begin(), orphans_.end(),
                                [](const std::unique_ptr<QueuedTensor>& t) {
                                  return t->state_ ==
                                         QueuedTensor::State::kDead;
                                }),
                 orphans_.end());
  for (auto& kv : records_) kv.second->next_ = kv.second->ahead_ = nullptr;
  for (auto& t : orphans_) t->next_ = t->ahead_ = nullptr;
  last_added_ = nullptr;
  std::fill(std::begin(recent_), std::end(recent_), nullptr);
}

std::vector<std::string> TensorQueue::KeysOf(
    const std::vector<const HandleState*>& handles) {
  std::vector<std::string> keys;
  {
    std::lock_guard<FutexLock> lock(mu_);
    for (const auto& kv : records_) {
      const QueuedTensor& t = *kv.second;
      if (t.state_ == QueuedTensor::State::kQueued &&
          std::find(handles.begin(), handles.end(), t.entry.handle.get()) !=
              handles.end())
        keys.push_back(kv.first);
    }
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

void TensorQueue::TakeNew(std::vector<QueuedTensor*>* fresh) {
  fresh->clear();
  std::lock_guard<FutexLock> lock(mu_);
  fresh->swap(fresh_);
  // A record taken by name before the loop saw it (a response for a rank
  // that joined) is no news: drop it from the list.
  size_t kept = 0;
  for (QueuedTensor* t : *fresh) {
    t->listed_ = false;
    if (t->state_ == QueuedTensor::State::kQueued) (*fresh)[kept++] = t;
  }
  fresh->resize(kept);
}

bool TensorQueue::Take(const std::string& key, TensorEntry* out) {
  std::lock_guard<FutexLock> lock(mu_);
  auto it = records_.find(key);
  if (it == records_.end() ||
      it->second->state_ != QueuedTensor::State::kQueued)
    return false;
  *out = std::move(it->second->entry);
  Unqueue(it->second.get());
  return true;
}

void TensorQueue::FileBySlot(QueuedTensor* const* ts, size_t n) {
  std::lock_guard<FutexLock> lock(mu_);
  for (size_t i = 0; i < n; ++i) {
    QueuedTensor* t = ts[i];
    if (t->state_ != QueuedTensor::State::kQueued || t->cache_slot < 0)
      continue;
    Unfile(t);
    const size_t slot = static_cast<size_t>(t->cache_slot);
    if (by_slot_.size() <= slot) by_slot_.resize(slot + 1, nullptr);
    // A record filed there before under an older entry of the slot leaves.
    if (by_slot_[slot] != nullptr) by_slot_[slot]->filed_slot_ = -1;
    by_slot_[slot] = t;
    t->filed_slot_ = t->cache_slot;
  }
}

void TensorQueue::Unfile(QueuedTensor* t) {
  if (t->filed_slot_ < 0) return;
  QueuedTensor*& at = by_slot_[static_cast<size_t>(t->filed_slot_)];
  if (at == t) at = nullptr;
  t->filed_slot_ = -1;
}

void TensorQueue::ClaimNamed(int process_set,
                             const std::vector<std::string>& names,
                             const std::vector<uint32_t>& slots,
                             std::vector<QueuedTensor*>* records,
                             std::vector<TensorEntry*>* claimed) {
  claimed->assign(names.size(), nullptr);
  records->clear();
  std::lock_guard<FutexLock> lock(mu_);
  for (size_t i = 0; i < names.size(); ++i) {
    QueuedTensor* t = i < slots.size() && slots[i] < by_slot_.size()
                          ? by_slot_[slots[i]]
                          : nullptr;
    // The slot may hold another tensor by now (its entry evicted since
    // the record was named by it): the key decides.
    if (t != nullptr && (t->entry.request.process_set != process_set ||
                         t->entry.request.name != names[i]))
      t = nullptr;
    if (t == nullptr) {
      auto it = records_.find(TensorKey(process_set, names[i], &key_));
      if (it == records_.end()) continue;
      t = it->second.get();
    }
    if (t->state_ != QueuedTensor::State::kQueued) continue;
    ClaimLocked(t);
    (*claimed)[i] = &t->entry;
    records->push_back(t);
  }
  pending_.store(queued_ > 0, std::memory_order_relaxed);
}

void TensorQueue::Claim(QueuedTensor* const* ts, size_t n,
                        std::vector<TensorEntry*>* claimed) {
  claimed->assign(n, nullptr);
  std::lock_guard<FutexLock> lock(mu_);
  for (size_t i = 0; i < n; ++i) {
    if (i + kRecordsAhead < n) __builtin_prefetch(ts[i + kRecordsAhead], 1);
    QueuedTensor* t = ts[i];
    if (t->state_ != QueuedTensor::State::kQueued) continue;
    ClaimLocked(t);
    (*claimed)[i] = &t->entry;
  }
  pending_.store(queued_ > 0, std::memory_order_relaxed);
}

void TensorQueue::ClaimLocked(QueuedTensor* t) {
  t->state_ = QueuedTensor::State::kClaimed;
  --queued_;
  Unfile(t);
}

void TensorQueue::Release(QueuedTensor* const* ts, size_t n) {
  std::lock_guard<FutexLock> lock(mu_);
  for (size_t i = 0; i < n; ++i) {
    if (i + kRecordsAhead < n) __builtin_prefetch(ts[i + kRecordsAhead], 1);
    QueuedTensor* t = ts[i];
    if (t->state_ != QueuedTensor::State::kClaimed) continue;
    if (t->key_ == nullptr) {
      // An orphan. Links may point to it: ResetLinks frees it.
      t->state_ = QueuedTensor::State::kDead;
      continue;
    }
    t->state_ = QueuedTensor::State::kIdle;
    ++idle_;
  }
}

size_t TensorQueue::Records() {
  std::lock_guard<FutexLock> lock(mu_);
  return records_.size() + orphans_.size();
}

bool TensorQueue::Pending() const {
  return pending_.load(std::memory_order_relaxed);
}

bool TensorQueue::Find(const std::string& key, Request* out) {
  std::lock_guard<FutexLock> lock(mu_);
  auto it = records_.find(key);
  if (it == records_.end() ||
      it->second->state_ != QueuedTensor::State::kQueued)
    return false;
  *out = it->second->entry.request;
  return true;
}

void TensorQueue::FailAll(const Status& status) {
  std::vector<TensorEntry> doomed;
  {
    std::lock_guard<FutexLock> lock(mu_);
    if (closed_.ok()) closed_ = status;
    for (auto& kv : records_) {
      QueuedTensor* t = kv.second.get();
      if (t->state_ != QueuedTensor::State::kQueued) continue;
      doomed.push_back(std::move(t->entry));
      Unqueue(t);
    }
    for (QueuedTensor* t : fresh_) t->listed_ = false;
    fresh_.clear();
  }
  for (TensorEntry& e : doomed) e.handle->Complete(e.Failure(status));
}

void TensorQueue::Wake() {
  if (wake_hook_) return wake_hook_();
  wakes_.fetch_add(1, std::memory_order_seq_cst);
  if (!sleeping_.load(std::memory_order_seq_cst)) return;
  uint64_t one = 1;
  ssize_t ignored = write(wake_fd_, &one, sizeof(one));
  (void)ignored;
}

bool TensorQueue::BeginSleep(uint64_t seen) {
  sleeping_.store(true, std::memory_order_seq_cst);
  if (wakes_.load(std::memory_order_seq_cst) == seen) return true;
  sleeping_.store(false, std::memory_order_relaxed);
  return false;
}

uint64_t TensorQueue::EndSleep() {
  sleeping_.store(false, std::memory_order_relaxed);
  return wakes_.load(std::memory_order_seq_cst);
}

void TensorQueue::DrainWake() {
  uint64_t v;
  ssize_t ignored = read(wake_fd_, &v, sizeof(v));
  (void)ignored;
}

}  // namespace horovod
