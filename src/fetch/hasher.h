// Incremental SHA-256, for hashing a plugin while it is being extracted (base/sha256.h hashes whole
// buffers and files).
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>

namespace plugboard::fetch {

class Sha256Hasher {
 public:
  Sha256Hasher();
  ~Sha256Hasher();
  Sha256Hasher(const Sha256Hasher&) = delete;
  Sha256Hasher& operator=(const Sha256Hasher&) = delete;

  void update(std::span<const std::byte> data);
  std::string hex_digest();  // lowercase hex; call once, at the end

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace plugboard::fetch
