#include "plugin/plugin.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>

#include "abi/api.h"

namespace plugboard {
namespace {

std::string extension_name(int type) {
  switch (type) {
    case PJRT_Extension_Type_Gpu_Custom_Call: return "GpuCustomCall";
    case PJRT_Extension_Type_Profiler: return "Profiler";
    case PJRT_Extension_Type_Custom_Partitioner: return "CustomPartitioner";
    case PJRT_Extension_Type_Stream: return "Stream";
    case PJRT_Extension_Type_Layouts: return "Layouts";
    case PJRT_Extension_Type_FFI: return "FFI";
    case PJRT_Extension_Type_MemoryDescriptions: return "MemoryDescriptions";
    case PJRT_Extension_Type_Triton: return "Triton";
    case PJRT_Extension_Type_RawBuffer: return "RawBuffer";
    case PJRT_Extension_Type_PhaseCompile: return "PhaseCompile";
    case PJRT_Extension_Type_Example: return "Example";
    case PJRT_Extension_Type_Unknown: return "Unknown";
    case PJRT_Extension_Type_CrossHostTransfers: return "CrossHostTransfers";
    case PJRT_Extension_Type_ExecutableMetadata: return "ExecutableMetadata";
    case PJRT_Extension_Type_Callback: return "Callback";
    case PJRT_Extension_Type_HostAllocator: return "HostAllocator";
  }
  return "type " + std::to_string(type);
}

// Copies a PJRT NamedValue into an owned value. Unknown value types are kept as a string saying so.
NamedValue copy_named_value(const PJRT_NamedValue& v) {
  NamedValue out;
  out.name.assign(abi::view(v.name, v.name_size));
  switch (abi::enum_value(v.type)) {
    case PJRT_NamedValue_kString: out.value = std::string(abi::view(v.string_value, v.value_size)); break;
    case PJRT_NamedValue_kInt64: out.value = v.int64_value; break;
    case PJRT_NamedValue_kInt64List:
      out.value = v.int64_array_value
                      ? std::vector<int64_t>(v.int64_array_value, v.int64_array_value + v.value_size)
                      : std::vector<int64_t>();
      break;
    case PJRT_NamedValue_kFloat: out.value = v.float_value; break;
    case PJRT_NamedValue_kBool: out.value = v.bool_value; break;
    default: out.value = "<unknown NamedValue type " + std::to_string(abi::enum_value(v.type)) + ">";
  }
  return out;
}

std::optional<SemVer> semver_attribute(const Plugin& p, std::string_view name) {
  const NamedValue* a = p.attribute(name);
  if (!a) return std::nullopt;
  if (const auto* list = std::get_if<std::vector<int64_t>>(&a->value); list && list->size() >= 2)
    return SemVer{static_cast<int>((*list)[0]), static_cast<int>((*list)[1]),
                  list->size() > 2 ? static_cast<int>((*list)[2]) : 0};
  if (const auto* s = std::get_if<std::string>(&a->value)) return parse_semver(*s);
  return std::nullopt;
}

Status check_elf(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  if (!in.read(magic, 4) || std::memcmp(magic, "\x7f" "ELF", 4) != 0)
    return invalid_argument(path.string() + " is not an ELF shared library (no ELF magic at its start)");
  return ok();
}

Status check_version(const abi::Api& api, PjrtVersion v) {
  const std::string supported = "plugboard supports PJRT API " + std::to_string(kPjrtMajor) + "." +
                                std::to_string(kMinPjrtMinor) + " and newer 0.x (built against " +
                                std::to_string(PJRT_API_MAJOR) + "." + std::to_string(PJRT_API_MINOR) + ")";
  if (v.major != kPjrtMajor)
    return make_error(Code::kFailedPrecondition, api.label() + " has PJRT API version " + v.to_string() +
                                                     ", a different major version: " + supported);
  if (v.minor < kMinPjrtMinor)
    return make_error(Code::kFailedPrecondition,
                      api.label() + " has PJRT API version " + v.to_string() + ", too old: " + supported);
  return ok();
}

}  // namespace

Plugin::~Plugin() = default;

const NamedValue* Plugin::attribute(std::string_view name) const {
  for (const auto& a : attributes_)
    if (a.name == name) return &a;
  return nullptr;
}

std::optional<std::string> Plugin::string_attribute(std::string_view name) const {
  const NamedValue* a = attribute(name);
  if (const auto* s = a ? std::get_if<std::string>(&a->value) : nullptr) return *s;
  return std::nullopt;
}

std::optional<int64_t> Plugin::int_attribute(std::string_view name) const {
  const NamedValue* a = attribute(name);
  if (const auto* i = a ? std::get_if<int64_t>(&a->value) : nullptr) return *i;
  return std::nullopt;
}

std::optional<SemVer> Plugin::stablehlo_current_version() const {
  return semver_attribute(*this, "stablehlo_current_version");
}
std::optional<SemVer> Plugin::stablehlo_minimum_version() const {
  return semver_attribute(*this, "stablehlo_minimum_version");
}

const ExtensionInfo* Plugin::extension(int type) const {
  for (const auto& e : extensions_)
    if (e.type == type) return &e;
  return nullptr;
}

std::string named_value_to_string(const NamedValueData& v) {
  struct Printer {
    std::string operator()(const std::string& s) const { return s; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(const std::vector<int64_t>& l) const {
      std::string s = "[";
      for (size_t i = 0; i < l.size(); ++i) s += (i ? ", " : "") + std::to_string(l[i]);
      return s + "]";
    }
    std::string operator()(float f) const { return std::to_string(f); }
    std::string operator()(bool b) const { return b ? "true" : "false"; }
  };
  return std::visit(Printer{}, v);
}

namespace {

struct Table {
  std::mutex mu;
  // Keyed by (device, inode): the same file reached through two paths is one plugin.
  struct Outcome {
    Expected<std::shared_ptr<const Plugin>> plugin;
    LoadStep failed_step;
  };
  std::map<std::pair<dev_t, ino_t>, Outcome> by_file;
  std::vector<std::shared_ptr<const Plugin>> in_order;
};

Table& table() {
  static Table* t = new Table();  // immortal, like the plugins it holds
  return *t;
}

}  // namespace

namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
}  // namespace

LoadTrace load_plugin_traced(const std::filesystem::path& requested) {
  LoadTrace trace;
  const std::string shown = requested.string();
  struct stat st {};
  if (::stat(requested.c_str(), &st) != 0) {
    int err = errno;
    Code code = err == ENOENT || err == ENOTDIR ? Code::kNotFound
                : err == EACCES                 ? Code::kPermissionDenied
                                                : Code::kInvalidArgument;
    trace.plugin = make_error(code, "plugin file " + shown + ": " + std::strerror(err));
    return trace;
  }
  if (!S_ISREG(st.st_mode)) {
    trace.plugin = invalid_argument("plugin path " + shown + " is not a regular file");
    return trace;
  }

  Table& t = table();
  std::lock_guard lock(t.mu);
  const auto key = std::make_pair(st.st_dev, st.st_ino);
  if (auto it = t.by_file.find(key); it != t.by_file.end()) {
    trace.plugin = it->second.plugin;
    trace.failed_step = it->second.failed_step;
    trace.remembered = true;
    return trace;
  }

  auto t0 = Clock::now();
  std::shared_ptr<Plugin> plugin;
  bool mapped = false;  // dlopen succeeded: from then on the outcome is final for this process
  auto open = [&]() -> Status {
    std::error_code ec;
    std::filesystem::path canonical = std::filesystem::canonical(requested, ec);
    if (ec) canonical = std::filesystem::absolute(requested);
    const std::string label = canonical.string();
    PB_RETURN_IF_ERROR(check_elf(canonical));

    // Never dlclose: plugins keep threads and static state that outlive any handle we could track.
    void* handle = ::dlopen(canonical.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* why = ::dlerror();
      return make_error(Code::kFailedPrecondition,
                        "cannot load " + label + ": " + (why ? why : "dlopen failed"));
    }
    mapped = true;
    using GetPjrtApiFn = const PJRT_Api* (*)();
    auto get_api = reinterpret_cast<GetPjrtApiFn>(::dlsym(handle, "GetPjrtApi"));
    if (!get_api)
      return make_error(Code::kFailedPrecondition,
                        label + " does not export GetPjrtApi: it is not a PJRT plugin");
    const PJRT_Api* raw = get_api();
    if (!raw) return make_error(Code::kFailedPrecondition, "GetPjrtApi of " + label + " returned null");
    constexpr size_t kVersionEnd = offsetof(PJRT_Api, pjrt_api_version) + sizeof(PJRT_Api_Version);
    if (raw->struct_size < kVersionEnd)
      return make_error(Code::kFailedPrecondition,
                        label + ": PJRT_Api struct_size " + std::to_string(raw->struct_size) +
                            " is too small to hold its version (needs " + std::to_string(kVersionEnd) + ")");

    plugin.reset(new Plugin());
    plugin->path_ = canonical;
    plugin->api_ = std::make_unique<abi::Api>(raw, label);
    plugin->version_ = {raw->pjrt_api_version.major_version, raw->pjrt_api_version.minor_version};
    return check_version(*plugin->api_, plugin->version_);
  };
  auto initialize = [&]() -> Status {
    const abi::Api& api = *plugin->api_;
    const std::string& label = api.label();
    if (PB_PJRT_HAS(api, PJRT_Plugin_Initialize)) {
      auto init = PB_PJRT_ARGS(PJRT_Plugin_Initialize_Args);
      PB_RETURN_IF_ERROR(annotate(PB_PJRT_CALL(api, PJRT_Plugin_Initialize, init), "initializing " + label));
    }
    if (PB_PJRT_HAS(api, PJRT_Plugin_Attributes)) {
      auto attrs = PB_PJRT_ARGS(PJRT_Plugin_Attributes_Args);
      PB_RETURN_IF_ERROR(annotate(PB_PJRT_CALL(api, PJRT_Plugin_Attributes, attrs),
                                  "reading the attributes of " + label));
      for (size_t i = 0; i < attrs.num_attributes; ++i)
        plugin->attributes_.push_back(copy_named_value(attrs.attributes[i]));
    }
    // The extension chain; bounded, so a corrupt (cyclic) chain cannot hang the loader.
    const PJRT_Extension_Base* ext = api.raw()->extension_start;
    for (int n = 0; ext && n < 64; ++n, ext = ext->next) {
      const int type = abi::enum_value(ext->type);
      plugin->extensions_.push_back({type, ext->struct_size, extension_name(type)});
    }
    return ok();
  };

  if (Status opened = open(); !opened) {
    trace.plugin = std::unexpected(std::move(opened).error());
    trace.failed_step = LoadStep::kLoad;
    trace.load_ms = ms_since(t0);
  } else {
    trace.load_ms = ms_since(t0);
    auto t1 = Clock::now();
    Status initialized = initialize();
    trace.initialize_ms = ms_since(t1);
    if (!initialized) {
      trace.plugin = std::unexpected(std::move(initialized).error());
      trace.failed_step = LoadStep::kInitialize;
    } else {
      trace.plugin = std::shared_ptr<const Plugin>(std::move(plugin));
    }
  }
  if (trace.plugin) t.in_order.push_back(*trace.plugin);
  // A file dlopen could not map (a missing dependency, not an ELF) left nothing behind: it may be tried
  // again once the cause is fixed (e.g. its companion libraries were installed).
  if (mapped) t.by_file.emplace(key, Table::Outcome{trace.plugin, trace.failed_step});
  return trace;
}

Expected<std::shared_ptr<const Plugin>> load_plugin(const std::filesystem::path& path) {
  return load_plugin_traced(path).plugin;
}

std::vector<std::shared_ptr<const Plugin>> loaded_plugins() {
  Table& t = table();
  std::lock_guard lock(t.mu);
  return t.in_order;
}

}  // namespace plugboard
