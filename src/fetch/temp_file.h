// Temporary files and folders that disappear unless committed: every write into the cache or the lock
// file goes to one of these first and is renamed into place only when complete and synced.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <filesystem>
#include <span>
#include <string_view>
#include <utility>

#include "base/status.h"

namespace plugboard::fetch {

class TempFile {
 public:
  // A new empty file "<dir>/<prefix>XXXXXX" (same file system as its destination, so rename is atomic).
  static Expected<TempFile> create(const std::filesystem::path& dir, std::string_view prefix = ".tmp-");

  TempFile(TempFile&& other) noexcept;
  TempFile& operator=(TempFile&& other) noexcept;
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile();  // closes and removes the file unless it was committed

  int fd() const { return fd_; }
  const std::filesystem::path& path() const { return path_; }

  Status write_all(std::span<const std::byte> data);
  Status write_all(std::string_view text) { return write_all(std::as_bytes(std::span(text.data(), text.size()))); }

  // chmod, fsync, close, rename to `destination` and fsync its folder. Afterwards the object is empty.
  Status commit(const std::filesystem::path& destination, mode_t mode);

 private:
  TempFile(int fd, std::filesystem::path path) : fd_(fd), path_(std::move(path)) {}
  void discard();

  int fd_ = -1;
  std::filesystem::path path_;
};

class TempDir {
 public:
  static Expected<TempDir> create(const std::filesystem::path& parent, std::string_view prefix = "tmp-");
  TempDir(TempDir&& other) noexcept : path_(std::exchange(other.path_, {})) {}
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir();  // removes the folder and what is left in it

  const std::filesystem::path& path() const { return path_; }

 private:
  explicit TempDir(std::filesystem::path path) : path_(std::move(path)) {}
  std::filesystem::path path_;
};

// fsync of a folder, so a rename into it survives a crash.
Status fsync_dir(const std::filesystem::path& dir);

}  // namespace plugboard::fetch
