#include "bundle/replace.h"

#include <fcntl.h>
#include <stdio.h>

#include <cerrno>
#include <cstring>

namespace plugboard::bundle {
namespace {
namespace fs = std::filesystem;

fs::path sibling(const fs::path& dir, const std::string& prefix, const std::string& suffix) {
  return dir.parent_path() / (prefix + dir.filename().string() + suffix);
}

Status remove_tree(const fs::path& p, const std::string& what) {
  std::error_code ec;
  fs::remove_all(p, ec);
  if (ec) return make_error(Code::kInternal, "cannot remove " + what + " " + p.string() + ": " + ec.message());
  return ok();
}

}  // namespace

Expected<std::unique_ptr<BundleReplacement>> BundleReplacement::begin(const fs::path& given) {
  // "priv/bundle/" names the same folder as "priv/bundle".
  const fs::path dir = given.has_filename() ? fs::absolute(given) : fs::absolute(given.parent_path());
  std::error_code ec;
  fs::create_directories(dir.parent_path(), ec);
  if (ec) return make_error(Code::kInternal, "cannot create " + dir.parent_path().string() + ": " + ec.message());
  PB_ASSIGN_OR_RETURN(fetch::FileLock lock,
                      annotate(fetch::FileLock::acquire(sibling(dir, "", ".lock")), "locking bundle " + dir.string()));
  const fs::path staging = sibling(dir, ".", ".staging");
  PB_RETURN_IF_ERROR(remove_tree(staging, "the staging folder an interrupted build left,"));
  fs::create_directory(staging, ec);
  if (ec) return make_error(Code::kInternal, "cannot create the staging folder " + staging.string() + ": " + ec.message());
  return std::unique_ptr<BundleReplacement>(new BundleReplacement(dir, staging, std::move(lock)));
}

Status BundleReplacement::commit() {
  if (committed_) return make_error(Code::kFailedPrecondition, "bundle " + dir_.string() + " was already replaced");
  std::error_code ec;
  const bool had_one = fs::exists(fs::symlink_status(dir_, ec));
  if (!had_one) {
    if (::rename(staging_.c_str(), dir_.c_str()) != 0)
      return make_error(Code::kInternal, "cannot move " + staging_.string() + " to " + dir_.string() + ": " + std::strerror(errno));
  } else if (::renameat2(AT_FDCWD, staging_.c_str(), AT_FDCWD, dir_.c_str(), RENAME_EXCHANGE) != 0) {
    // A filesystem without RENAME_EXCHANGE: the old bundle is moved aside first (DIR is absent for
    // the moment between the two renames).
    if (errno != EINVAL && errno != ENOSYS)
      return make_error(Code::kInternal, "cannot swap " + staging_.string() + " in for " + dir_.string() + ": " + std::strerror(errno));
    const fs::path old = sibling(dir_, ".", ".old");
    PB_RETURN_IF_ERROR(remove_tree(old, "a previous bundle left at"));
    if (::rename(dir_.c_str(), old.c_str()) != 0)
      return make_error(Code::kInternal, "cannot move " + dir_.string() + " aside: " + std::strerror(errno));
    if (::rename(staging_.c_str(), dir_.c_str()) != 0) {
      const int err = errno;
      (void)::rename(old.c_str(), dir_.c_str());  // the old bundle back
      return make_error(Code::kInternal, "cannot move " + staging_.string() + " to " + dir_.string() + ": " + std::strerror(err));
    }
    committed_ = true;
    return remove_tree(old, "the replaced bundle");
  }
  committed_ = true;
  // After the exchange the staging path holds the old bundle.
  return had_one ? remove_tree(staging_, "the replaced bundle, now at") : ok();
}

BundleReplacement::~BundleReplacement() {
  if (!committed_) (void)remove_tree(staging_, "the staging folder");
}

}  // namespace plugboard::bundle
