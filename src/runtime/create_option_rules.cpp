#include "runtime/create_option_rules.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string_view>

#include "base/terminal_text.h"

namespace plugboard {

namespace {

enum class Kind { kInt, kIntList, kFloat, kBool, kString };

struct Rule {
  std::string_view name;
  Kind kind;
  // Integers (and each integer of a list): [min, max]; floats: (fmin, fmax].
  int64_t min = 0, max = 0;
  double fmin = 0, fmax = 0;
};

// Upper bound on CPU devices: far above any machine's cores, far below what breaks the plugin
// (2^31 crashes 0.106).
constexpr int64_t kMaxCpuDevices = 4096;
constexpr int64_t kInt32Max = INT32_MAX;

// XLA's CPU plugin (cpu_device_count), the job's place (node_id, num_nodes: ClientOptions sets them
// too) and XLA's GPU plugins (xla/pjrt/c/pjrt_c_api_gpu_internal.cc).
constexpr Rule kRules[] = {
    {"cpu_device_count", Kind::kInt, 1, kMaxCpuDevices},
    {"node_id", Kind::kInt, 0, kInt32Max},
    {"num_nodes", Kind::kInt, 1, kInt32Max},
    {"visible_devices", Kind::kIntList, 0, kInt32Max},
    {"memory_fraction", Kind::kFloat, 0, 0, 0.0, 1.0},
    {"preallocate", Kind::kBool},
    {"allocator", Kind::kString},
    {"platform_name", Kind::kString},
    {"collective_memory_size", Kind::kInt, 0, INT64_MAX},
    {"enable_mock_nccl", Kind::kBool},
    {"mock_gpu_topology", Kind::kString},
    {"should_stage_host_to_device_transfers", Kind::kBool},
};

std::string_view type_of(const NamedValueData& v) {
  switch (v.index()) {
    case 0: return "a string";
    case 1: return "an integer";
    case 2: return "a list of integers";
    case 3: return "a float";
    default: return "a boolean";
  }
}

// A value as a message writes it; a string's control characters spelled out (terminal_safe).
std::string spelled(const NamedValueData& v) {
  if (const auto* s = std::get_if<std::string>(&v)) return "\"" + terminal_safe(*s) + "\"";
  if (const auto* f = std::get_if<float>(&v)) {
    char text[32];
    std::snprintf(text, sizeof text, "%.9g", static_cast<double>(*f));
    return text;
  }
  return named_value_to_string(v);
}

std::string allowed(const Rule& r) {
  auto range = [&] { return std::to_string(r.min) + ".." + std::to_string(r.max); };
  switch (r.kind) {
    case Kind::kInt: return "an integer in " + range();
    case Kind::kIntList: return "a list of integers in " + range();
    case Kind::kFloat: {
      char text[64];
      std::snprintf(text, sizeof text, "a float in (%g, %g]", r.fmin, r.fmax);
      return text;
    }
    case Kind::kBool: return "true or false";
    case Kind::kString: return "a string";
  }
  return "";
}

bool in_range(const Rule& r, int64_t i) { return i >= r.min && i <= r.max; }

bool accepts(const Rule& r, const NamedValueData& v) {
  switch (r.kind) {
    case Kind::kInt: {
      const auto* i = std::get_if<int64_t>(&v);
      return i && in_range(r, *i);
    }
    case Kind::kIntList: {
      const auto* l = std::get_if<std::vector<int64_t>>(&v);
      return l && std::all_of(l->begin(), l->end(), [&](int64_t i) { return in_range(r, i); });
    }
    case Kind::kFloat: {
      const auto* f = std::get_if<float>(&v);
      return f && std::isfinite(*f) && *f > r.fmin && *f <= r.fmax;
    }
    case Kind::kBool: return std::holds_alternative<bool>(v);
    case Kind::kString: return std::holds_alternative<std::string>(v);
  }
  return false;
}

}  // namespace

Status check_create_options(const std::vector<NamedValue>& options, const std::string& plugin) {
  for (const NamedValue& o : options) {
    const auto* rule = std::find_if(std::begin(kRules), std::end(kRules), [&](const Rule& r) { return r.name == o.name; });
    if (rule == std::end(kRules) || accepts(*rule, o.value)) continue;
    return invalid_argument("create option " + terminal_safe(o.name) + " = " + spelled(o.value) + " (" + std::string(type_of(o.value)) +
                            ") for " + plugin + ": must be " + allowed(*rule) +
                            " (plugboard checks it before the plugin sees it)");
  }
  return ok();
}

std::string describe_create_options(const std::vector<NamedValue>& options) {
  if (options.empty()) return "no create options";
  std::string s;
  for (const NamedValue& o : options) s += (s.empty() ? "" : ", ") + terminal_safe(o.name) + " = " + spelled(o.value);
  return s;
}

}  // namespace plugboard
