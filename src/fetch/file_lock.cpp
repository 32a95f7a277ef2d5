// FileLock: open(O_CREAT) + flock(LOCK_EX). Each acquire opens its own descriptor, so two threads of
// one process exclude each other as two processes do.
#include "fetch/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace plugboard::fetch {

Expected<FileLock> FileLock::acquire(const std::filesystem::path& path) {
  for (;;) {
    UniqueFd owned(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    if (!owned) return make_error(Code::kInternal, "cannot open lock file " + path.string() + ": " + std::strerror(errno));
    const int fd = owned.get();
    FileLock lock(std::move(owned));
    int rc;
    while ((rc = ::flock(fd, LOCK_EX)) != 0 && errno == EINTR) {
    }
    if (rc != 0) return make_error(Code::kInternal, "cannot lock " + path.string() + ": " + std::strerror(errno));
    // The holder before us may have removed the file (and its folder) as it let go: then this lock
    // guards nothing anyone else will see, and it is taken again on the file now at `path`.
    struct stat held {}, now {};
    if (::fstat(fd, &held) != 0)
      return make_error(Code::kInternal, "cannot check lock file " + path.string() + ": " + std::strerror(errno));
    if (::stat(path.c_str(), &now) == 0) {
      if (held.st_dev == now.st_dev && held.st_ino == now.st_ino) return lock;
    } else if (errno != ENOENT) {
      return make_error(Code::kInternal, "cannot check lock file " + path.string() + ": " + std::strerror(errno));
    }
  }
}

}  // namespace plugboard::fetch
