#include "compile_policy.h"

#include <array>
#include <cctype>

namespace plugboard::nif {
namespace {

// Results larger than this are not computed on a scheduler.
constexpr size_t kInlineResultBytes = 64 * 1024;

// Operation names (StableHLO, CHLO and MHLO spell them alike) that make a program's run time
// unbounded by its size or hidden from XLA's cost model.
// Also the operations that wait on something outside the program: infeed, outfeed, send, recv, and
// the collectives, which wait for every peer (and, with a key-value store attached, on the store);
// (A sharding attribute is judged by spmd_sharding below.)
constexpr std::array<std::string_view, 20> kLongRunning = {
    "while",      "custom_call",        "sort",                 "scatter",        "fft",
    "cholesky",   "triangular_solve",   "rng",                  "eigh",           "top_k",
    "infeed",     "outfeed",            "send",                 "recv",           "all_reduce",
    "all_gather", "all_to_all",         "collective_permute",   "collective_broadcast",
    "reduce_scatter"};

// Sharding values that keep a whole array on one device: what JAX writes into a single-device
// program's arguments and results (mhlo.sharding = "{replicated}").
constexpr std::array<std::string_view, 2> kOneDeviceShardings = {"\"{replicated}\"", "\"{maximal device=0}\""};

// A sharding attribute (mhlo.sharding, sdy.sharding, ...) that may split an array across devices:
// anything but `= "{replicated}"` or `= "{maximal device=0}"` in text, including every sdy.sharding
// and a sharding in bytecode, whose value this check cannot read (it assumes the worst). A program
// that really runs on several devices is also refused by its executable's device count.
bool spmd_sharding(std::string_view program_bytes) {
  constexpr std::string_view kName = "sharding";
  for (size_t at = program_bytes.find(kName); at != std::string_view::npos; at = program_bytes.find(kName, at + 1)) {
    size_t i = at + kName.size();
    while (i < program_bytes.size() && std::isspace(static_cast<unsigned char>(program_bytes[i]))) ++i;
    if (i >= program_bytes.size() || program_bytes[i] != '=') return true;
    ++i;
    while (i < program_bytes.size() && std::isspace(static_cast<unsigned char>(program_bytes[i]))) ++i;
    std::string_view value = program_bytes.substr(i);
    bool one_device = false;
    for (std::string_view v : kOneDeviceShardings) one_device = one_device || value.starts_with(v);
    if (!one_device) return true;
  }
  return false;
}

// A module attribute that gives more than one partition or replica ("mhlo.num_partitions = 2 : i32"
// in text; JAX writes "= 1" into every module, which stays inline). A value that is not a number in
// text counts as more than one. A name not followed by `=` is not a value this check can read: in
// MLIR bytecode the attribute's name is in the string table and its value encoded elsewhere, so
// bytecode is not judged here (it passes); a bytecode module compiled for more than one partition is
// refused by its executable's device count (may_launch_inline), and one compiled for a single device
// runs on that device alone, its collectives still caught by name (bytecode keeps op names as text).
bool names_more_than_one(std::string_view program_bytes, std::string_view attribute) {
  for (size_t at = program_bytes.find(attribute); at != std::string_view::npos; at = program_bytes.find(attribute, at + 1)) {
    size_t i = at + attribute.size();
    auto skip_spaces = [&] {
      while (i < program_bytes.size() && std::isspace(static_cast<unsigned char>(program_bytes[i]))) ++i;
    };
    skip_spaces();
    if (i >= program_bytes.size() || program_bytes[i] != '=') continue;  // bytecode, or a longer name
    ++i;
    skip_spaces();
    size_t digits = i;
    while (digits < program_bytes.size() && program_bytes[digits] == '0') ++digits;  // "01" is one
    size_t end = digits;
    while (end < program_bytes.size() && std::isdigit(static_cast<unsigned char>(program_bytes[end]))) ++end;
    if (end == i) return true;  // `=` then not a number: assume the worst
    if (end - digits > 1 || (end - digits == 1 && program_bytes[digits] > '1')) return true;
  }
  return false;
}

}  // namespace

bool may_launch_inline(std::string_view program_bytes, const api::Executable& executable) {
  if (!executable.host_callbacks_needed().empty()) return false;
  if (executable.devices().size() > 1) return false;  // SPMD: each part waits for the others
  const auto custom_calls = executable.custom_call_targets();
  if (!custom_calls || !custom_calls->empty()) return false;  // unknown, or library work XLA cannot cost
  size_t result_bytes = 0;
  for (const api::ArrayType& r : executable.results()) {
    auto bytes = byte_size(r.dtype, r.dims);
    if (!bytes) return false;
    result_bytes += *bytes;
  }
  if (result_bytes > kInlineResultBytes) return false;
  for (std::string_view name : kLongRunning)
    if (program_bytes.find(name) != std::string_view::npos) return false;
  if (spmd_sharding(program_bytes)) return false;
  return !names_more_than_one(program_bytes, "num_partitions") && !names_more_than_one(program_bytes, "num_replicas");
}

}  // namespace plugboard::nif
