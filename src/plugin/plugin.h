// One loaded PJRT plugin: the library, its API table, its negotiated version, attributes and
// extensions. Loaded once per file (by device and inode), initialized once, never unloaded.
//
// This header does not include the PJRT C API: the CLI and bindings use it to list plugins.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/regular_file.h"
#include "base/semver.h"
#include "base/status.h"

extern "C" struct PJRT_ExecuteContext;  // the PJRT header's opaque type, declared without it

namespace plugboard {

namespace abi {
class Api;
}

struct PjrtVersion {
  int major = 0, minor = 0;
  auto operator<=>(const PjrtVersion&) const = default;
  std::string to_string() const { return std::to_string(major) + "." + std::to_string(minor); }
};

// The PJRT versions plugboard loads: major 0, minor from kMinPjrtMinor up. The header it is built
// against is 0.81; older tables are still driven safely because every call is guarded by the
// table's struct_size (see abi/api.h).
inline constexpr int kPjrtMajor = 0;
inline constexpr int kMinPjrtMinor = 40;

// A PJRT NamedValue as a value: string, int64, int64 list, float or bool.
using NamedValueData = std::variant<std::string, int64_t, std::vector<int64_t>, float, bool>;
struct NamedValue {
  std::string name;
  NamedValueData value;
};
std::string named_value_to_string(const NamedValueData& v);

struct ExtensionInfo {
  int type = 0;            // PJRT_Extension_Type
  size_t struct_size = 0;  // as the plugin reports it: extensions grow between versions
  std::string name;        // "FFI", "Layouts", ... ("type N" for one plugboard does not know)
};

struct LoadTrace;

class Plugin {
 public:
  ~Plugin();
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

  // The path it was first loaded from, made absolute and canonical.
  const std::filesystem::path& path() const { return path_; }
  // The file as it was when loaded (device, inode, size, mtime, ctime): the library in memory is
  // that file's content, whatever the path holds later.
  const FileIdentity& file_identity() const { return identity_; }
  PjrtVersion version() const { return version_; }
  const std::vector<NamedValue>& attributes() const { return attributes_; }
  const NamedValue* attribute(std::string_view name) const;
  std::optional<std::string> string_attribute(std::string_view name) const;
  std::optional<int64_t> int_attribute(std::string_view name) const;
  // stablehlo_current_version / stablehlo_minimum_version, which plugins report as int64 lists.
  std::optional<SemVer> stablehlo_current_version() const;
  std::optional<SemVer> stablehlo_minimum_version() const;

  const std::vector<ExtensionInfo>& extensions() const { return extensions_; }
  const ExtensionInfo* extension(int type) const;

  // Once FFI handlers that read per-execution data are registered in this plugin (host callbacks),
  // every execution must carry an execute context: some plugins crash looking data up in a missing
  // one. The runtime then passes an empty context when the caller gives none.
  void require_execute_context() const { needs_execute_context_.store(true, std::memory_order_relaxed); }
  bool needs_execute_context() const { return needs_execute_context_.load(std::memory_order_relaxed); }
  // The empty execute context those executions share: made by the runtime on first use
  // (Client::empty_execute_context) and kept, like the plugin, for the life of the process (an
  // execution dropped unfinished may still be using it). Null until then.
  PJRT_ExecuteContext* shared_empty_context() const { return shared_empty_context_.load(std::memory_order_acquire); }
  // Installs `context` unless another thread installed one first; returns the one in use (when it is
  // not `context`, the caller destroys its own).
  PJRT_ExecuteContext* install_shared_empty_context(PJRT_ExecuteContext* context) const {
    PJRT_ExecuteContext* expected = nullptr;
    return shared_empty_context_.compare_exchange_strong(expected, context, std::memory_order_acq_rel) ? context : expected;
  }

  // The guarded function table; only the layers below the public API include abi/api.h.
  const abi::Api& api() const { return *api_; }

 private:
  friend LoadTrace load_plugin_traced(const std::filesystem::path& path);
  Plugin() = default;

  std::filesystem::path path_;
  FileIdentity identity_;
  std::unique_ptr<abi::Api> api_;
  PjrtVersion version_;
  std::vector<NamedValue> attributes_;
  std::vector<ExtensionInfo> extensions_;
  mutable std::atomic<bool> needs_execute_context_{false};
  mutable std::atomic<PJRT_ExecuteContext*> shared_empty_context_{nullptr};
};

// Loads (or returns the already-loaded) plugin at `path`: the checks of plugin/native_library.h (a
// regular file; an ELF shared library for this machine whose segments and sections lie inside it; the
// file verified in this process, when it was), dlopen with RTLD_NOW | RTLD_LOCAL, GetPjrtApi, version
// check, PJRT_Plugin_Initialize, attributes, extensions, every pointer and count the plugin hands back
// checked. The outcome, success or failure, is remembered per file once dlopen mapped it: the same file
// is never initialized twice (a file dlopen refused, e.g. for a missing dependency, is tried again on
// the next call). Thread-safe: the first caller for a file loads it holding a lock of that file only,
// so a plugin whose initialization hangs does not hold up the loading of any other.
// Errors name the path: NOT_FOUND (no such file), INVALID_ARGUMENT (not a regular file, not an ELF
// shared library, or one truncated or corrupt), DATA_LOSS (the file changed between verification and
// load), FAILED_PRECONDITION (dlopen failed, with dlerror; no GetPjrtApi; null API; unsupported
// version), INTERNAL (the plugin handed back a null list with a count, ...), or the plugin's own error
// from PJRT_Plugin_Initialize.
Expected<std::shared_ptr<const Plugin>> load_plugin(const std::filesystem::path& path) noexcept;

// The same load, traced for the selection report: which step failed, and how long each step took.
enum class LoadStep { kLoad, kInitialize };  // dlopen..version check | Initialize, attributes, extensions
struct LoadTrace {
  Expected<std::shared_ptr<const Plugin>> plugin = make_error(Code::kInternal, "not attempted");
  LoadStep failed_step = LoadStep::kLoad;  // meaningful when !plugin
  double load_ms = 0, initialize_ms = 0;   // 0 when the outcome came from an earlier attempt
  bool remembered = false;                 // the file was tried before in this process
};
LoadTrace load_plugin_traced(const std::filesystem::path& path);

// Every plugin loaded successfully so far in this process, in load order.
std::vector<std::shared_ptr<const Plugin>> loaded_plugins();

}  // namespace plugboard
