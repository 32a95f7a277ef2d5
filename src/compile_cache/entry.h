// One compiled program as a file: the same format in the persistent cache and in a bundle.
//
//   offset  size  field
//        0     8  magic "PBXCACHE"
//        8     4  format version (little-endian u32, kFormatVersion)
//       12    32  the key (its 64 hex digits, as raw bytes)
//       44     4  metadata size M (u32)
//       48     8  payload size P (u64)
//       56    32  sha256 of metadata + payload
//       88     M  metadata: "name=value\n" lines (program, plugin, platform, created)
//     88+M     P  payload: the plugin's serialized executable
//
// Reading checks everything before a byte reaches the plugin: magic, version, that the entry is the
// one asked for (a file copied or renamed under another key is "foreign"), the sizes against the file
// (truncated, or trailing bytes), and the checksum (corrupt).
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "base/status.h"

namespace plugboard::compile_cache {

inline constexpr size_t kEntryHeaderBytes = 88;
// No entry file is larger (a GPU executable is tens of MiB), no metadata section either.
inline constexpr size_t kMaxEntryBytes = size_t{4} << 30;
inline constexpr size_t kMaxMetadataBytes = size_t{64} << 10;

struct Entry {
  std::string key;  // 64 hex digits
  std::map<std::string, std::string> metadata;
  std::string payload;
};

// INVALID_ARGUMENT when the metadata is over kMaxMetadataBytes (decode_entry would refuse it).
Expected<std::string> encode_entry(const Entry& entry);

// The entry in `bytes` (a file's whole content; `where` names it in messages), which must be the one
// for `expected_key` (empty: any key). DATA_LOSS for a truncated, corrupt or foreign entry,
// FAILED_PRECONDITION for another format version, INVALID_ARGUMENT for what is not an entry at all.
Expected<Entry> decode_entry(std::string_view bytes, std::string_view expected_key, const std::string& where);

}  // namespace plugboard::compile_cache
