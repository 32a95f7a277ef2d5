#include "plugin/plugin.h"

#include <dlfcn.h>

#include <map>
#include <mutex>

#include "base/clock.h"
#include "base/no_throw.h"
#include "abi/api.h"
#include "plugin/native_library.h"
#include "plugin/plugin_output.h"

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

// Copies a PJRT NamedValue into an owned value, checking every pointer against its size first.
// Unknown value types are kept as a string saying so.
Expected<NamedValue> copy_named_value(const abi::Api& api, const PJRT_NamedValue& v, size_t index) {
  constexpr std::string_view kFn = "PJRT_Plugin_Attributes";
  const std::string at = "attribute " + std::to_string(index);
  NamedValue out;
  PB_ASSIGN_OR_RETURN(std::string_view name, plugin_output::string(api, kFn, at + " name", v.name, v.name_size));
  out.name.assign(name);
  switch (abi::enum_value(v.type)) {
    case PJRT_NamedValue_kString: {
      PB_ASSIGN_OR_RETURN(std::string_view value,
                          plugin_output::string(api, kFn, at + " (" + out.name + ") string value", v.string_value, v.value_size));
      out.value = std::string(value);
      break;
    }
    case PJRT_NamedValue_kInt64: out.value = v.int64_value; break;
    case PJRT_NamedValue_kInt64List: {
      PB_ASSIGN_OR_RETURN(std::span<const int64_t> list,
                          plugin_output::list(api, kFn, at + " (" + out.name + ") int64 list", v.int64_array_value, v.value_size));
      out.value = std::vector<int64_t>(list.begin(), list.end());
      break;
    }
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

// One file's load: the first caller dlopens and initializes it holding only this entry's mutex, so a
// plugin whose PJRT_Plugin_Initialize hangs blocks the loads of that file and of no other.
struct Entry {
  std::mutex mu;
  bool final = false;  // dlopen mapped the file: the outcome below is this process's answer for it
  Expected<std::shared_ptr<const Plugin>> plugin = make_error(Code::kInternal, "not loaded yet");
  LoadStep failed_step = LoadStep::kLoad;
};

struct Table {
  std::mutex mu;  // guards the two containers only; never held across dlopen or a plugin call
  // Keyed by (device, inode): the same file reached through two paths is one plugin.
  std::map<std::pair<uint64_t, uint64_t>, std::shared_ptr<Entry>> by_file;
  // By dlopen handle: dlopen matches an already-loaded path by name, so a file replaced at the same
  // path (another inode) gets the library already mapped; it is that library's plugin, never a second
  // initialization of it.
  std::map<void*, std::shared_ptr<Entry>> by_handle;
  std::vector<std::shared_ptr<const Plugin>> in_order;
};

Table& table() {
  static Table* t = new Table();  // immortal, like the plugins it holds
  return *t;
}

// The entry of the file with this identity, made on first sight.
std::shared_ptr<Entry> entry_for(const FileIdentity& id) {
  Table& t = table();
  std::lock_guard lock(t.mu);
  auto& slot = t.by_file[std::make_pair(id.device, id.inode)];
  if (!slot) slot = std::make_shared<Entry>();
  return slot;
}

// Records that `entry` loaded `handle`; returns the entry that loaded it first when another did.
std::shared_ptr<Entry> register_handle(void* handle, const std::shared_ptr<Entry>& entry) {
  Table& t = table();
  std::lock_guard lock(t.mu);
  auto [it, inserted] = t.by_handle.emplace(handle, entry);
  return !inserted && it->second != entry ? it->second : nullptr;
}

void remember_loaded(const std::shared_ptr<const Plugin>& plugin) {
  Table& t = table();
  std::lock_guard lock(t.mu);
  t.in_order.push_back(plugin);
}

// Once mapped, the library's constructors have run and dlopen would return the same handle: the
// outcome is final on every way out, an exception included, so that no later load initializes it
// a second time (or runs a library that was refused after it was mapped).
struct FinalOnExit {
  Entry& entry;
  const bool& mapped;
  ~FinalOnExit() {
    if (mapped && !entry.final) {
      entry.final = true;
      entry.plugin = make_error(Code::kInternal, "loading this plugin was interrupted; it is not tried again");
      entry.failed_step = LoadStep::kLoad;
    }
  }
};

// The trace of a load that an entry had already decided.
LoadTrace remembered_trace(const Entry& entry) {
  LoadTrace trace;
  trace.plugin = entry.plugin;
  trace.failed_step = entry.failed_step;
  trace.remembered = true;
  return trace;
}

LoadTrace failed_trace(Error error, LoadStep step) {
  LoadTrace trace;
  trace.plugin = std::unexpected(std::move(error));
  trace.failed_step = step;
  return trace;
}

// The PJRT_Api a mapped library's GetPjrtApi returns, large enough to hold its version.
Expected<const PJRT_Api*> get_pjrt_api(void* handle, const std::string& label) {
  using GetPjrtApiFn = const PJRT_Api* (*)();
  auto get_api = reinterpret_cast<GetPjrtApiFn>(::dlsym(handle, "GetPjrtApi"));
  if (!get_api)
    return make_error(Code::kFailedPrecondition, label + " does not export GetPjrtApi: it is not a PJRT plugin");
  const PJRT_Api* raw = get_api();
  if (!raw) return make_error(Code::kFailedPrecondition, "GetPjrtApi of " + label + " returned null");
  constexpr size_t kVersionEnd = offsetof(PJRT_Api, pjrt_api_version) + sizeof(PJRT_Api_Version);
  if (raw->struct_size < kVersionEnd)
    return make_error(Code::kFailedPrecondition,
                      label + ": PJRT_Api struct_size " + std::to_string(raw->struct_size) +
                          " is too small to hold its version (needs " + std::to_string(kVersionEnd) + ")");
  return raw;
}

Status call_plugin_initialize(const abi::Api& api) {
  if (!PB_PJRT_HAS(api, PJRT_Plugin_Initialize)) return ok();
  auto init = PB_PJRT_ARGS(PJRT_Plugin_Initialize_Args);
  return annotate(PB_PJRT_CALL(api, PJRT_Plugin_Initialize, init), "initializing " + api.label());
}

// PJRT_Plugin_Attributes, copied out of the plugin's memory (none when the plugin lacks the call).
Expected<std::vector<NamedValue>> read_attributes(const abi::Api& api) {
  std::vector<NamedValue> out;
  if (!PB_PJRT_HAS(api, PJRT_Plugin_Attributes)) return out;
  const std::string doing = "reading the attributes of " + api.label();
  auto attrs = PB_PJRT_ARGS(PJRT_Plugin_Attributes_Args);
  PB_RETURN_IF_ERROR(annotate(PB_PJRT_CALL(api, PJRT_Plugin_Attributes, attrs), doing));
  PB_ASSIGN_OR_RETURN(std::span<const PJRT_NamedValue> list,
                      annotate(plugin_output::list(api, "PJRT_Plugin_Attributes", "attributes", attrs.attributes,
                                                   attrs.num_attributes),
                               doing));
  for (size_t i = 0; i < list.size(); ++i) {
    PB_ASSIGN_OR_RETURN(NamedValue v, annotate(copy_named_value(api, list[i], i), doing));
    out.push_back(std::move(v));
  }
  return out;
}

// The extension chain; bounded, so a corrupt (cyclic) chain cannot hang the loader.
Expected<std::vector<ExtensionInfo>> read_extensions(const abi::Api& api) {
  std::vector<ExtensionInfo> out;
  const PJRT_Extension_Base* ext = api.raw()->extension_start;
  for (int n = 0; ext && n < 64; ++n, ext = ext->next) {
    if (ext->struct_size < sizeof(PJRT_Extension_Base))
      return std::unexpected(plugin_output::bad_output(
          api, "GetPjrtApi", "extension " + std::to_string(n) + " with struct_size " + std::to_string(ext->struct_size) +
                                 " (smaller than PJRT_Extension_Base)"));
    const int type = abi::enum_value(ext->type);
    out.push_back({type, ext->struct_size, extension_name(type)});
  }
  return out;
}

}  // namespace

LoadTrace load_plugin_traced(const std::filesystem::path& requested) {
  const auto t0 = Clock::now();
  // Before dlopen: a regular file, a well-formed ELF shared library for this machine lying wholly
  // inside the file, and (when verified in this process) the very file that was hashed.
  auto inspected = inspect_library(requested, "plugin");
  if (!inspected) {
    LoadTrace trace = failed_trace(std::move(inspected).error(), LoadStep::kLoad);
    trace.load_ms = ms_since(t0);
    return trace;
  }
  const InspectedLibrary& lib = *inspected;

  const std::shared_ptr<Entry> entry = entry_for(lib.identity);
  std::lock_guard once(entry->mu);
  if (entry->final) return remembered_trace(*entry);

  std::shared_ptr<Plugin> plugin;
  bool mapped = false;  // dlopen succeeded: from then on the outcome is final for this process
  std::shared_ptr<Entry> same_library;  // set when dlopen returned a library another entry loaded
  FinalOnExit final_on_exit{*entry, mapped};
  auto open = [&]() -> Status {
    // Never dlclose: plugins keep threads and static state that outlive any handle we could track.
    PB_ASSIGN_OR_RETURN(void* handle, dlopen_inspected_library(lib));
    mapped = true;
    same_library = register_handle(handle, entry);
    // Refused after mapping (the file changed between verification and load): final, never retried.
    PB_RETURN_IF_ERROR(check_loaded_identity(lib, "plugin"));
    if (same_library) return ok();
    const std::string label = lib.canonical.string();
    PB_ASSIGN_OR_RETURN(const PJRT_Api* raw, get_pjrt_api(handle, label));
    plugin.reset(new Plugin());
    plugin->path_ = lib.canonical;
    plugin->identity_ = lib.identity;
    plugin->api_ = std::make_unique<abi::Api>(raw, label);
    plugin->version_ = {raw->pjrt_api_version.major_version, raw->pjrt_api_version.minor_version};
    return check_version(*plugin->api_, plugin->version_);
  };
  auto initialize = [&]() -> Status {
    PB_RETURN_IF_ERROR(call_plugin_initialize(*plugin->api_));
    PB_ASSIGN_OR_RETURN(plugin->attributes_, read_attributes(*plugin->api_));
    PB_ASSIGN_OR_RETURN(plugin->extensions_, read_extensions(*plugin->api_));
    return ok();
  };

  LoadTrace trace;
  Status opened = open();
  if (opened && same_library) {
    // The library is another entry's: its outcome, once that entry's first load is done. (That
    // entry's loader never waits for this one: it registered the handle first.)
    std::lock_guard other(same_library->mu);
    entry->final = true;
    entry->plugin = same_library->plugin;
    entry->failed_step = same_library->failed_step;
    trace = remembered_trace(*entry);
    trace.load_ms = ms_since(t0);
    return trace;
  }
  if (!opened) {
    trace = failed_trace(std::move(opened).error(), LoadStep::kLoad);
    trace.load_ms = ms_since(t0);
  } else {
    trace.load_ms = ms_since(t0);
    const auto t1 = Clock::now();
    Status initialized = initialize();
    trace.initialize_ms = ms_since(t1);
    if (!initialized) {
      trace.plugin = std::unexpected(std::move(initialized).error());
      trace.failed_step = LoadStep::kInitialize;
    } else {
      trace.plugin = std::shared_ptr<const Plugin>(std::move(plugin));
    }
  }
  if (trace.plugin) remember_loaded(*trace.plugin);
  // A file dlopen could not map (a missing dependency, not an ELF) left nothing behind: it may be tried
  // again once the cause is fixed (e.g. its companion libraries were installed). A mapped one is final.
  if (mapped) {
    entry->final = true;
    entry->plugin = trace.plugin;
    entry->failed_step = trace.failed_step;
  }
  return trace;
}

Expected<std::shared_ptr<const Plugin>> load_plugin(const std::filesystem::path& path) noexcept {
  return no_throw("loading plugin", [&]() -> Expected<std::shared_ptr<const Plugin>> {
    return load_plugin_traced(path).plugin;
  });
}

std::vector<std::shared_ptr<const Plugin>> loaded_plugins() {
  Table& t = table();
  std::lock_guard lock(t.mu);
  return t.in_order;
}

}  // namespace plugboard
