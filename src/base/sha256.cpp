// SHA-256 as FIPS 180-4 (section 6.2) states it: the message padded to 512-bit blocks, each block
// expanded to 64 schedule words and folded into the eight-word state by 64 rounds. Two compression
// functions: the portable one, and one over the x86 SHA extensions (SHA256RNDS2 does two rounds,
// SHA256MSG1/MSG2 the schedule), chosen once by CPUID.
#include "base/sha256.h"

#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cstring>
#include <vector>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "base/hex.h"
#include "base/read_at.h"
#include "base/regular_file.h"

namespace plugboard {
namespace {

// 4.2.2: the first 32 bits of the fractional parts of the cube roots of the first 64 primes.
alignas(16) constexpr uint32_t kRoundConstants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

// 5.3.3: the first 32 bits of the fractional parts of the square roots of the first 8 primes.
constexpr std::array<uint32_t, 8> kInitialState = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

uint32_t load_big_endian(const std::byte* p) {
  return (std::to_integer<uint32_t>(p[0]) << 24) | (std::to_integer<uint32_t>(p[1]) << 16) |
         (std::to_integer<uint32_t>(p[2]) << 8) | std::to_integer<uint32_t>(p[3]);
}

void store_big_endian(std::byte* p, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<std::byte>(value >> (8 * (bytes - 1 - i)));
}

// 4.1.2's functions.
constexpr uint32_t choose(uint32_t x, uint32_t y, uint32_t z) { return (x & y) ^ (~x & z); }
constexpr uint32_t majority(uint32_t x, uint32_t y, uint32_t z) { return (x & y) ^ (x & z) ^ (y & z); }
constexpr uint32_t big_sigma0(uint32_t x) { return std::rotr(x, 2) ^ std::rotr(x, 13) ^ std::rotr(x, 22); }
constexpr uint32_t big_sigma1(uint32_t x) { return std::rotr(x, 6) ^ std::rotr(x, 11) ^ std::rotr(x, 25); }
constexpr uint32_t small_sigma0(uint32_t x) { return std::rotr(x, 7) ^ std::rotr(x, 18) ^ (x >> 3); }
constexpr uint32_t small_sigma1(uint32_t x) { return std::rotr(x, 17) ^ std::rotr(x, 19) ^ (x >> 10); }

// 6.2.2, block after block. The schedule is kept as a ring of its last 16 words.
void compress_portable(uint32_t* state, const std::byte* blocks, size_t count) {
  for (; count > 0; --count, blocks += Sha256::kBlockBytes) {
    uint32_t w[16];
    for (int t = 0; t < 16; ++t) w[t] = load_big_endian(blocks + 4 * t);
    uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
    uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
#pragma GCC unroll 64
    for (int t = 0; t < 64; ++t) {
      if (t >= 16)
        w[t & 15] += small_sigma1(w[(t - 2) & 15]) + w[(t - 7) & 15] + small_sigma0(w[(t - 15) & 15]);
      const uint32_t t1 = h + big_sigma1(e) + choose(e, f, g) + kRoundConstants[t] + w[t & 15];
      const uint32_t t2 = big_sigma0(a) + majority(a, b, c);
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    state[0] += a;
    state[1] += b;
    state[2] += c;
    state[3] += d;
    state[4] += e;
    state[5] += f;
    state[6] += g;
    state[7] += h;
  }
}

#if defined(__x86_64__)

// SHA256RNDS2 keeps the state as two vectors, lanes from high to low: (A, B, E, F) and (C, D, G, H);
// it takes W[t] + K[t] for two rounds in the low two lanes of its third operand and returns the new
// (A, B, E, F); the new (C, D, G, H) is the old (A, B, E, F) (two rounds move A, B to C, D and E, F to
// G, H). SHA256MSG1 adds sigma0 of the following word to each of four words; SHA256MSG2 adds
// sigma1(W[t-2]) to finish four words of the schedule.
__attribute__((target("sha,sse4.1,ssse3"))) void compress_sha_extensions(uint32_t* state, const std::byte* blocks,
                                                                         size_t count) {
  __m128i abef = _mm_set_epi32(static_cast<int>(state[0]), static_cast<int>(state[1]), static_cast<int>(state[4]),
                               static_cast<int>(state[5]));
  __m128i cdgh = _mm_set_epi32(static_cast<int>(state[2]), static_cast<int>(state[3]), static_cast<int>(state[6]),
                               static_cast<int>(state[7]));
  // Each 32-bit word of the message is big-endian: reverse the bytes within each lane.
  const __m128i byte_swap = _mm_set_epi8(12, 13, 14, 15, 8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3);
  for (; count > 0; --count, blocks += Sha256::kBlockBytes) {
    const __m128i abef_in = abef;
    const __m128i cdgh_in = cdgh;
    // words[i % 4] holds schedule words 4i .. 4i+3 (lane 0 the first), the last 16 words in all.
    __m128i words[4];
    for (int i = 0; i < 4; ++i)
      words[i] = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blocks + 16 * i)), byte_swap);
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) {
      if (i >= 4) {
        // W[t] = sigma1(W[t-2]) + W[t-7] + sigma0(W[t-15]) + W[t-16], for t = 4i .. 4i+3.
        const __m128i minus16 = words[i & 3], minus12 = words[(i + 1) & 3];
        const __m128i minus8 = words[(i + 2) & 3], minus4 = words[(i + 3) & 3];
        __m128i next = _mm_sha256msg1_epu32(minus16, minus12);           // W[t-16] + sigma0(W[t-15])
        next = _mm_add_epi32(next, _mm_alignr_epi8(minus4, minus8, 4));  // + W[t-7]
        words[i & 3] = _mm_sha256msg2_epu32(next, minus4);               // + sigma1(W[t-2])
      }
      const __m128i wk = _mm_add_epi32(words[i & 3], _mm_load_si128(reinterpret_cast<const __m128i*>(kRoundConstants + 4 * i)));
      __m128i after = _mm_sha256rnds2_epu32(cdgh, abef, wk);
      cdgh = abef;
      abef = after;
      after = _mm_sha256rnds2_epu32(cdgh, abef, _mm_shuffle_epi32(wk, 0x0e));  // lanes 2, 3 down to 0, 1
      cdgh = abef;
      abef = after;
    }
    abef = _mm_add_epi32(abef, abef_in);
    cdgh = _mm_add_epi32(cdgh, cdgh_in);
  }
  state[0] = static_cast<uint32_t>(_mm_extract_epi32(abef, 3));
  state[1] = static_cast<uint32_t>(_mm_extract_epi32(abef, 2));
  state[4] = static_cast<uint32_t>(_mm_extract_epi32(abef, 1));
  state[5] = static_cast<uint32_t>(_mm_extract_epi32(abef, 0));
  state[2] = static_cast<uint32_t>(_mm_extract_epi32(cdgh, 3));
  state[3] = static_cast<uint32_t>(_mm_extract_epi32(cdgh, 2));
  state[6] = static_cast<uint32_t>(_mm_extract_epi32(cdgh, 1));
  state[7] = static_cast<uint32_t>(_mm_extract_epi32(cdgh, 0));
}

