#include "base/hash_stamp.h"

#include <sstream>

#include "base/atomic_file.h"
#include "base/cache_home.h"
#include "base/sha256.h"

namespace plugboard {
namespace {

// Every part of the identity, ctime included, then the sha256 and the path.
std::string stamp_line(const FileIdentity& id, const std::filesystem::path& path, const std::string& sha) {
  std::ostringstream s;
  s << "plugboard-stamp 2 " << id.size << ' ' << id.mtime_ns << ' ' << id.ctime_ns << ' ' << id.inode << ' '
    << id.device << ' ' << sha << ' ' << path.string() << '\n';
  return s.str();
}

std::filesystem::path stamp_path(const std::filesystem::path& dir, const std::filesystem::path& file) {
  const std::string key = file.string();
  return dir / (sha256_hex(std::as_bytes(std::span(key.data(), key.size()))).substr(0, 32) + ".stamp");
}

}  // namespace

std::filesystem::path default_stamp_dir() { return plugboard_cache_home() / "stamps"; }

std::optional<std::string> stamped_sha256(const std::filesystem::path& stamp_dir, const std::filesystem::path& file,
                                          const FileIdentity& identity) {
  if (stamp_dir.empty()) return std::nullopt;
  // A stamp is small; anything unreadable, not a regular file or too large counts as no stamp.
  auto text = read_regular_file(stamp_path(stamp_dir, file), 64 << 10, OpenOptions{.no_follow = true});
  if (!text) return std::nullopt;
  // The line is rebuilt around the sha256 it holds: every other field must be exactly this file's.
  const std::string before = stamp_line(identity, file, "");
  const size_t sha_at = before.find("  ");  // where the empty sha256 left two blanks
  if (sha_at == std::string::npos || text->size() != before.size() + 64) return std::nullopt;
  const std::string sha = text->substr(sha_at + 1, 64);
  if (!is_sha256_hex(sha) || *text != stamp_line(identity, file, sha)) return std::nullopt;
  return sha;
}

void write_hash_stamp(const std::filesystem::path& stamp_dir, const std::filesystem::path& file,
                      const FileIdentity& identity, const std::string& sha256) {
  if (stamp_dir.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(stamp_dir, ec);
  (void)write_file_atomically(stamp_path(stamp_dir, file), stamp_line(identity, file, sha256), 0644);
}

}  // namespace plugboard
