#include "rendezvous/slurm_lists.h"

#include <cctype>
#include <cstdlib>

namespace horovod {
namespace {

Status Bad(const std::string& what, const std::string& list) {
  return Status::InvalidArgument("malformed Slurm " + what + " '" + list + "'");
}

// Splits at commas outside brackets.
std::vector<std::string> TopLevelItems(const std::string& list) {
  std::vector<std::string> items;
  std::string cur;
  int depth = 0;
  for (char c : list) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      items.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  items.push_back(cur);
  return items;
}

bool AllDigits(const std::string& s) {
  if (s.empty() || s.size() > 9) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

// "prefix[ranges]rest": every expansion of the first bracket, each followed
// by every expansion of rest (which may hold brackets of its own).
Status ExpandItem(const std::string& item, const std::string& list,
                  std::vector<std::string>* out) {
  size_t open = item.find('[');
  if (open == std::string::npos) {
    if (item.empty() || item.find(']') != std::string::npos)
      return Bad("node list", list);
    out->push_back(item);
    return Status::OK();
  }
  size_t close = item.find(']', open);
  if (close == std::string::npos) return Bad("node list", list);
  const std::string prefix = item.substr(0, open);
  const std::string ranges = item.substr(open + 1, close - open - 1);
  std::vector<std::string> rest;
  if (close + 1 < item.size()) {
    HVD_RETURN_IF_ERROR(ExpandItem(item.substr(close + 1), list, &rest));
  } else {
    rest.push_back("");
  }
  for (const std::string& range : TopLevelItems(ranges)) {
    size_t dash = range.find('-');
    std::string lo = range.substr(0, dash);
    std::string hi = dash == std::string::npos ? lo : range.substr(dash + 1);
    if (!AllDigits(lo) || !AllDigits(hi)) return Bad("node list", list);
    long a = std::strtol(lo.c_str(), nullptr, 10);
    long b = std::strtol(hi.c_str(), nullptr, 10);
    if (b < a) return Bad("node list", list);
    for (long v = a; v <= b; ++v) {
      std::string num = std::to_string(v);
      if (num.size() < lo.size()) num.insert(0, lo.size() - num.size(), '0');
      for (const std::string& r : rest) {
        if (out->size() >= kMaxSlurmNodes)
          return Status::InvalidArgument("Slurm node list '" + list +
                                         "' names too many nodes");
        out->push_back(prefix + num + r);
      }
    }
  }
  return Status::OK();
}

}  // namespace

Status ExpandSlurmNodeList(const std::string& list,
                           std::vector<std::string>* out) {
  out->clear();
  if (list.empty()) return Bad("node list", list);
  for (const std::string& item : TopLevelItems(list))
    HVD_RETURN_IF_ERROR(ExpandItem(item, list, out));
  return Status::OK();
}

Status ExpandSlurmTasksPerNode(const std::string& list, std::vector<int>* out) {
  out->clear();
  if (list.empty()) return Bad("tasks per node", list);
  for (const std::string& item : TopLevelItems(list)) {
    size_t paren = item.find('(');
    std::string count = item.substr(0, paren);
    long repeat = 1;
    if (paren != std::string::npos) {
      if (item.size() < paren + 4 || item.compare(paren, 2, "(x") != 0 ||
          item.back() != ')')
        return Bad("tasks per node", list);
      std::string times = item.substr(paren + 2, item.size() - paren - 3);
      if (!AllDigits(times)) return Bad("tasks per node", list);
      repeat = std::strtol(times.c_str(), nullptr, 10);
    }
    if (!AllDigits(count) || repeat < 1) return Bad("tasks per node", list);
    const int n = static_cast<int>(std::strtol(count.c_str(), nullptr, 10));
    for (long i = 0; i < repeat; ++i) {
      if (out->size() >= kMaxSlurmNodes)
        return Status::InvalidArgument("Slurm tasks per node '" + list +
                                       "' names too many nodes");
      out->push_back(n);
    }
  }
  return Status::OK();
}

}  // namespace horovod
