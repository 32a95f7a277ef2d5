// A wheel opened with libzip: its members, and streaming one member out to a temporary file while
// hashing it (the file is never held in memory; a plugin is hundreds of MB).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "fetch/temp_file.h"

struct zip;

namespace plugboard::fetch {

struct WheelMember {
  std::string name;  // path inside the wheel
  uint64_t size = 0;  // uncompressed
  uint64_t index = 0;
};

// A member written out and synced, not yet in place: commit `file` to keep it.
struct ExtractedMember {
  TempFile file;
  std::string sha256;
  uint64_t size = 0;
};

class Wheel {
 public:
  // Errors name the file and say what libzip found wrong.
  static Expected<Wheel> open(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return path_; }
  const std::vector<WheelMember>& members() const { return members_; }
  const WheelMember* find(std::string_view name) const;

  // Streams `member` into a new temporary file in `dir`, hashing it; mode 0755. libzip checks the
  // member's CRC, so a corrupt wheel is an error (naming the wheel and the member), never a file.
  Expected<ExtractedMember> extract(const WheelMember& member, const std::filesystem::path& dir, bool progress) const;

 private:
  struct Closer {
    void operator()(zip* z) const;
  };
  Wheel(std::filesystem::path path, std::unique_ptr<zip, Closer> archive, std::vector<WheelMember> members)
      : path_(std::move(path)), archive_(std::move(archive)), members_(std::move(members)) {}

  std::filesystem::path path_;
  std::unique_ptr<zip, Closer> archive_;
  std::vector<WheelMember> members_;
};

}  // namespace plugboard::fetch
