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
  return r;
}

}  // namespace horovod
