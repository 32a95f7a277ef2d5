// SHA-256 (FIPS 180-4) of bytes and of files, as lowercase hex (what sha256sum, pip's --hash and
// wheels' RECORD use). Our own, so that nothing plugboard ships needs libcrypto: the SHA extensions
// of x86-64 (SHA-NI) when the processor has them (checked once, at run time), portable C++ otherwise.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>

#include "base/status.h"

namespace plugboard {

// An incremental digest: update() with the bytes in any pieces, then digest() or hex_digest(). Both
// read the state without ending it: more update()s may follow, and the digest is then of all the
// bytes so far.
class Sha256 {
 public:
  enum class Engine {
    kFastest,   // the SHA extensions when the processor has them, else the portable code
    kPortable,  // plain C++ always (for tests and comparisons)
  };
  static constexpr size_t kDigestBytes = 32;
  static constexpr size_t kBlockBytes = 64;

  explicit Sha256(Engine engine = Engine::kFastest);

  void update(std::span<const std::byte> data);
  std::array<std::byte, kDigestBytes> digest() const;
  std::string hex_digest() const;  // 64 lowercase hex digits

  // Whether kFastest uses the processor's SHA extensions on this machine.
  static bool hardware_accelerated();

 private:
  using Compress = void (*)(uint32_t* state, const std::byte* blocks, size_t count);

  Compress compress_;
  std::array<uint32_t, 8> state_;
  std::array<std::byte, kBlockBytes> pending_{};  // the bytes of an incomplete block
  size_t pending_size_ = 0;
  uint64_t total_bytes_ = 0;
};

std::string sha256_hex(std::span<const std::byte> data);

// Reads the file in 1 MiB blocks; `progress(done, total)` (optional) is called after each block.
// Only a regular file is read (base/regular_file.h: a FIFO is refused, never waited on). Errors name
// the file.
Expected<std::string> sha256_file(const std::filesystem::path& path,
                                  const std::function<void(uint64_t, uint64_t)>& progress = {});
// The same, of the file an open descriptor holds (from its start, whatever its offset), so that the
// bytes hashed are that file's whatever its path names meanwhile; `path` names it in errors.
Expected<std::string> sha256_fd(int fd, const std::filesystem::path& path,
                                const std::function<void(uint64_t, uint64_t)>& progress = {});

// True for 64 lowercase hex digits.
bool is_sha256_hex(std::string_view s);

}  // namespace plugboard
