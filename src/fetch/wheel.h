// A wheel (a zip archive, read by fetch/zip_archive.h): its members, and streaming one member out to a
// temporary file while hashing it (the file is never held in memory; a plugin is hundreds of MB).
//
// A wheel is untrusted input: it is opened only when it is a regular file (a FIFO or a device is
// refused, never waited on); a member is inflated only up to the size its entry declares (the first
// byte past it stops the extraction); an entry that declares more than kMaxMemberBytes, or that would
// inflate more than kMaxInflationRatio times its compressed size, is refused before a byte is written;
// an entry that is a symbolic link is refused; a member whose data is corrupt (its CRC-32), truncated,
// encrypted or compressed other than stored or deflated is an error naming the wheel and the member.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/atomic_file.h"
#include "fetch/zip_archive.h"

namespace plugboard::fetch {

inline constexpr uint64_t kMaxMemberBytes = uint64_t{4} << 30;  // the largest member extracted
inline constexpr uint64_t kMaxInflationRatio = 200;               // uncompressed / compressed, ...
inline constexpr uint64_t kInflationRatioFloor = uint64_t{16} << 20;  // ... for members above 16 MiB

struct WheelMember {
  std::string name;  // path inside the wheel
  uint64_t size = 0;  // uncompressed, as the entry declares it
  uint64_t index = 0;  // in the archive's entries
  uint64_t compressed_size = 0;
  bool symlink = false;  // made on Unix with S_IFLNK in its external attributes
};

// A member written out and synced, not yet in place: commit `file` to keep it.
struct ExtractedMember {
  AtomicFile file;
  std::string sha256;
  uint64_t size = 0;
};

class Wheel {
 public:
  // Errors name the file and say what is wrong with it as a zip archive (DATA_LOSS); a path that is not
  // a regular file is refused.
  static Expected<Wheel> open(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return path_; }
  const std::vector<WheelMember>& members() const { return members_; }
  const WheelMember* find(std::string_view name) const;

  // Streams `member` into a new temporary file in `dir`, hashing it; mode 0755. The member's CRC-32 is
  // checked, so a corrupt wheel is an error (naming the wheel and the member), never a file.
  // Refused (naming wheel and member) before anything is written: a symbolic link, a declared size past
  // kMaxMemberBytes, or an inflation ratio past kMaxInflationRatio.
  Expected<ExtractedMember> extract(const WheelMember& member, const std::filesystem::path& dir, bool progress) const;

  // The inflated bytes of `member`, chunk by chunk, to `sink` (what extract() writes). Never more than
  // the entry declares: the first byte past it is DATA_LOSS naming the wheel and the member.
  using Sink = std::function<Status(std::span<const std::byte>)>;
  Status read(const WheelMember& member, const Sink& sink, bool progress) const;

  // The checks extract() and read() make before inflating anything.
  Status check_member(const WheelMember& member) const;

 private:
  Wheel(std::filesystem::path path, ZipArchive archive, std::vector<WheelMember> members)
      : path_(std::move(path)), archive_(std::move(archive)), members_(std::move(members)) {}

  std::filesystem::path path_;
  ZipArchive archive_;
  std::vector<WheelMember> members_;
};

}  // namespace plugboard::fetch
