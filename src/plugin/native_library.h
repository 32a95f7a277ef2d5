// Opening a native shared library (a PJRT plugin, a device bridge) without trusting the file: it must
// be a regular file (a FIFO never blocks), a well-formed ELF shared library for this machine whose
// segments and sections lie inside it (a truncated file would fault inside dlopen), and, when it was
// verified against a manifest in this process, the very file that was hashed. After dlopen the path
// must still be that file: one replaced or rewritten between verification and load is refused. (That
// check comes after dlopen, so it detects such a change rather than prevents it: the library's
// constructors have run by then; a refused library is never used and never initialized, see
// plugin.cpp. dlopen by descriptor would close the gap but break $ORIGIN in the plugins' RUNPATH.)
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "base/elf_file.h"
#include "base/regular_file.h"
#include "base/status.h"

namespace plugboard {

// The process-wide record of files verified (size + sha256) against a manifest, with the identity
// (device, inode, size, mtime, ctime) the file had while it was hashed. Keyed by canonical path.
void record_verified_file(const std::filesystem::path& path, const FileIdentity& identity, const std::string& sha256);
std::optional<FileIdentity> verified_identity(const std::filesystem::path& path);
// The sha256 verification found for `path` (with verified_identity: the file it was then).
std::optional<std::string> verified_sha256(const std::filesystem::path& path);

// Whether `now` is still the file `expected` describes. Equal identities are; so is one that differs
// in ctime alone (same device, inode, size and mtime: a hard link made or removed, a chmod; bundles
// hard-link plugins from the fetch cache, so this happens to files being loaded) when the content
// still has the sha256 verification hashed (`sha256`, hashed again here), or when nothing was
// verified (no hash to hold it to). Anything else is DATA_LOSS naming the file, `when` it changed and
// both identities.
Status confirm_same_file(const std::filesystem::path& path, const FileIdentity& expected, const FileIdentity& now,
                         const std::optional<std::string>& sha256, const std::string& what, const std::string& when);

// "device 2049, inode 1234, 10 bytes, mtime ..., ctime ..." for messages.
std::string describe_identity(const FileIdentity& id);

struct InspectedLibrary {
  std::filesystem::path canonical;  // absolute, symlinks resolved: what dlopen is given
  FileIdentity identity;            // of the file inspected (fstat of the descriptor)
  std::optional<FileIdentity> verified;  // what verification hashed, when it did
  std::optional<std::string> sha256;      // and the content's sha256 it found
};

// The checks before dlopen. `what` names the kind of file in messages ("plugin", "device bridge").
// NOT_FOUND / PERMISSION_DENIED for a path that cannot be opened, INVALID_ARGUMENT (not a regular file,
// not an ELF shared library for this machine), OUT_OF_RANGE (a header, segment or section outside the
// file), DATA_LOSS (not the file that was verified).
Expected<InspectedLibrary> inspect_library(const std::filesystem::path& path, const std::string& what);

// dlopen(RTLD_NOW | RTLD_LOCAL) of an inspected library (never dlclosed), then the identity check:
// DATA_LOSS when the path no longer is the inspected (and verified) file. FAILED_PRECONDITION with
// dlerror when dlopen fails.
Expected<void*> open_inspected_library(const InspectedLibrary& library, const std::string& what);
// The two halves of open_inspected_library, for a caller that must know the library was mapped (its
// constructors have run, and dlopen would hand back the same handle) even when the check then fails.
Expected<void*> dlopen_inspected_library(const InspectedLibrary& library);
Status check_loaded_identity(const InspectedLibrary& library, const std::string& what);

}  // namespace plugboard
