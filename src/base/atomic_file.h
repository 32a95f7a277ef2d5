// Files that appear at their destination whole or not at all, and survive a crash once there: every
// file plugboard writes (cache entries, lock files, bundle manifests and files, verify stamps, .npy
// outputs) is written to an AtomicFile in the destination's folder first, then synced, renamed into
// place and its folder synced. A file that is not committed is removed.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <filesystem>
#include <span>
#include <string_view>
#include <utility>

#include "base/status.h"
#include "base/unique_fd.h"

namespace plugboard {

class AtomicFile {
 public:
  // A new empty file "<dir>/<prefix>XXXXXX" (same file system as its destination, so rename is atomic).
  static Expected<AtomicFile> create(const std::filesystem::path& dir, std::string_view prefix = ".tmp-");

  AtomicFile(AtomicFile&& other) noexcept;
  AtomicFile& operator=(AtomicFile&& other) noexcept;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();  // closes and removes the file unless it was committed

  int fd() const { return fd_.get(); }
  const std::filesystem::path& path() const { return path_; }

  Status write_all(std::span<const std::byte> data);
  Status write_all(std::string_view text) { return write_all(std::as_bytes(std::span(text.data(), text.size()))); }

  // chmod, fsync, close, rename to `destination` and fsync its folder. Afterwards the object is empty.
  Status commit(const std::filesystem::path& destination, mode_t mode);

 private:
  AtomicFile(UniqueFd fd, std::filesystem::path path) : fd_(std::move(fd)), path_(std::move(path)) {}
  void discard();

  UniqueFd fd_;
  std::filesystem::path path_;
};

// `bytes` written to `destination` through an AtomicFile named "." + its name + ".tmp-XXXXXX" beside it.
Status write_file_atomically(const std::filesystem::path& destination, std::span<const std::byte> bytes, mode_t mode);
inline Status write_file_atomically(const std::filesystem::path& destination, std::string_view text, mode_t mode) {
  return write_file_atomically(destination, std::as_bytes(std::span(text.data(), text.size())), mode);
}

// An existing complete file moved into place durably: fsync `from`, rename it to `to` (same file
// system), fsync to's folder.
Status move_file_durably(const std::filesystem::path& from, const std::filesystem::path& to);

// fsync of a folder, so a rename into it survives a crash.
Status fsync_dir(const std::filesystem::path& dir);

}  // namespace plugboard
