// The knob table: every HOROVOD_* variable the engine, the rendezvous,
// logging and the launchers use, declared once with its type, range,
// horovodrun flags and a summary. Knobs::FromEnvironment (the engine's
// tuning) is driven by it; the rendezvous (job description, start timeout)
// and logging read theirs directly. tests/python/test_knobs.py holds the
// table, docs/knobs.md, horovodrun's flags and every HOROVOD_* name in the
// sources together. Immutable; thread-safe.
#ifndef HOROVOD_COMMON_KNOBS_H_
#define HOROVOD_COMMON_KNOBS_H_

#include <horovod/knobs.h>

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace horovod {

enum class KnobType { kInt, kDouble, kBool, kString };

// Where a variable's value lands: a Knobs field, or nowhere in Knobs (read
// by the rendezvous or logging, or set by the launchers for the job).
using KnobField =
    std::variant<std::monostate, int64_t Knobs::*, int Knobs::*,
                 double Knobs::*, bool Knobs::*, std::string Knobs::*>;

struct KnobSpec {
  const char* name;
  KnobType type;
  KnobField field;
  // Numbers outside [min, max] (min itself excluded when min_open) are
  // ignored with a warning.
  double min = 0;
  double max = 0;
  bool min_open = false;
  // Set when the variable is given, so autotune leaves the knob alone.
  bool Knobs::*given = nullptr;
  // Default of a variable outside Knobs, as docs/knobs.md shows it.
  const char* other_default = "";
  // horovodrun's flags that set it (space-separated), or "".
  const char* flags = "";
  const char* summary = "";
  // Set by the launchers to describe the job, not a tuning knob.
  bool job = false;
  // Every rank must hold the same value (the ranks would otherwise read
  // each other's messages or shared memory differently); the rendezvous
  // compares them.
  bool agree = false;
};

const std::vector<KnobSpec>& KnobTable();
// The default as docs/knobs.md shows it: the Knobs initializer (numbers
// as printed by %g, bools as 0/1, an empty string as "none"), or
// other_default.
std::string KnobDefault(const KnobSpec& spec);
// The accepted range as text ("[4096, 4294967296]", "> 0", ""), for
// warnings and docs.
std::string KnobRange(const KnobSpec& spec);
// The knob's value in `knobs`, in KnobDefault's form ("" for a variable
// outside Knobs).
std::string KnobValue(const KnobSpec& spec, const Knobs& knobs);
// "NAME=value;..." for every knob that must agree across ranks, in table
// order: what JobInfo::settings carries to the rendezvous.
std::string AgreedSettings(const Knobs& knobs);

// Helpers shared by JobInfo parsing and Knobs: false when unset, or (with
// a warning) when the text does not parse.
bool EnvInt(const char* name, int64_t* out);
bool EnvDouble(const char* name, double* out);
bool EnvString(const char* name, std::string* out);

}  // namespace horovod

#endif  // HOROVOD_COMMON_KNOBS_H_
