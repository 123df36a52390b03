#include "coordination/wire.h"

#include <cstring>

namespace horovod {
namespace {

constexpr uint32_t kRequestMagic = 0x51525648;   // "HVRQ"
constexpr uint32_t kResponseMagic = 0x53525648;  // "HVRS"
constexpr uint8_t kVersion = 5;
// Threads of one rank blocked at once; more is not a real job.
constexpr uint32_t kMaxWaiting = 4096;
constexpr uint32_t kMaxDims = kWireMaxDims;
constexpr uint32_t kMaxName = kWireMaxName;

class Writer {
 public:
  template <typename T>
  void Put(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out_.append(b, sizeof(T));
  }
  void Str(const std::string& s) {
    Put<uint32_t>(static_cast<uint32_t>(s.size()));
    out_ += s;
  }
  template <typename T>
  void Ints(const std::vector<T>& v) {
    Put<uint32_t>(static_cast<uint32_t>(v.size()));
    for (T x : v) Put<T>(x);
  }
  void I64s(const std::vector<int64_t>& v) { Ints(v); }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(const std::string& b) : p_(b.data()), left_(b.size()) {}
  template <typename T>
  bool Get(T* v) {
    if (left_ < sizeof(T)) return fail();
    std::memcpy(v, p_, sizeof(T));
    p_ += sizeof(T);
    left_ -= sizeof(T);
    return true;
  }
  bool Str(std::string* s, uint32_t max) {
    uint32_t n;
    if (!Get(&n) || n > max || n > left_) return fail();
    s->assign(p_, n);
    p_ += n;
    left_ -= n;
    return true;
  }
  // A count of items each at least `min_item` bytes long.
  bool Count(uint32_t* n, size_t min_item, uint32_t max) {
    if (!Get(n) || *n > max || static_cast<size_t>(*n) * min_item > left_)
      return fail();
    return true;
  }
  template <typename T>
  bool Ints(std::vector<T>* v, uint32_t max) {
    uint32_t n;
    if (!Count(&n, sizeof(T), max)) return false;
    v->resize(n);
    for (auto& x : *v) Get(&x);
    return true;
  }
  bool I64s(std::vector<int64_t>* v, uint32_t max) { return Ints(v, max); }
  bool done() const { return ok_ && left_ == 0; }
  bool ok() const { return ok_; }