bool cpu_has_sha_extensions() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  const bool ssse3 = ecx & bit_SSSE3, sse41 = ecx & bit_SSE4_1;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  return ssse3 && sse41 && (ebx & bit_SHA);
}

#else

bool cpu_has_sha_extensions() { return false; }
void compress_sha_extensions(uint32_t*, const std::byte*, size_t) {}

#endif

}  // namespace

bool Sha256::hardware_accelerated() {
  static const bool has = cpu_has_sha_extensions();
  return has;
}

Sha256::Sha256(Engine engine)
    : compress_(engine == Engine::kFastest && hardware_accelerated() ? compress_sha_extensions : compress_portable),
      state_(kInitialState) {}

void Sha256::update(std::span<const std::byte> data) {
  // An empty span may hold a null pointer (sha256_hex({})), and memcpy from null is undefined even
  // for 0 bytes.
  if (data.empty()) return;
  total_bytes_ += data.size();
  if (pending_size_ > 0) {
    const size_t take = std::min(data.size(), kBlockBytes - pending_size_);
    std::memcpy(pending_.data() + pending_size_, data.data(), take);
    pending_size_ += take;
    data = data.subspan(take);
    if (pending_size_ < kBlockBytes) return;  // all of data went into the pending block
    compress_(state_.data(), pending_.data(), 1);
    pending_size_ = 0;
  }
  const size_t whole = data.size() / kBlockBytes;
  if (whole > 0) compress_(state_.data(), data.data(), whole);
  data = data.subspan(whole * kBlockBytes);
  if (!data.empty()) std::memcpy(pending_.data(), data.data(), data.size());
  pending_size_ = data.size();
}

std::array<std::byte, Sha256::kDigestBytes> Sha256::digest() const {
  // 5.1.1: a 1 bit, zeros up to 448 bits mod 512, then the length in bits as 64 bits, big-endian.
  std::array<uint32_t, 8> state = state_;
  std::array<std::byte, 2 * kBlockBytes> tail{};
  std::memcpy(tail.data(), pending_.data(), pending_size_);
  tail[pending_size_] = std::byte{0x80};
  const size_t blocks = pending_size_ + 1 + 8 <= kBlockBytes ? 1 : 2;
  store_big_endian(tail.data() + blocks * kBlockBytes - 8, total_bytes_ * 8, 8);
  compress_(state.data(), tail.data(), blocks);
  std::array<std::byte, kDigestBytes> out;
  for (size_t i = 0; i < state.size(); ++i) store_big_endian(out.data() + 4 * i, state[i], 4);
  return out;
}

std::string Sha256::hex_digest() const { return hex_encode(digest()); }

std::string sha256_hex(std::span<const std::byte> data) {
  Sha256 hash;
  hash.update(data);
  return hash.hex_digest();
}

Expected<std::string> sha256_fd(int fd, const std::filesystem::path& path,
                                const std::function<void(uint64_t, uint64_t)>& progress) {
  struct stat st {};
  const uint64_t total = ::fstat(fd, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  Sha256 hash;
  std::vector<std::byte> block(1 << 20);
  uint64_t done = 0;
  for (;;) {
    PB_ASSIGN_OR_RETURN(const size_t n, read_at(fd, block, done, "read error while hashing " + path.string()));
    if (n == 0) break;
    hash.update(std::span<const std::byte>(block.data(), n));
    done += n;
    if (progress) progress(done, total);
    if (n < block.size()) break;  // the end of the file
  }
  return hash.hex_digest();
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
