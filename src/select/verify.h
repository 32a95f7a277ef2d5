// The "verified" stage: a candidate's file has the size and sha256 its manifest says. Hashing a
// 400 MB plugin takes seconds, far more than loading it, so a successful check is remembered in a stamp
// keyed by the file's path, size, mtime, ctime, inode and device (under the stamp folder); a boot reuses it, and a
// full re-hash happens on request or when any of those changed.
#pragma once

#include <filesystem>
#include <string>

#include "base/status.h"
#include "select/candidate.h"

namespace plugboard::select {

struct VerifyOptions {
  std::filesystem::path stamp_dir;  // "" = no stamps (always hash); default_stamp_dir() in base/hash_stamp.h
  bool rehash = false;              // ignore stamps, hash again (and refresh the stamp)
};

// What verification did to accept a candidate.
enum class Verification {
  kNoChecksum,    // the candidate names no sha256: only its existence was checked
  kStampVouched,  // every file matched its stamp (same size, mtime, ctime, inode): nothing was hashed
  kHashed,        // at least one file (plugin or companion) was hashed, and all matched
};

struct Verified {
  Verification how = Verification::kNoChecksum;
  std::string detail;  // "sha256 matches (stamp: ...)", "no checksum to verify (from PJRT_NAMES_AND_LIBRARY_PATHS)"
};

// DATA_LOSS naming the file, the expected and the actual value when the size or sha256 differ, or when
// the file changed while it was hashed. Each file is opened once (O_NOFOLLOW: a symlink is refused)
// and hashed through that descriptor; the identity it had (device, inode, size, mtime, ctime) is
// recorded (record_verified_file in plugin/native_library.h), and loading the plugin or a companion
// (the CUDA callback bridge) later refuses a file that is no longer that one.
Expected<Verified> verify_candidate(const Candidate& candidate, const VerifyOptions& options);

}  // namespace plugboard::select
