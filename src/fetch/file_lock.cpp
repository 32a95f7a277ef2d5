// FileLock: open(O_CREAT) + flock(LOCK_EX). Each acquire opens its own descriptor, so two threads of
// one process exclude each other as two processes do.
#include "fetch/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace plugboard::fetch {

Expected<FileLock> FileLock::acquire(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return make_error(Code::kInternal, "cannot open lock file " + path.string() + ": " + std::strerror(errno));
  FileLock lock(fd);
  int rc;
  while ((rc = ::flock(fd, LOCK_EX)) != 0 && errno == EINTR) {
  }
  if (rc != 0) return make_error(Code::kInternal, "cannot lock " + path.string() + ": " + std::strerror(errno));
  return lock;
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace plugboard::fetch
