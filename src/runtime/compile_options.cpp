#include "runtime/compile_options.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "base/parse_number.h"
#include "runtime/protobuf_wire.h"
#include "runtime/xla_option_types.h"

namespace plugboard {

std::map<std::string, XlaOptionValue> jax_numerics_options() {
  return {{"xla_cpu_enable_fast_min_max", false}};
}

CompileOptions::CompileOptions() : xla_options(jax_numerics_options()) {}

std::string_view partitioner_name(Partitioner p) {
  switch (p) {
    case Partitioner::kNone: return "none";
    case Partitioner::kGspmd: return "GSPMD (mhlo.sharding)";
    case Partitioner::kShardy: return "Shardy (sdy dialect)";
  }
  return "none";
}

CompileOptions CompileOptions::plugin_defaults() {
  CompileOptions o;
  o.xla_options.clear();
  return o;
}

namespace {

// The value of option `name` typed by its declared type. Errors name the option, echo the text exactly
// as given and say which type was expected.
Expected<XlaOptionValue> typed_value(const std::string& name, std::string_view text, XlaOptionType type) {
  const std::string what = "XLA option " + name;
  const auto not_a = [&](std::string_view kind) {
    return invalid_argument(what + ": '" + std::string(text) + "' is not " + std::string(kind) + " (xla.DebugOptions." +
                            name + " is " + std::string(xla_option_type_name(type)) + ")");
  };
  switch (type) {
    case XlaOptionType::kBool:
      if (text == "true" || text == "false") return XlaOptionValue(text == "true");
      return not_a("true or false");
    case XlaOptionType::kInt32:
    case XlaOptionType::kInt64: {
      const bool narrow = type == XlaOptionType::kInt32;
      auto v = parse_int64(text, what, narrow ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int64_t>::min(),
                           narrow ? std::numeric_limits<int32_t>::max() : std::numeric_limits<int64_t>::max());
      if (!v) return std::unexpected(std::move(v).error().annotate("xla.DebugOptions." + name + " is " +
                                                                    std::string(xla_option_type_name(type))));
      return XlaOptionValue(*v);
    }
    case XlaOptionType::kFloat:
    case XlaOptionType::kDouble: {
      auto v = parse_double(text, what);
      if (!v) return std::unexpected(std::move(v).error().annotate("xla.DebugOptions." + name + " is " +
                                                                    std::string(xla_option_type_name(type))));
      if (type == XlaOptionType::kFloat && std::fabs(*v) > std::numeric_limits<float>::max())
        return make_error(Code::kOutOfRange, what + ": " + std::string(text) + " is out of the range of a float");
      return XlaOptionValue(*v);
    }
    case XlaOptionType::kString:
    case XlaOptionType::kEnum:  // XLA takes an enum's value by name
      return XlaOptionValue(std::string(text));
  }
  return XlaOptionValue(std::string(text));
}

// For a name the table does not know: true/false, an integer that fits int64, a decimal number with a
// point or an exponent; anything else, an out-of-range integer included, stays the text it is (never
// refused, never rewritten: the plugin decides, and its message shows the text as given).
XlaOptionValue inferred_value(std::string_view text) {
  if (text == "true" || text == "false") return text == "true";
  if (auto i = parse_int64(text, "")) return *i;
  if (text.find_first_of(".eE") != std::string_view::npos && text.find_first_not_of("0123456789+-.eE") == std::string_view::npos)
    if (auto d = parse_double(text, "")) return *d;
  return std::string(text);
}

}  // namespace

Status CompileOptions::set_from_text(std::string_view assignment) {
  size_t eq = assignment.find('=');
  if (eq == std::string_view::npos || eq == 0)
    return invalid_argument("XLA option '" + std::string(assignment) + "' is not of the form name=value");
  std::string name(assignment.substr(0, eq));
  std::string_view text = assignment.substr(eq + 1);
  if (const auto type = xla_option_type(name)) {
    PB_ASSIGN_OR_RETURN(xla_options[name], typed_value(name, text, *type));
  } else {
    xla_options[name] = inferred_value(text);
  }
  return ok();
}

namespace {
// Replicas or partitions: far above any machine's device count, and small enough that their product
// fits the proto's int32.
constexpr int64_t kMost = 1 << 15;
bool counts_in_range(int64_t replicas, int64_t partitions) {
  return replicas >= 1 && replicas <= kMost && partitions >= 1 && partitions <= kMost;
}
}  // namespace

Status CompileOptions::check() const {
  if (num_replicas < 1 || num_replicas > kMost)
    return invalid_argument("num_replicas must be between 1 and " + std::to_string(kMost) + ", got " +
                            std::to_string(num_replicas));
  if (num_partitions < 1 || num_partitions > kMost)
    return invalid_argument("num_partitions must be between 1 and " + std::to_string(kMost) + ", got " +
                            std::to_string(num_partitions));
  if (num_partitions > 1 && partitioner == Partitioner::kNone)
    return invalid_argument("num_partitions " + std::to_string(num_partitions) +
                            " needs a partitioner (GSPMD or Shardy) to split the program over the devices");
  const int64_t devices = num_replicas * num_partitions;
  if (portable && devices > 1)
    return invalid_argument("a portable program runs on one device; num_replicas * num_partitions is " +
                            std::to_string(devices));
  if (portable && !device_ids.empty()) return invalid_argument("a portable program has no device assignment");
  if (!device_ids.empty()) {
    if (static_cast<int64_t>(device_ids.size()) != devices)
      return invalid_argument("the device assignment names " + std::to_string(device_ids.size()) + " device(s), " +
                              "num_replicas * num_partitions is " + std::to_string(devices));
    for (size_t i = 0; i < device_ids.size(); ++i) {
      if (device_ids[i] < 0)
        return invalid_argument("device id " + std::to_string(device_ids[i]) + " in the device assignment is negative");
      if (std::find(device_ids.begin(), device_ids.begin() + static_cast<std::ptrdiff_t>(i), device_ids[i]) !=
          device_ids.begin() + static_cast<std::ptrdiff_t>(i))
        return invalid_argument("device id " + std::to_string(device_ids[i]) + " appears twice in the device assignment");
    }
  }
  return ok();
}

// xla.CompileOptionsProto (xla/pjrt/proto/compile_options.proto) and what it holds, with XLA's field
// numbers, written as protoc's code writes them (fields in number order, proto3 defaults left out,
// repeated numbers packed). debug_options (inside executable_build_options) stays unset on purpose: a
// present but partial DebugOptions does not fall back to XLA's defaults; single XLA options go through
// env_option_overrides instead.
namespace {
namespace compile_options_proto {
constexpr uint32_t kExecutableBuildOptions = 3;  // ExecutableBuildOptionsProto
constexpr uint32_t kCompilePortableExecutable = 4;
constexpr uint32_t kEnvOptionOverrides = 7;  // map<string, OptionOverrideProto>: entries {key = 1, value = 2}
}  // namespace compile_options_proto
namespace build_options_proto {  // xla.ExecutableBuildOptionsProto
constexpr uint32_t kNumReplicas = 4;
constexpr uint32_t kNumPartitions = 5;
constexpr uint32_t kUseSpmdPartitioning = 6;
constexpr uint32_t kDeviceAssignment = 9;  // xla.DeviceAssignmentProto
constexpr uint32_t kAllowSpmdShardingPropagationToOutput = 12;  // repeated bool
constexpr uint32_t kUseShardyPartitioner = 19;
}  // namespace build_options_proto
// xla.DeviceAssignmentProto (xla_data.proto): computation_devices[p].replica_device_ids[r] is the
// global device id that replica r of partition (computation) p runs on.
namespace device_assignment_proto {
constexpr uint32_t kReplicaCount = 1;
constexpr uint32_t kComputationCount = 2;
constexpr uint32_t kComputationDevices = 3;  // ComputationDevice { repeated int64 replica_device_ids = 1; }
constexpr uint32_t kReplicaDeviceIds = 1;
}  // namespace device_assignment_proto
namespace option_override_proto {  // xla.OptionOverrideProto: oneof value
constexpr uint32_t kString = 1, kBool = 2, kInt = 3, kDouble = 4;
}  // namespace option_override_proto
}  // namespace

std::string CompileOptions::serialize() const {
  using protobuf_wire::ProtoWriter;
  ProtoWriter build;
  if (num_replicas != 0) build.add_int64(build_options_proto::kNumReplicas, num_replicas);
  if (num_partitions != 0) build.add_int64(build_options_proto::kNumPartitions, num_partitions);
  if (partitioner != Partitioner::kNone) build.add_varint(build_options_proto::kUseSpmdPartitioning, 1);
  // check() refuses a list of another size; serialize() never reads past it either way.
  if (!device_ids.empty() && counts_in_range(num_replicas, num_partitions) &&
      static_cast<int64_t>(device_ids.size()) == num_replicas * num_partitions) {
    ProtoWriter assignment;
    // int32 fields: counts_in_range keeps them positive and in range.
    assignment.add_int64(device_assignment_proto::kReplicaCount, num_replicas);
    assignment.add_int64(device_assignment_proto::kComputationCount, num_partitions);
    std::vector<uint64_t> ids;
    for (int64_t p = 0; p < num_partitions; ++p) {
      ids.clear();
      for (int64_t r = 0; r < num_replicas; ++r)
        ids.push_back(static_cast<uint64_t>(device_ids[static_cast<size_t>(r * num_partitions + p)]));
      ProtoWriter computation;
      computation.add_packed_varints(device_assignment_proto::kReplicaDeviceIds, ids);
      assignment.add_message(device_assignment_proto::kComputationDevices, computation);
    }
    build.add_message(build_options_proto::kDeviceAssignment, assignment);
  }
  if (partitioner != Partitioner::kNone) {
    // One value: it holds for every output.
    const uint64_t allow[] = {1};
    build.add_packed_varints(build_options_proto::kAllowSpmdShardingPropagationToOutput, allow);
  }
  if (partitioner == Partitioner::kShardy) build.add_varint(build_options_proto::kUseShardyPartitioner, 1);

  ProtoWriter proto;
  proto.add_message(compile_options_proto::kExecutableBuildOptions, build);
  if (portable) proto.add_varint(compile_options_proto::kCompilePortableExecutable, 1);
  // Sorted by name (a std::map), as protobuf's deterministic serialization sorts a map: the bytes are
  // part of compile-cache keys. A map entry holds its key and its value always; a oneof member is
  // written whatever its value.
  for (const auto& [name, value] : xla_options) {
    ProtoWriter override_value;
    if (const bool* b = std::get_if<bool>(&value)) override_value.add_varint(option_override_proto::kBool, *b ? 1 : 0);
    else if (const int64_t* i = std::get_if<int64_t>(&value)) override_value.add_int64(option_override_proto::kInt, *i);
    else if (const double* d = std::get_if<double>(&value)) override_value.add_double(option_override_proto::kDouble, *d);
    else override_value.add_bytes(option_override_proto::kString, std::get<std::string>(value));
    ProtoWriter entry;
    entry.add_bytes(1, name);
    entry.add_message(2, override_value);
    proto.add_message(compile_options_proto::kEnvOptionOverrides, entry);
  }
  return proto.bytes();
}

}  // namespace plugboard
