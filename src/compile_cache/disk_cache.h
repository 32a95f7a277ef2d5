// The persistent compile cache: one entry file per key (entry.h) under a folder, by default
// $XDG_CACHE_HOME/plugboard/compiled/. Entries appear whole or not at all (written to a temporary
// file, synced and renamed into place), so any number of threads and processes may find and store
// at once: two that compile the same program both succeed and leave one valid entry. The folder is
// kept under a size limit by removing the least recently used entries (a hit refreshes the entry's
// mtime); a corrupt, truncated or foreign entry is removed when found, and the reason handed back.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "compile_cache/entry.h"

namespace plugboard::compile_cache {

inline constexpr uint64_t kDefaultMaxBytes = uint64_t{2} << 30;  // 2 GiB

struct DiskCacheSettings {
  bool enabled = true;
  std::filesystem::path dir;
  uint64_t max_bytes = kDefaultMaxBytes;
};

// From the environment: PLUGBOARD_COMPILE_CACHE=off|0 turns the cache off (on|1: on, the default);
// PLUGBOARD_COMPILE_CACHE_DIR sets the folder; PLUGBOARD_COMPILE_CACHE_MAX_MB the limit in MiB.
// A value that does not parse is an error naming the variable.
Expected<DiskCacheSettings> settings_from_environment() noexcept;

struct CacheStats {
  std::filesystem::path dir;
  uint64_t entries = 0, bytes = 0, max_bytes = 0;
};

// What verify found of one entry.
struct EntryCheck {
  std::filesystem::path path;
  Status status;  // ok, or why the entry cannot be used
  std::string program;  // from its metadata, when readable
};

class DiskCache {
 public:
  explicit DiskCache(std::filesystem::path dir, uint64_t max_bytes = kDefaultMaxBytes)
      : dir_(std::move(dir)), max_bytes_(max_bytes) {}

  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path entry_path(const std::string& key) const;

  struct Found {
    std::optional<Entry> entry;          // a valid entry for the key
    // Why the cache could not be used: an entry was there but unusable (it was removed, and is
    // replaced when the program is compiled), or the folder is not trusted.
    std::optional<std::string> problem;
  };
  Found find(const std::string& key) const noexcept;

  // Writes the entry (atomically), then evicts the least recently used entries beyond the limit.
  Status store(const Entry& entry) const noexcept;
  // Removes the entry for `key`, if any (an entry the plugin refused to load).
  void remove(const std::string& key) const noexcept;

  Expected<CacheStats> stats() const noexcept;
  // Removes every entry; the number removed.
  Expected<uint64_t> clear() const noexcept;
  // Reads and checks every entry (checksum, sizes, key against its file name).
  Expected<std::vector<EntryCheck>> verify() const noexcept;

 private:
  struct Listed {
    std::filesystem::path path;
    uint64_t size = 0;
    std::filesystem::file_time_type used;
  };
  std::vector<Listed> list() const;
  void evict() const;

  std::filesystem::path dir_;
  uint64_t max_bytes_;
};

}  // namespace plugboard::compile_cache
