#include "base/sha256.h"

#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "base/regular_file.h"

namespace plugboard {
namespace {

struct MdCtxDeleter {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
using MdCtx = std::unique_ptr<EVP_MD_CTX, MdCtxDeleter>;

std::string to_hex(const unsigned char* digest, unsigned len) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(len * 2, '0');
  for (unsigned i = 0; i < len; ++i) {
    out[2 * i] = kHex[digest[i] >> 4];
    out[2 * i + 1] = kHex[digest[i] & 0xf];
  }
  return out;
}

MdCtx new_sha256() {
  MdCtx ctx(EVP_MD_CTX_new());
  if (ctx && EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) ctx.reset();
  return ctx;
}

std::string finish(EVP_MD_CTX* ctx) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_DigestFinal_ex(ctx, digest, &len);
  return to_hex(digest, len);
}

}  // namespace

std::string sha256_hex(std::span<const std::byte> data) {
  MdCtx ctx = new_sha256();
  if (!ctx) return {};
  EVP_DigestUpdate(ctx.get(), data.data(), data.size());
  return finish(ctx.get());
}

Expected<std::string> sha256_fd(int fd, const std::filesystem::path& path,
                                const std::function<void(uint64_t, uint64_t)>& progress) {
  struct stat st {};
  const uint64_t total = ::fstat(fd, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  MdCtx ctx = new_sha256();
  if (!ctx) return make_error(Code::kInternal, "OpenSSL could not start a SHA-256 digest");
  std::vector<unsigned char> block(1 << 20);
  uint64_t done = 0;
  for (;;) {
    const ssize_t n = ::pread(fd, block.data(), block.size(), static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return make_error(Code::kDataLoss, "read error while hashing " + path.string() + ": " + std::strerror(errno));
    if (n == 0) break;
    EVP_DigestUpdate(ctx.get(), block.data(), static_cast<size_t>(n));
    done += static_cast<uint64_t>(n);
    if (progress) progress(done, total);
  }
  return finish(ctx.get());
}

Expected<std::string> sha256_file(const std::filesystem::path& path,
                                  const std::function<void(uint64_t, uint64_t)>& progress) {
  PB_ASSIGN_OR_RETURN(UniqueFd fd, annotate(open_regular_file(path), "hashing " + path.string()));
  return sha256_fd(fd.get(), path, progress);
}

bool is_sha256_hex(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace plugboard
