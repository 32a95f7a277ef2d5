// What identifies a plugin build for the compile cache: the sha256 of its file. An executable
// serialized by one build is only ever loaded by that same build.
#pragma once

#include <filesystem>
#include <string>

#include "base/regular_file.h"
#include "base/status.h"
#include "plugin/plugin.h"

namespace plugboard::compile_cache {

// The sha256 of the plugin's file, cheapest source first: what verification hashed in this process
// (a bundle's manifest), this process's earlier answer, a stamp (base/hash_stamp.h) that records the
// file's current identity, and only then a hash of the file (remembered in a stamp). Each source is
// used only while the file still has the identity it had when hashed.
Expected<std::string> plugin_sha256(const Plugin& plugin) noexcept;

// A file's sha256 and the identity of the bytes hashed (both read through one descriptor): DATA_LOSS
// when the contents changed meanwhile (size or mtime); a ctime that moved alone does not count.
struct HashedFile {
  FileIdentity identity;
  std::string sha256;
};
Expected<HashedFile> hash_file(const std::filesystem::path& path);

}  // namespace plugboard::compile_cache
