#include "runtime/compile_options.h"

#include <charconv>

#include "runtime/proto/xla_subset.pb.h"

namespace plugboard {

std::map<std::string, XlaOptionValue> jax_numerics_options() {
  return {{"xla_cpu_enable_fast_min_max", false}};
}

CompileOptions::CompileOptions() : xla_options(jax_numerics_options()) {}

CompileOptions CompileOptions::plugin_defaults() {
  CompileOptions o;
  o.xla_options.clear();
  return o;
}

Status CompileOptions::set_from_text(std::string_view assignment) {
  size_t eq = assignment.find('=');
  if (eq == std::string_view::npos || eq == 0)
    return invalid_argument("XLA option '" + std::string(assignment) + "' is not of the form name=value");
  std::string name(assignment.substr(0, eq));
  std::string_view text = assignment.substr(eq + 1);
  if (text == "true" || text == "false") {
    xla_options[name] = text == "true";
    return ok();
  }
  int64_t i;
  if (auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), i);
      ec == std::errc() && p == text.data() + text.size()) {
    xla_options[name] = i;
    return ok();
  }
  double d;
  if (auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), d);
      ec == std::errc() && p == text.data() + text.size()) {
    xla_options[name] = d;
    return ok();
  }
  xla_options[name] = std::string(text);
  return ok();
}

std::string CompileOptions::serialize() const {
  xla_subset::CompileOptionsProto proto;
  auto* build = proto.mutable_executable_build_options();
  build->set_num_replicas(num_replicas);
  build->set_num_partitions(num_partitions);
  for (const auto& [name, value] : xla_options) {
    xla_subset::OptionOverrideProto& o = (*proto.mutable_env_option_overrides())[name];
    if (const bool* b = std::get_if<bool>(&value)) o.set_bool_field(*b);
    else if (const int64_t* i = std::get_if<int64_t>(&value)) o.set_int_field(*i);
    else if (const double* d = std::get_if<double>(&value)) o.set_double_field(*d);
    else o.set_string_field(std::get<std::string>(value));
  }
  std::string out;
  proto.SerializeToString(&out);
  return out;
}

}  // namespace plugboard
