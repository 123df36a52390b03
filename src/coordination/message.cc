#include "coordination/message.h"

#include <cctype>

namespace horovod {

const char* OpName(uint8_t op) {
  if (op == static_cast<uint8_t>(ControlOp::kAddProcessSet))
    return "add_process_set";
  if (op == static_cast<uint8_t>(ControlOp::kRemoveProcessSet))
    return "remove_process_set";
  return OpTypeName(static_cast<OpType>(op));
}

std::string UpperOpName(uint8_t op) {
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
  return r;
}

}  // namespace horovod
