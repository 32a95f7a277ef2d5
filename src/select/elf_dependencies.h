// Which shared libraries a plugin needs, and where the dynamic loader would find them, without
// loading it: the "dependencies resolvable" stage of selection. A missing ROCm or CUDA runtime library
// is then named before dlopen, all at once, instead of one dlerror at a time.
//
// Resolution follows glibc's order for each object: its DT_RPATH (only when it has no DT_RUNPATH),
// LD_LIBRARY_PATH, its DT_RUNPATH, the folders listed in /etc/ld.so.conf (with its includes; the
// folders ld.so.cache is built from), then the default folders. $ORIGIN, $LIB and $PLATFORM are
// substituted. Dependencies of dependencies are resolved too, each through its own paths.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace plugboard::select {

// The dynamic section of one ELF file: DT_NEEDED names, DT_RPATH and DT_RUNPATH (split on ':').
struct ElfDynamicInfo {
  std::vector<std::string> needed;
  std::vector<std::string> rpath;
  std::vector<std::string> runpath;
  bool has_runpath = false;
};

// Reads the dynamic section of a 64-bit little-endian ELF file (only the headers and the dynamic
// string table are read, not the whole file). Errors name the file and what is malformed.
Expected<ElfDynamicInfo> read_elf_dynamic_info(const std::filesystem::path& path);

struct Dependency {
  std::string name;                           // as DT_NEEDED says, e.g. "librocprofiler-sdk.so.1"
  std::string needed_by;                      // the file that needs it
  std::optional<std::filesystem::path> path;  // where the loader would find it; nullopt: missing
};

struct DependencyReport {
  std::vector<Dependency> dependencies;  // every library reached, in breadth-first order
  std::vector<const Dependency*> missing() const;
  // "librocprofiler-sdk.so.1 (needed by xla_rocm_plugin.so), libamdhip64.so.7 (...)"
  std::string missing_summary() const;
};

struct ResolveOptions {
  std::string ld_library_path;                   // as the environment variable; "" for none
  std::filesystem::path ld_so_conf = "/etc/ld.so.conf";
  std::vector<std::filesystem::path> default_dirs = {"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
                                                     "/lib64", "/usr/lib64", "/lib", "/usr/lib"};
  size_t max_libraries = 512;  // a bound, so a cyclic or huge graph cannot run away
};

// Resolves the dependencies of `path` as the dynamic loader would. Fails only when `path` itself
// cannot be read as an ELF file; a dependency that cannot be found or read is reported, not an error.
Expected<DependencyReport> resolve_dependencies(const std::filesystem::path& path, const ResolveOptions& options = {});

// Where the loader would find `soname` through LD_LIBRARY_PATH and the system's folders alone (no
// RPATH of any object): how a driver library such as libcuda.so.1 is found. nullopt: nowhere.
std::optional<std::filesystem::path> find_system_library(const std::string& soname, const ResolveOptions& options = {});

}  // namespace plugboard::select
