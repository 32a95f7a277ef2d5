// Sha256Hasher over OpenSSL's EVP interface.
#include "fetch/hasher.h"

#include <openssl/evp.h>

namespace plugboard::fetch {

struct Sha256Hasher::State {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  ~State() { EVP_MD_CTX_free(ctx); }
};

Sha256Hasher::Sha256Hasher() : state_(std::make_unique<State>()) {
  if (state_->ctx) EVP_DigestInit_ex(state_->ctx, EVP_sha256(), nullptr);
}

Sha256Hasher::~Sha256Hasher() = default;

void Sha256Hasher::update(std::span<const std::byte> data) {
  if (state_->ctx) EVP_DigestUpdate(state_->ctx, data.data(), data.size());
}

std::string Sha256Hasher::hex_digest() {
  static constexpr char kHex[] = "0123456789abcdef";
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  if (!state_->ctx || EVP_DigestFinal_ex(state_->ctx, digest, &len) != 1) return {};
  std::string out(2 * len, '0');
  for (unsigned i = 0; i < len; ++i) {
    out[2 * i] = kHex[digest[i] >> 4];
    out[2 * i + 1] = kHex[digest[i] & 0xf];
  }
  return out;
}

}  // namespace plugboard::fetch
