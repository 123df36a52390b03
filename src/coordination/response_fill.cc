#include "coordination/response_fill.h"

namespace horovod {

void ResponseFill::Begin(std::vector<Response>* out, int64_t threshold) {
  out_ = out;
  threshold_ = threshold;
  bytes_.clear();
  counts_.clear();
  slotted_.clear();
}

Response& ResponseFill::Start(int64_t bytes) {
  const size_t t = bytes_.size();
  if (out_->size() <= t) out_->emplace_back();
  bytes_.push_back(bytes);
  counts_.push_back(0);
  slotted_.push_back(1);
  return (*out_)[t];
}

void ResponseFill::Add(Response&& r, int slot) {
  const int64_t n = r.shapes.empty() ? 0 : TensorBytes(r.dtype, r.shapes[0]);
  const int t = FusionTarget(*out_, bytes_, r, n, threshold_);
  if (t < 0) {
    Response& o = Start(n);
    TrimTensors(&o, 0, &spares_);
    o = std::move(r);  // its slots, if any, are replaced below
    counts_.back() = o.names.size();
    o.slots.clear();
    if (slot >= 0 && o.names.size() == 1)
      o.slots.push_back(static_cast<uint32_t>(slot));
    else
      slotted_.back() = 0;
    return;
  }
  Response& to = (*out_)[t];
  TrimTensors(&to, counts_[t], &spares_);  // AddTensor appends
  AddTensor(&to, std::move(r), 0);
  ++counts_[t];
  bytes_[t] += n;
  if (slot >= 0 && slotted_[t]) {
    to.slots.resize(counts_[t] - 1);
    to.slots.push_back(static_cast<uint32_t>(slot));
  } else {
    slotted_[t] = 0;
  }
}

void ResponseFill::AddCached(const Response& c, uint32_t slot) {
  const int64_t n = TensorBytes(c.dtype, c.shapes[0]);
  int t = FusionTarget(*out_, bytes_, c, n, threshold_);
  if (t < 0) {
    t = static_cast<int>(bytes_.size());
    Response& o = Start(0);
    AssignParams(&o, c);
    o.groups.clear();
  }
  PlaceTensor(&(*out_)[t], counts_[t]++, c, slot, &spares_);
  bytes_[t] += n;
}

void ResponseFill::Finish() {
  TrimResponses(out_, counts_.size(), &spares_);
  for (size_t t = 0; t < counts_.size(); ++t) {
    Response& r = (*out_)[t];
    TrimTensors(&r, counts_[t], &spares_);
    if (!slotted_[t]) r.slots.clear();
  }
}

}  // namespace horovod
