#include "compile_cache/disk_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "base/atomic_file.h"
#include "base/cache_home.h"
#include "base/environment.h"
#include "base/no_throw.h"
#include "base/parse_number.h"
#include "base/regular_file.h"
#include "base/sha256.h"

namespace plugboard::compile_cache {
namespace {

constexpr const char* kSuffix = ".pbx";

// A temporary file a writer left (".<key>.pbx.tmp-XXXXXX"), removed once it is an hour old.
bool stale_temporary(const std::filesystem::directory_entry& e) {
  const std::string name = e.path().filename().string();
  if (!name.starts_with(".") || name.find(".pbx.tmp-") == std::string::npos) return false;
  std::error_code ec;
  const auto age = std::filesystem::file_time_type::clock::now() - e.last_write_time(ec);
  return !ec && age > std::chrono::hours(1);
}

// Entries are machine code the plugin will run: the folder must be this user's and writable by
// nobody else (a shared /tmp folder would let another user plant one).
Status check_trusted(const std::filesystem::path& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return ok();  // not made yet: store() makes it, 0700
  if (!S_ISDIR(st.st_mode))
    return make_error(Code::kFailedPrecondition, "compile cache " + dir.string() + " is not a directory");
  if (st.st_uid != ::geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return make_error(Code::kPermissionDenied, "compile cache " + dir.string() +
                                                   " is not this user's or is writable by others: not used");
  return ok();
}

// The key a file name claims ("<64 hex>.pbx"), or "" for a file that is not an entry's.
std::string key_of_name(const std::filesystem::path& p) {
  const std::string name = p.filename().string();
  if (name.size() != 64 + 4 || !name.ends_with(kSuffix)) return {};
  const std::string key = name.substr(0, 64);
  return is_sha256_hex(key) ? key : std::string();
}

}  // namespace

Expected<DiskCacheSettings> settings_from_environment() noexcept {
  return no_throw("reading the compile-cache settings", [&]() -> Expected<DiskCacheSettings> {
    DiskCacheSettings s;
    s.dir = plugboard_cache_home() / "compiled";
    if (auto v = environment_override("PLUGBOARD_COMPILE_CACHE")) {
      if (*v == "off" || *v == "0") s.enabled = false;
      else if (*v != "on" && *v != "1")
        return invalid_argument("PLUGBOARD_COMPILE_CACHE='" + *v + "': give on, off, 1 or 0");
    }
    if (auto v = environment_override("PLUGBOARD_COMPILE_CACHE_DIR")) s.dir = *v;
    if (auto v = environment_override("PLUGBOARD_COMPILE_CACHE_MAX_MB")) {
      PB_ASSIGN_OR_RETURN(const uint64_t mb, parse_uint64(*v, "PLUGBOARD_COMPILE_CACHE_MAX_MB", uint64_t{1} << 40));
      s.max_bytes = mb << 20;
    }
    return s;
  });
}

std::filesystem::path DiskCache::entry_path(const std::string& key) const {
  return dir_ / key.substr(0, 2) / (key + kSuffix);
}

DiskCache::Found DiskCache::find(const std::string& key) const noexcept {
  try {
    if (auto trusted = check_trusted(dir_); !trusted) return {std::nullopt, trusted.error().to_string()};
    const std::filesystem::path path = entry_path(key);
    auto bytes = read_regular_file(path, kMaxEntryBytes, OpenOptions{.no_follow = true});
    if (!bytes) {
      if (bytes.error().code() == Code::kNotFound) return {};
      remove(key);
      return {std::nullopt, bytes.error().to_string()};
    }
    auto entry = decode_entry(*bytes, key, "compile-cache entry " + path.string());
    if (!entry) {
      remove(key);
      return {std::nullopt, entry.error().to_string()};
    }
    // Least recently used is told by mtime: a hit makes the entry new again.
    std::error_code ec;
    std::filesystem::last_write_time(path, std::filesystem::file_time_type::clock::now(), ec);
    return {std::move(*entry), std::nullopt};
  } catch (...) {
    return {};
  }
}

Status DiskCache::store(const Entry& entry) const noexcept {
  return no_throw("storing a compile-cache entry", [&]() -> Status {
    const std::filesystem::path path = entry_path(entry.key);
    std::error_code ec;
    std::filesystem::create_directories(dir_.parent_path(), ec);  // …/plugboard: the user's umask
    for (const std::filesystem::path& d : {dir_, path.parent_path()})  // the cache itself: 0700
      if (::mkdir(d.c_str(), 0700) != 0 && errno != EEXIST)
        return make_error(Code::kPermissionDenied, "cannot create compile cache folder " + d.string() + ": " +
                                                       std::strerror(errno));
    PB_RETURN_IF_ERROR(check_trusted(dir_));
    PB_ASSIGN_OR_RETURN(const std::string bytes, encode_entry(entry));
    PB_RETURN_IF_ERROR(write_file_atomically(path, bytes, 0644));
    evict();
    return ok();
  });
}

void DiskCache::remove(const std::string& key) const noexcept {
  try {
    std::error_code ec;
    std::filesystem::remove(entry_path(key), ec);
  } catch (...) {
    // Nothing to report to: the entry stays, and is refused again when next found.
  }
}

std::vector<DiskCache::Listed> DiskCache::list() const {
  std::vector<Listed> out;
  std::error_code ec;
  for (std::filesystem::recursive_directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    if (it.depth() > 1) continue;
    std::error_code e;
    if (it->is_regular_file(e) && stale_temporary(*it)) {
      std::filesystem::remove(it->path(), e);
      continue;
    }
    if (!it->is_regular_file(e) || key_of_name(it->path()).empty()) continue;
    Listed l{it->path(), it->file_size(e), it->last_write_time(e)};
    if (!e) out.push_back(std::move(l));
  }
  return out;
}

void DiskCache::evict() const {
  std::vector<Listed> entries = list();
  uint64_t total = 0;
  for (const Listed& l : entries) total += l.size;
  if (total <= max_bytes_) return;
  std::sort(entries.begin(), entries.end(), [](const Listed& a, const Listed& b) { return a.used < b.used; });
  for (const Listed& l : entries) {
    if (total <= max_bytes_) break;
    std::error_code ec;
    // Another process may have removed it first: its bytes are gone either way.
    std::filesystem::remove(l.path, ec);
    total -= l.size;
  }
}

Expected<CacheStats> DiskCache::stats() const noexcept {
  return no_throw("reading the compile cache", [&]() -> Expected<CacheStats> {
    CacheStats s{dir_, 0, 0, max_bytes_};
    for (const Listed& l : list()) {
      ++s.entries;
      s.bytes += l.size;
    }
    return s;
  });
}

Expected<uint64_t> DiskCache::clear() const noexcept {
  return no_throw("clearing the compile cache", [&]() -> Expected<uint64_t> {
    uint64_t removed = 0;
    for (const Listed& l : list()) {
      std::error_code ec;
      if (std::filesystem::remove(l.path, ec)) ++removed;
      else if (ec) return make_error(Code::kPermissionDenied, "cannot remove " + l.path.string() + ": " + ec.message());
    }
    return removed;
  });
}

Expected<std::vector<EntryCheck>> DiskCache::verify() const noexcept {
  return no_throw("verifying the compile cache", [&]() -> Expected<std::vector<EntryCheck>> {
    std::vector<EntryCheck> out;
    for (const Listed& l : list()) {
      EntryCheck check{l.path, ok(), {}};
      auto bytes = read_regular_file(l.path, kMaxEntryBytes, OpenOptions{.no_follow = true});
      if (!bytes) {
        check.status = std::unexpected(bytes.error());
      } else if (auto entry = decode_entry(*bytes, key_of_name(l.path), "compile-cache entry " + l.path.string())) {
        check.program = entry->metadata["program"];
      } else {
        check.status = std::unexpected(entry.error());
      }
      out.push_back(std::move(check));
    }
    std::sort(out.begin(), out.end(), [](const EntryCheck& a, const EntryCheck& b) { return a.path < b.path; });
    return out;
  });
}

}  // namespace plugboard::compile_cache
