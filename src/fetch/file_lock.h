// An exclusive flock(2) on a lock file, held for the object's lifetime: one per cache entry, so
// concurrent fetches (threads or processes) of the same plugin extract it once.
#pragma once

#include <filesystem>
#include <utility>

#include "base/status.h"
#include "base/unique_fd.h"

namespace plugboard::fetch {

class FileLock {
 public:
  // Creates `path` if needed and blocks until the lock is held.
  static Expected<FileLock> acquire(const std::filesystem::path& path);

  FileLock(FileLock&& other) noexcept = default;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock() = default;  // unlocks (closing the descriptor releases the lock)

 private:
  explicit FileLock(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

}  // namespace plugboard::fetch
