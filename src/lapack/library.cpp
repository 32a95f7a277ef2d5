#include "lapack/library.h"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>

#include "base/terminal_text.h"

namespace plugboard::lapack {

namespace {

constexpr char kSystemName[] = "liblapack.so.3";
constexpr char kVariable[] = "PLUGBOARD_LAPACK";

std::atomic<bool> g_ignore_environment{false};

struct Library {
  Functions functions;
  std::string file;  // what the loader opened (RTLD_DI_LINKMAP), or the name asked for
};

std::string environment_value() {
  const char* env = std::getenv(kVariable);
  return env ? env : "";
}

// Where LAPACK is taken from: PLUGBOARD_LAPACK when read and set, else the loader's liblapack.so.3.
std::string requested(bool use_environment) {
  std::string env = use_environment ? environment_value() : "";
  return env.empty() ? kSystemName : env;
}

Expected<const Library*> open_library(bool use_environment) {
  const std::string path = requested(use_environment);
  // Never closed: handlers registered in plugins point into it for the life of the process.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    return make_error(Code::kNotFound, "LAPACK (" + path + ") cannot be opened: " + (why ? why : "unknown reason") +
                                           " (Debian: apt-get install liblapack3; or set PLUGBOARD_LAPACK to a "
                                           "LAPACK shared library)");
  }
  auto library = std::make_unique<Library>(Library{{}, path});
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name) {
    std::error_code ec;  // the file itself, past the links (Debian's alternatives) the loader went through
    std::filesystem::path file = std::filesystem::canonical(map->l_name, ec);
    library->file = ec ? std::string(map->l_name) : file.string();
  }
  Functions& table = library->functions;
  std::string missing;
  auto find = [&](auto*& fn, const char* symbol) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, symbol));
    if (!fn) missing += (missing.empty() ? "" : ", ") + std::string(symbol);
  };
  find(table.ssyevd, "ssyevd_");
  find(table.dsyevd, "dsyevd_");
  find(table.sgesdd, "sgesdd_");
  find(table.dgesdd, "dgesdd_");
  if (!missing.empty()) return make_error(Code::kNotFound, "LAPACK (" + path + ") has no " + missing);
  return library.release();  // for the life of the process, as the handle
}

// One outcome per source, each opened at its first use (never by describe()).
struct Source {
  std::once_flag once;
  std::optional<Expected<const Library*>> outcome;
  std::atomic<bool> opened{false};  // outcome is set
};

Source& source(bool use_environment) {
  static Source from_environment, from_system;
  return use_environment ? from_environment : from_system;
}

const Expected<const Library*>& library(bool use_environment) {
  Source& s = source(use_environment);
  std::call_once(s.once, [&] {
    s.outcome.emplace(open_library(use_environment));
    s.opened.store(true, std::memory_order_release);
  });
  return *s.outcome;
}

// The outcome if that source was opened already, else null (nothing is opened here).
const Expected<const Library*>* if_opened(bool use_environment) {
  Source& s = source(use_environment);
  return s.opened.load(std::memory_order_acquire) ? &*s.outcome : nullptr;
}

bool environment_read() { return !g_ignore_environment.load(std::memory_order_acquire); }

}  // namespace

Expected<const Functions*> functions() {
  const Expected<const Library*>& lib = library(environment_read());
  if (!lib) return std::unexpected(lib.error());
  return &(*lib)->functions;
}

void ignore_environment() noexcept { g_ignore_environment.store(true, std::memory_order_release); }

std::string describe() noexcept {
  try {
    const bool use_environment = environment_read();
    const std::string env = environment_value();
    std::string why;
    if (use_environment && !env.empty()) why = std::string("from ") + kVariable;
    else why = std::string(kSystemName) + " on the loader's path";
    if (!use_environment && !env.empty())
      why += std::string("; ") + kVariable + "=" + terminal_safe(env) + " not read: use_environment is false";
    const Expected<const Library*>* lib = if_opened(use_environment);
    // Not opened yet: named as it will be opened, at the first LAPACK call (a boot loads nothing).
    if (!lib) return "LAPACK: " + terminal_safe(requested(use_environment)) + ", opened at its first use (" + why + ")";
    if (!*lib) return "LAPACK: none (" + why + "): " + terminal_safe(lib->error().message());
    return "LAPACK: " + terminal_safe((**lib)->file) + " (" + why + ")";
  } catch (...) {
    return "LAPACK: not described (out of memory)";
  }
}

}  // namespace plugboard::lapack