 private:
  bool fail() {
    ok_ = false;
    return false;
  }
  const char* p_;
  size_t left_;
  bool ok_ = true;
};

Status Malformed(const char* what) {
  return Status::Aborted(std::string("malformed ") + what + " message");
}

bool ValidCommon(uint8_t op, uint8_t dtype, uint8_t reduce) {
  return IsKnownOp(op) && IsValidDataType(dtype) && reduce <= 5;
}

// The fields only process-set operations carry; the others send none.
void PutSetFields(Writer& w, Op op, int32_t set_id,
                  const std::vector<int32_t>& ranks) {
  if (op == Op::kAddProcessSet || op == Op::kRemoveProcessSet)
    w.Put<int32_t>(set_id);
  if (op == Op::kAddProcessSet) w.Ints(ranks);
}

// Ranks must be valid and ascending (a set lists each member once).
bool GetSetFields(Reader& r, Op op, int job_size, int32_t* set_id,
                  std::vector<int32_t>* ranks) {
  if (op == Op::kAddProcessSet || op == Op::kRemoveProcessSet) {
    if (!r.Get(set_id) || *set_id < 0) return false;
  }
  if (op != Op::kAddProcessSet) return true;
  if (!r.Ints(ranks, static_cast<uint32_t>(job_size))) return false;
  for (size_t i = 0; i < ranks->size(); ++i)
    if ((*ranks)[i] < 0 || (*ranks)[i] >= job_size ||
        (i > 0 && (*ranks)[i] <= (*ranks)[i - 1]))
      return false;
  return true;
}

}  // namespace

std::string EncodeRequestList(const RequestList& list) {
  Writer w;
  w.Put(kRequestMagic);
  w.Put(kVersion);
  w.Put<uint64_t>(list.epoch);
  w.Put<uint8_t>(list.shutdown ? 1 : 0);
  w.Put<uint32_t>(static_cast<uint32_t>(list.requests.size()));
  for (const Request& r : list.requests) {
    w.Put<int32_t>(r.rank);
    w.Put<uint8_t>(static_cast<uint8_t>(r.op));
    w.Str(r.name);
    w.Put<uint8_t>(static_cast<uint8_t>(r.dtype));
    w.Put<uint8_t>(static_cast<uint8_t>(r.reduce_op));
    w.Put<int32_t>(r.root);
    w.Put<int32_t>(r.device);
    w.Put<int32_t>(r.process_set);
    w.Put<double>(r.prescale);
    w.Put<double>(r.postscale);
    w.I64s(r.shape);
    w.I64s(r.splits);
    w.Put<int32_t>(r.group_size);
    w.Str(r.group);
    w.Str(r.refusal);
    PutSetFields(w, r.op, r.set_id, r.set_ranks);
  }
  w.Put<uint32_t>(static_cast<uint32_t>(list.cache_hits.size()));
  for (uint32_t s : list.cache_hits) w.Put<uint32_t>(s);
  w.Str(list.abort_reason);
  w.Put<uint8_t>(list.waiting_update ? 1 : 0);
  w.Put<uint32_t>(static_cast<uint32_t>(list.waiting.size()));
  for (const std::string& key : list.waiting) w.Str(key);
  return w.Take();
}

Status DecodeRequestList(const std::string& bytes, int job_size,
                         RequestList* out) {
  Reader r(bytes);
  uint32_t magic;
  uint8_t version = 0, shutdown = 0;
  if (!r.Get(&magic) || magic != kRequestMagic) return Malformed("request");
  if (!r.Get(&version) || version != kVersion) return Malformed("request");
  r.Get(&out->epoch);
  r.Get(&shutdown);
  out->shutdown = shutdown != 0;
  uint32_t n;
  if (!r.Count(&n, 40, 1u << 24)) return Malformed("request");
  out->requests.resize(n);
  for (Request& q : out->requests) {
    uint8_t op = 0, dtype = 0, reduce = 0;
    r.Get(&q.rank);
    r.Get(&op);
    r.Str(&q.name, kMaxName);
    r.Get(&dtype);
    r.Get(&reduce);
    r.Get(&q.root);
    r.Get(&q.device);
    r.Get(&q.process_set);
    r.Get(&q.prescale);
    r.Get(&q.postscale);
    r.I64s(&q.shape, kMaxDims);
    r.I64s(&q.splits, static_cast<uint32_t>(job_size));
    r.Get(&q.group_size);
    r.Str(&q.group, kMaxName);
    r.Str(&q.refusal, kWireMaxRefusal);
    if (!r.ok() || !ValidCommon(op, dtype, reduce) || q.rank < 0 ||
        q.rank >= job_size || q.group_size < 0 || q.shape.size() > kMaxDims)
      return Malformed("request");
    q.op = static_cast<Op>(op);
    if (!GetSetFields(r, q.op, job_size, &q.set_id, &q.set_ranks))
      return Malformed("request");
    for (int64_t d : q.shape)
      if (d < 0) return Malformed("request");
    q.dtype = static_cast<DataType>(dtype);
    q.reduce_op = static_cast<ReduceOp>(reduce);
  }
  if (!r.Count(&n, 4, 1u << 24)) return Malformed("request");
  out->cache_hits.resize(n);
  for (auto& s : out->cache_hits) r.Get(&s);
  r.Str(&out->abort_reason, 1u << 16);
  uint8_t waiting_update = 0;
  r.Get(&waiting_update);
  out->waiting_update = waiting_update != 0;
  if (!r.Count(&n, 4, kMaxWaiting)) return Malformed("request");
  out->waiting.resize(n);
  for (std::string& key : out->waiting) r.Str(&key, kMaxName + 16);
  if (!r.done()) return Malformed("request");
  return Status::OK();
}

std::string EncodeResponseList(const ResponseList& list,
                               const ResponseCache* cache) {
  Writer w;
  w.Put(kResponseMagic);
  w.Put(kVersion);
  w.Put<uint8_t>(list.shutdown ? 1 : 0);
  w.Put<uint32_t>(static_cast<uint32_t>(list.responses.size()));
  for (const Response& r : list.responses) {
    // Slots the caller found already, else looked up here; none without
    // a cache (the decoder would have nothing to resolve them against).
    std::vector<uint32_t> found;
    if (cache != nullptr && r.slots.empty()) found = cache->SlotsFor(r);
    const std::vector<uint32_t>& slots =
        cache != nullptr && !r.slots.empty() ? r.slots : found;
    w.Put<uint8_t>(slots.empty() ? 0 : 1);
    if (!slots.empty()) {
      w.Put<uint32_t>(static_cast<uint32_t>(slots.size()));
      for (uint32_t s : slots) w.Put<uint32_t>(s);
      continue;
    }
    w.Put<uint8_t>(static_cast<uint8_t>(r.op));
    w.Put<uint8_t>(r.error ? 1 : 0);
    w.Str(r.error_message);
    w.Put<uint32_t>(static_cast<uint32_t>(r.names.size()));
    for (size_t i = 0; i < r.names.size(); ++i) {
      w.Str(r.names[i]);
      w.I64s(i < r.shapes.size() ? r.shapes[i] : std::vector<int64_t>());
    }
    w.Put<uint8_t>(static_cast<uint8_t>(r.dtype));
    w.Put<uint8_t>(static_cast<uint8_t>(r.reduce_op));
    w.Put<int32_t>(r.root);
    w.Put<int32_t>(r.device);
    w.Put<int32_t>(r.process_set);
    w.Put<double>(r.prescale);
    w.Put<double>(r.postscale);
    w.I64s(r.sizes);
    PutSetFields(w, r.op, r.set_id, r.set_ranks);
    if (r.op == Op::kJoin) w.Put<int32_t>(r.last_joined);
    w.Put<uint32_t>(static_cast<uint32_t>(r.groups.size()));
    for (const TensorGroup& g : r.groups) {
      w.Str(g.name);
      w.Put<int32_t>(g.size);
    }
  }
  w.Put<uint32_t>(static_cast<uint32_t>(list.stale_hits.size()));
  for (auto& s : list.stale_hits) {
    w.Put<int32_t>(s.first);
    w.Put<uint32_t>(s.second);
  }
  w.Str(list.abort_reason);
  w.Put<int64_t>(list.small_allreduce_bytes);
  return w.Take();
}

Status DecodeResponseList(const std::string& bytes, int job_size,
                          const ResponseCache* cache, ResponseList* out) {
  Reader r(bytes);
  uint32_t magic;
  uint8_t version = 0, shutdown = 0;
  if (!r.Get(&magic) || magic != kResponseMagic) return Malformed("response");
  if (!r.Get(&version) || version != kVersion) return Malformed("response");
  r.Get(&shutdown);
  out->shutdown = shutdown != 0;
  uint32_t n;
  if (!r.Count(&n, 5, 1u << 24)) return Malformed("response");
  TrimResponses(&out->responses, n, &out->spares);
  out->responses.resize(n);
  for (Response& resp : out->responses) {
    uint8_t cached = 0;
    r.Get(&cached);
    if (cached) {
      uint32_t k;
      if (!r.Count(&k, 4, 1u << 24) || k == 0 || cache == nullptr)
        return Malformed("response");
      // Refilled in place: a list decoded into the last one's responses
      // allocates nothing when it names the same tensors.
      resp.groups.clear();
      for (uint32_t i = 0; i < k; ++i) {
        uint32_t slot = 0;
        r.Get(&slot);
        if (!r.ok() || !cache->Has(slot)) return Malformed("response");
        const Response& c = cache->Get(slot);
        if (i == 0) AssignParams(&resp, c);
        PlaceTensor(&resp, i, c, slot, &out->spares);
      }
      TrimTensors(&resp, k, &out->spares);
      continue;
    }
    TrimTensors(&resp, 0, &out->spares);
    resp = Response();  // what the last list left in it
    uint8_t op = 0, err = 0, dtype = 0, reduce = 0;
    r.Get(&op);
    r.Get(&err);
    resp.error = err != 0;
    r.Str(&resp.error_message, 1u << 20);
    uint32_t k;
    if (!r.Count(&k, 8, 1u << 24)) return Malformed("response");
    GrowTensors(&resp, k, &out->spares);
    for (uint32_t i = 0; i < k; ++i) {
      r.Str(&resp.names[i], kMaxName);
      r.I64s(&resp.shapes[i], kMaxDims);
    }
    r.Get(&dtype);
    r.Get(&reduce);
    r.Get(&resp.root);
    r.Get(&resp.device);
    r.Get(&resp.process_set);
    r.Get(&resp.prescale);
    r.Get(&resp.postscale);
    r.I64s(&resp.sizes, 1u << 26);
    if (!r.ok() || !ValidCommon(op, dtype, reduce))
      return Malformed("response");
    resp.op = static_cast<Op>(op);
    if (!GetSetFields(r, resp.op, job_size, &resp.set_id, &resp.set_ranks))
      return Malformed("response");
    if (resp.op == Op::kJoin &&
        (!r.Get(&resp.last_joined) || resp.last_joined < -1 ||
         resp.last_joined >= job_size))
      return Malformed("response");
    // Groups, when any: one per name, each of at least one tensor.
    if (!r.Count(&k, 8, static_cast<uint32_t>(resp.names.size())) ||
        (k != 0 && k != resp.names.size()))
      return Malformed("response");
    resp.groups.resize(k);
    for (TensorGroup& g : resp.groups)
      if (!r.Str(&g.name, kMaxName) || !r.Get(&g.size) || g.size < 0)
        return Malformed("response");
    resp.dtype = static_cast<DataType>(dtype);
    resp.reduce_op = static_cast<ReduceOp>(reduce);
  }
  if (!r.Count(&n, 8, 1u << 24)) return Malformed("response");
  out->stale_hits.resize(n);
  for (auto& s : out->stale_hits) {
    r.Get(&s.first);
    r.Get(&s.second);
    if (s.first < 0 || s.first >= job_size) return Malformed("response");
  }
  r.Str(&out->abort_reason, 1u << 16);
  r.Get(&out->small_allreduce_bytes);
  if (!r.done() || out->small_allreduce_bytes < -1 ||
      out->small_allreduce_bytes > (int64_t{1} << 40))
    return Malformed("response");
  return Status::OK();
}

}  // namespace horovod
