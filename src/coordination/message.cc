#include "coordination/message.h"

#include <cctype>

namespace horovod {

const char* OpName(Op op) {
  switch (op) {
    case Op::kAddProcessSet:
      return "add_process_set";
    case Op::kRemoveProcessSet:
      return "remove_process_set";
    default:
      return OpTypeName(static_cast<OpType>(op));
  }
}

std::string UpperOpName(Op op) {
  std::string s = OpName(op);
  for (char& c : s) c = static_cast<char>(std::toupper(c));
  return s;
}

TensorGroup GroupOf(const Response& r, size_t i) {
  return i < r.groups.size() ? r.groups[i] : TensorGroup();
}

namespace {

// Before `to` gains a tensor of group `g`: groups are listed per name once
// any tensor has one.
void AddGroup(Response* to, const TensorGroup& g) {
  if (g.size == 0 && to->groups.empty()) return;
  to->groups.resize(to->names.size());
  to->groups.push_back(g);
}

}  // namespace

void AddTensor(Response* to, const Response& from, size_t i) {
  AddGroup(to, GroupOf(from, i));
  to->names.push_back(from.names[i]);
  to->shapes.push_back(from.shapes[i]);
}

void AddTensor(Response* to, Response&& from, size_t i) {
  AddGroup(to, GroupOf(from, i));
  to->names.push_back(std::move(from.names[i]));
  to->shapes.push_back(std::move(from.shapes[i]));
}

namespace {

// Grows `v` to `n` elements, taking them from the back of `spare` while it
// has any.
template <typename T>
void GrowFrom(std::vector<T>* v, size_t n, std::vector<T>* spare) {
  while (v->size() < n) {
    if (spare->empty()) {
      v->emplace_back();
    } else {
      v->push_back(std::move(spare->back()));
      spare->pop_back();
    }
  }
}

// Shrinks `v` to `n` elements, moving the rest onto `spare` (while it has
// room) last first, so that GrowFrom, which takes from the back, gives
// them back in their order: the same tensors at the same places find
// storage of the size they had.
template <typename T>
void ShedTo(std::vector<T>* v, size_t n, std::vector<T>* spare) {
  for (size_t i = v->size(); i > n; --i)
    if (spare->size() < TensorSpares::kMax)
      spare->push_back(std::move((*v)[i - 1]));
  if (v->size() > n) v->resize(n);
}

// PlaceTensor and PlaceShape, but the name.
void PlaceParts(Response* out, size_t k, const Response& c, uint32_t slot,
                TensorSpares* spares) {
  GrowFrom(&out->shapes, k + 1, &spares->shapes);
  out->shapes[k].assign(c.shapes[0].begin(), c.shapes[0].end());
  out->slots.resize(k + 1);
  out->slots[k] = slot;
  if (!c.groups.empty() || !out->groups.empty()) {
    out->groups.resize(k);
    out->groups.push_back(GroupOf(c, 0));
  }
}

}  // namespace

void GrowTensors(Response* r, size_t n, TensorSpares* spares) {
  GrowFrom(&r->names, n, &spares->names);
  GrowFrom(&r->shapes, n, &spares->shapes);
}

void PlaceTensor(Response* out, size_t k, const Response& c, uint32_t slot,
                 TensorSpares* spares) {
  GrowFrom(&out->names, k + 1, &spares->names);
  out->names[k].assign(c.names[0]);
  PlaceParts(out, k, c, slot, spares);
}

void PlaceShape(Response* out, size_t k, const Response& c, uint32_t slot,
                TensorSpares* spares) {
  // Names a traced fill left would stand for tensors they no longer name.
  if (k == 0) ShedTo(&out->names, 0, &spares->names);
  PlaceParts(out, k, c, slot, spares);
}

void TrimTensors(Response* r, size_t n, TensorSpares* spares) {
  ShedTo(&r->names, n, &spares->names);
  ShedTo(&r->shapes, n, &spares->shapes);
  if (r->slots.size() > n) r->slots.resize(n);
  if (!r->groups.empty()) r->groups.resize(n);
}

void TrimResponses(std::vector<Response>* responses, size_t n,
                   TensorSpares* spares) {
  if (responses->size() <= n) return;
  for (size_t t = n; t < responses->size(); ++t)
    TrimTensors(&(*responses)[t], 0, spares);
  responses->resize(n);
}

void AssignParams(Response* to, const Response& from) {
  to->op = from.op;
  to->error = false;
  to->error_message.clear();
  to->dtype = from.dtype;
  to->reduce_op = from.reduce_op;
  to->root = from.root;
  to->device = from.device;
  to->process_set = from.process_set;
  to->prescale = from.prescale;
  to->postscale = from.postscale;
  to->sizes.clear();
  to->set_id = 0;
  to->set_ranks.clear();
  to->last_joined = -1;
}

int64_t TensorBytes(DataType dtype, const std::vector<int64_t>& shape) {
  int64_t n = static_cast<int64_t>(DataTypeSize(dtype));
  for (int64_t d : shape) n *= d;
  return n;
}

int FusionTarget(const std::vector<Response>& out,
                 const std::vector<int64_t>& sizes, const Response& r,
                 int64_t bytes, int64_t threshold) {
  if (threshold <= 0 || r.op != Op::kAllreduce || r.error) return -1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const Response& o = out[i];
    if (o.op == Op::kAllreduce && !o.error && o.dtype == r.dtype &&
        o.reduce_op == r.reduce_op && o.process_set == r.process_set &&
        o.device == r.device && o.prescale == r.prescale &&
        o.postscale == r.postscale && sizes[i] + bytes <= threshold)
      return static_cast<int>(i);
  }
  return -1;
}

Response ResponseFor(const Request& r) {
  Response c;
  c.op = r.op;
  c.names = {r.name};
  c.dtype = r.dtype;
  c.reduce_op = r.reduce_op;
  c.root = r.root;
  c.device = r.device;
  c.process_set = r.process_set;
  c.prescale = r.prescale;
  c.postscale = r.postscale;
  c.shapes = {r.shape};
  c.set_id = r.set_id;
  c.set_ranks = r.set_ranks;
  if (r.group_size > 0) c.groups = {{r.group, r.group_size}};
  return c;
}

Request RequestFor(const Response& resp, size_t i, int rank) {
  Request r;
  r.rank = rank;
  r.op = resp.op;
  r.name = resp.names[i];
  r.dtype = resp.dtype;
  r.reduce_op = resp.reduce_op;
  r.root = resp.root;
  r.device = resp.device;
  r.process_set = resp.process_set;
  r.prescale = resp.prescale;
  r.postscale = resp.postscale;
  r.shape = resp.shapes[i];
  r.set_id = resp.set_id;
  r.set_ranks = resp.set_ranks;
  const TensorGroup g = GroupOf(resp, i);
  r.group = g.name;
  r.group_size = g.size;
  return r;
}

}  // namespace horovod
