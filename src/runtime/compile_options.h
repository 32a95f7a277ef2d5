// Compile options as values, serialized into a real xla.CompileOptionsProto.
//
// By default plugboard asks for JAX's numerics: XLA CPU's built-in default xla_cpu_enable_fast_min_max
// = true makes max(1, NaN) return 1, JAX (and Nx) return NaN. The option goes in
// env_option_overrides rather than a DebugOptions message, because a partial DebugOptions does not
// fall back to XLA's defaults (an empty one fails to compile).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/status.h"

namespace plugboard {

using XlaOptionValue = std::variant<bool, int64_t, double, std::string>;

// How XLA splits one program over num_partitions devices (SPMD: every device runs the same program on
// its part of the data; XLA inserts the collectives). ExecutableBuildOptionsProto's
// use_spmd_partitioning and use_shardy_partitioner.
enum class Partitioner {
  kNone,    // no partitioning: num_partitions must be 1
  kGspmd,   // XLA's GSPMD partitioner, driven by `mhlo.sharding` attributes
  kShardy,  // Shardy, driven by the `sdy` dialect (`sdy.mesh`, `sdy.sharding`)
};
// "none", "GSPMD (mhlo.sharding)", "Shardy (sdy dialect)": for messages.
std::string_view partitioner_name(Partitioner p);

struct CompileOptions {
  int64_t num_replicas = 1;
  int64_t num_partitions = 1;
  Partitioner partitioner = Partitioner::kNone;
  // The devices the program runs on, as global device ids (DeviceInfo::id), replica-major:
  // device_ids[r * num_partitions + p] runs partition p of replica r. Empty: the plugin's default
  // assignment (its first num_replicas * num_partitions devices, in order).
  std::vector<int64_t> device_ids;
  // A portable executable (CompileOptionsProto.compile_portable_executable) is compiled without a
  // device assignment and may run on any addressable device (ExecuteOptions::device).
  bool portable = false;
  // XLA DebugOptions fields by name (e.g. "xla_cpu_enable_fast_min_max"), sent as
  // CompileOptionsProto.env_option_overrides. Starts with jax_numerics_options().
  std::map<std::string, XlaOptionValue> xla_options;

  CompileOptions();
  // With no XLA options at all: the plugin's own defaults (the 6-byte minimum proto).
  static CompileOptions plugin_defaults();

  // Sets an option from text, as the CLI's --xla-option takes it: "name=value". The value is typed by
  // the field's declared type in xla.DebugOptions (xla_option_types.h): xla_dump_to=123 is the string
  // "123", xla_backend_optimization_level=abc is an INVALID_ARGUMENT naming the option, an int32 out of
  // range is OUT_OF_RANGE, a bool is exactly true or false, an enum is given by name. A name the table
  // does not know is inferred: true/false, an int64, a decimal number with '.' or an exponent, else
  // the text as it is (never refused; the plugin says whether it knows the option).
  Status set_from_text(std::string_view assignment);

  // INVALID_ARGUMENT naming the option for options that cannot go together: a count below 1, several
  // partitions without a partitioner, a portable program on several devices, a device list of
  // another size than num_replicas * num_partitions or naming a device twice.
  Status check() const;

  // The serialized xla.CompileOptionsProto. With a partitioner, the outputs' shardings are left to
  // XLA's propagation where the program does not annotate them (allow_spmd_sharding_propagation_to_output).
  std::string serialize() const;
};

// The options that give JAX's results on XLA CPU.
std::map<std::string, XlaOptionValue> jax_numerics_options();

}  // namespace plugboard
