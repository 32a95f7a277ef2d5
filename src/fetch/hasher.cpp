// Sha256Hasher over OpenSSL's EVP interface.
#include "fetch/hasher.h"

#include <openssl/evp.h>

#include "base/hex.h"

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
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  if (!state_->ctx || EVP_DigestFinal_ex(state_->ctx, digest, &len) != 1) return {};
  return hex_encode(std::span<const unsigned char>(digest, len));
}

}  // namespace plugboard::fetch
