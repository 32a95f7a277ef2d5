#include "compile_cache/entry.h"

#include <cstring>

#include "base/hex.h"
#include "base/sha256.h"
#include "compile_cache/cache_key.h"

namespace plugboard::compile_cache {
namespace {

constexpr char kMagic[8] = {'P', 'B', 'X', 'C', 'A', 'C', 'H', 'E'};

template <class T>
void put(std::string& out, T value) {
  for (size_t i = 0; i < sizeof(T); ++i) out += static_cast<char>((static_cast<uint64_t>(value) >> (8 * i)) & 0xff);
}
template <class T>
T get(std::string_view bytes, size_t at) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  return static_cast<T>(v);
}

std::string digest_of(std::string_view metadata, std::string_view payload) {
  std::string both;
  both.reserve(metadata.size() + payload.size());
  both.append(metadata).append(payload);
  return sha256_hex(std::as_bytes(std::span(both.data(), both.size())));
}

// 64 hex digits as 32 raw bytes, and back.
std::string raw_digest(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16));
  return out;
}
std::string hex_digest(std::string_view raw) {
  return hex_encode(std::as_bytes(std::span(raw.data(), raw.size())));
}

std::string encode_metadata(const std::map<std::string, std::string>& metadata) {
  std::string out;
  for (const auto& [k, v] : metadata) {
    // One line each: a newline in a value (a file name) would split it.
    std::string value = v;
    for (char& c : value)
      if (c == '\n' || c == '\r') c = ' ';
    out += k + "=" + value + "\n";
  }
  return out;
}

std::map<std::string, std::string> decode_metadata(std::string_view text) {
  std::map<std::string, std::string> out;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    if (const size_t eq = line.find('='); eq != std::string_view::npos)
      out[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return out;
}

}  // namespace

Expected<std::string> encode_entry(const Entry& entry) {
  const std::string metadata = encode_metadata(entry.metadata);
  if (metadata.size() > kMaxMetadataBytes)
    return invalid_argument("compile-cache entry metadata of " + std::to_string(metadata.size()) + " bytes, over the " +
                            std::to_string(kMaxMetadataBytes) + "-byte limit");
  std::string out(kMagic, sizeof(kMagic));
  put<uint32_t>(out, kFormatVersion);
  out += raw_digest(entry.key);
  put<uint32_t>(out, static_cast<uint32_t>(metadata.size()));
  put<uint64_t>(out, entry.payload.size());
  out += raw_digest(digest_of(metadata, entry.payload));
  out += metadata;
  out += entry.payload;
  return out;
}

Expected<Entry> decode_entry(std::string_view bytes, std::string_view expected_key, const std::string& where) {
  if (bytes.size() < sizeof(kMagic) || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0)
    return invalid_argument(where + " is not a compile-cache entry (no PBXCACHE magic)");
  if (bytes.size() < kEntryHeaderBytes)
    return make_error(Code::kDataLoss, where + " is truncated: " + std::to_string(bytes.size()) +
                                           " bytes, shorter than the " + std::to_string(kEntryHeaderBytes) + "-byte header");
  if (const uint32_t version = get<uint32_t>(bytes, 8); version != kFormatVersion)
    return make_error(Code::kFailedPrecondition, where + " has compile-cache format version " + std::to_string(version) +
                                                     ", this plugboard reads version " + std::to_string(kFormatVersion));
  Entry entry;
  entry.key = hex_digest(bytes.substr(12, 32));
  if (!expected_key.empty() && entry.key != expected_key)
    return make_error(Code::kDataLoss, where + " is a foreign entry: it holds key " + entry.key + ", not " +
                                           std::string(expected_key));
  const uint64_t metadata_size = get<uint32_t>(bytes, 44);
  const uint64_t payload_size = get<uint64_t>(bytes, 48);
  const uint64_t body = bytes.size() - kEntryHeaderBytes;
  if (metadata_size > kMaxMetadataBytes || payload_size > body || metadata_size > body - payload_size)
    return make_error(Code::kDataLoss, where + " is truncated: its header announces " + std::to_string(metadata_size) +
                                           " + " + std::to_string(payload_size) + " bytes, the file holds " +
                                           std::to_string(body) + " after the header");
  if (metadata_size + payload_size != body)
    return make_error(Code::kDataLoss, where + " has " + std::to_string(body - metadata_size - payload_size) +
                                           " bytes after its payload");
  const std::string_view metadata = bytes.substr(kEntryHeaderBytes, metadata_size);
  const std::string_view payload = bytes.substr(kEntryHeaderBytes + metadata_size);
  if (const std::string sum = digest_of(metadata, payload); sum != hex_digest(bytes.substr(56, 32)))
    return make_error(Code::kDataLoss, where + " is corrupt: its checksum does not match its content");
  entry.metadata = decode_metadata(metadata);
  entry.payload = std::string(payload);
  return entry;
}

}  // namespace plugboard::compile_cache
