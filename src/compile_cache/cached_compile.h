// Compilation through the compile caches: a program's executable comes from the first of
//   1. the precompiled programs of the bundle the client was booted from (read-only; each file held
//      to the size and sha256 its manifest gives),
//   2. the persistent cache (disk_cache.h),
//   3. the plugin's compiler, whose executable is then stored in the persistent cache.
// Every entry is found by its key (cache_key.h), so one made for another plugin build, other
// options or another program is never used. An entry that cannot be used (tampered, corrupt,
// truncated, foreign, or refused by the plugin) is reported in the outcome's notes and the program
// is compiled as usual: never a crash, never a wrong program.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "compile_cache/cache_key.h"
#include "compile_cache/disk_cache.h"
#include "compile_cache/entry.h"
#include "runtime/client.h"

namespace plugboard::compile_cache {

// A precompiled program in a bundle: "<key>.pbx" and what its manifest says of it.
struct PrecompiledFile {
  std::filesystem::path path;
  uint64_t size = 0;
  std::string sha256;
};

// The entry in a bundle's file (named <key>.pbx), held to its manifest's size and sha256: DATA_LOSS
// naming the file when it was changed, and decode_entry's errors.
Expected<Entry> read_precompiled(const PrecompiledFile& file) noexcept;

struct CompileSources {
  std::vector<PrecompiledFile> precompiled;
  std::optional<DiskCache> cache;  // none: the persistent cache is off
};

// The entry for a compiled program: its key, the metadata every entry carries (program, plugin,
// platform, device kinds, created) and, when known, the executable's description.
Entry make_entry(const std::string& key, const Target& target, const std::string& program, const std::string& plugin,
                 std::string payload, const std::optional<Description>& description);

// The sources a compilation uses by default: `precompiled` (the booted bundle target's) and the
// persistent cache as the environment sets it (disk_cache.h: settings_from_environment).
Expected<CompileSources> default_sources(std::vector<PrecompiledFile> precompiled = {}) noexcept;

enum class Origin { kCompiled, kCompileCache, kPrecompiled };
// "compiled in 33.1 ms", "compile-cache hit (loaded in 1.21 ms)", "precompiled in the bundle (loaded in 1.21 ms)"
std::string describe(Origin origin, double ms);
// "compiled", "compile_cache", "precompiled": the origin as reports (JSON, Elixir atoms) name it.
const char* origin_id(Origin origin);

struct CompileOutcome {
  std::shared_ptr<Executable> executable;
  Origin origin = Origin::kCompiled;
  double ms = 0;                   // compiling, or loading the entry (reading and checking it included)
  std::string key;                 // empty when the client could not be identified
  std::filesystem::path entry;     // the entry loaded, or the one stored
  std::vector<std::string> notes;  // entries refused on the way; an executable that could not be stored
};

Expected<CompileOutcome> compile(const Client& client, const Program& program, const CompileOptions& options,
                                 const CompileSources& sources) noexcept;

}  // namespace plugboard::compile_cache
