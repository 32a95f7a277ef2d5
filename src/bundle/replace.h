// Replacing a bundle whole: the new bundle is built in a staging folder beside DIR (".DIR.staging")
// and swapped in only when complete, by one rename(2) (RENAME_EXCHANGE where the filesystem has it,
// else two renames); a build that fails or is interrupted leaves DIR as it was. Two replacements of
// the same DIR (threads or processes) are serialised by an flock(2) on the sibling "DIR.lock", which
// lives outside DIR so that it outlives every DIR it guards (the bundle's own .bundle.lock goes with
// the folder it is in). `plugboard bundle --replace` and Plugboard.Release.embed/1 use it.
#pragma once

#include <filesystem>
#include <memory>

#include "base/status.h"
#include "fetch/file_lock.h"

namespace plugboard::bundle {

class BundleReplacement {
 public:
  // Takes DIR's lock (blocking while another replacement holds it) and makes an empty staging folder,
  // removing one an interrupted build left.
  static Expected<std::unique_ptr<BundleReplacement>> begin(const std::filesystem::path& dir);

  const std::filesystem::path& staging() const { return staging_; }

  // Puts the staging folder in DIR's place and removes what was there. Once.
  Status commit();

  // Not committed: the staging folder is removed, DIR is untouched. Then the lock is let go.
  ~BundleReplacement();

  BundleReplacement(const BundleReplacement&) = delete;
  BundleReplacement& operator=(const BundleReplacement&) = delete;

 private:
  BundleReplacement(std::filesystem::path dir, std::filesystem::path staging, fetch::FileLock lock)
      : dir_(std::move(dir)), staging_(std::move(staging)), lock_(std::move(lock)) {}
  std::filesystem::path dir_, staging_;
  fetch::FileLock lock_;
  bool committed_ = false;
};

}  // namespace plugboard::bundle
