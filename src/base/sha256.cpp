#include "base/sha256.h"

#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "base/hex.h"
#include "base/read_at.h"
#include "base/regular_file.h"

namespace plugboard {
namespace {

struct MdCtxDeleter {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
using MdCtx = std::unique_ptr<EVP_MD_CTX, MdCtxDeleter>;

MdCtx new_sha256() {
  MdCtx ctx(EVP_MD_CTX_new());
  if (ctx && EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) ctx.reset();
  return ctx;
}

std::string finish(EVP_MD_CTX* ctx) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_DigestFinal_ex(ctx, digest, &len);
  return hex_encode(std::span<const unsigned char>(digest, len));
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
  std::vector<std::byte> block(1 << 20);
  uint64_t done = 0;
  for (;;) {
    PB_ASSIGN_OR_RETURN(const size_t n, read_at(fd, block, done, "read error while hashing " + path.string()));
    if (n == 0) break;
    EVP_DigestUpdate(ctx.get(), block.data(), n);
    done += n;
    if (progress) progress(done, total);
    if (n < block.size()) break;  // the end of the file
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
