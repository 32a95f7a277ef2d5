#include "runtime/compile_options.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "base/parse_number.h"
#include "runtime/xla_option_types.h"

#include "runtime/proto/xla_subset.pb.h"

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

std::string CompileOptions::serialize() const {
  xla_subset::CompileOptionsProto proto;
  auto* build = proto.mutable_executable_build_options();
  build->set_num_replicas(num_replicas);
  build->set_num_partitions(num_partitions);
  if (partitioner != Partitioner::kNone) {
    build->set_use_spmd_partitioning(true);
    if (partitioner == Partitioner::kShardy) build->set_use_shardy_partitioner(true);
    // One value: it holds for every output.
    build->add_allow_spmd_sharding_propagation_to_output(true);
  }
  // check() refuses a list of another size; serialize() never reads past it either way.
  if (!device_ids.empty() && counts_in_range(num_replicas, num_partitions) &&
      static_cast<int64_t>(device_ids.size()) == num_replicas * num_partitions) {
    auto* assignment = build->mutable_device_assignment();
    assignment->set_replica_count(static_cast<int32_t>(num_replicas));
    assignment->set_computation_count(static_cast<int32_t>(num_partitions));
    for (int64_t p = 0; p < num_partitions; ++p) {
      auto* computation = assignment->add_computation_devices();
      for (int64_t r = 0; r < num_replicas; ++r)
        computation->add_replica_device_ids(device_ids[static_cast<size_t>(r * num_partitions + p)]);
    }
  }
  if (portable) proto.set_compile_portable_executable(true);
  for (const auto& [name, value] : xla_options) {
    xla_subset::OptionOverrideProto& o = (*proto.mutable_env_option_overrides())[name];
    if (const bool* b = std::get_if<bool>(&value)) o.set_bool_field(*b);
    else if (const int64_t* i = std::get_if<int64_t>(&value)) o.set_int_field(*i);
    else if (const double* d = std::get_if<double>(&value)) o.set_double_field(*d);
    else o.set_string_field(std::get<std::string>(value));
  }
  // Deterministic: env_option_overrides is a map, and the bytes are part of compile-cache keys.
  std::string out;
  google::protobuf::io::StringOutputStream stream(&out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  proto.SerializeToCodedStream(&coded);
  return out;
}

}  // namespace plugboard
