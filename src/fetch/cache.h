// The content-addressed plugin cache:
//
//   <cache>/plugins/<sha256>/<file name>   each plugin, named by the hash of its bytes
//   <cache>/index/<wheel sha256>.json      what was extracted from a wheel, with the plugin file's
//                                          size and mtime as a stamp (so a reuse needs no rehash)
//   <cache>/wheels/                        wheels pip downloaded
//   <cache>/locks/<key>.lock               flock(2) per entry
//
// Everything is written to a temporary file in the destination folder and renamed into place.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "fetch/file_lock.h"
#include "fetch/wheel.h"

namespace plugboard::fetch {

struct CachedPlugin {
  std::string plugin_path;    // member of the wheel
  std::string plugin_sha256;
  uint64_t size = 0;
  std::filesystem::path file;  // <cache>/plugins/<sha256>/<basename>
};

class Cache {
 public:
  // Creates the folders as needed; errors name the folder.
  static Expected<Cache> open(const std::filesystem::path& root);

  const std::filesystem::path& root() const { return root_; }
  std::filesystem::path plugins_dir() const { return root_ / "plugins"; }
  std::filesystem::path wheels_dir() const { return root_ / "wheels"; }

  // Blocks until <cache>/locks/<key>.lock is held.
  Expected<FileLock> lock(std::string_view key) const;

  // What was extracted from the wheel with this hash, when the plugin file is still there and matches
  // its stamp (size and modification time); nullopt otherwise (the caller extracts again). An index
  // file that is not a regular file, not JSON of the expected shape (wrong types, a duplicate key,
  // nesting) is DATA_LOSS naming it.
  Expected<std::optional<CachedPlugin>> lookup(std::string_view wheel_sha256) const;

  // Moves an extracted plugin (a temporary file in plugins_dir()) to plugins/<sha256>/<basename> and
  // records it as what the wheel `wheel_sha256` holds.
  Expected<CachedPlugin> store(ExtractedMember plugin, std::string_view plugin_path, std::string_view wheel_sha256) const;

 private:
  explicit Cache(std::filesystem::path root) : root_(std::move(root)) {}
  std::filesystem::path index_file(std::string_view wheel_sha256) const;

  std::filesystem::path root_;
};

}  // namespace plugboard::fetch
