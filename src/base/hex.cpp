#include "base/hex.h"

namespace plugboard {
namespace {

constexpr char kDigits[] = "0123456789abcdef";

}  // namespace

std::string hex_encode(std::span<const std::byte> bytes) {
  std::string out(bytes.size() * 2, '0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    const auto b = static_cast<unsigned char>(bytes[i]);
    out[2 * i] = kDigits[b >> 4];
    out[2 * i + 1] = kDigits[b & 0xf];
  }
  return out;
}

void append_hex_escape(std::string& out, unsigned char byte) {
  out += "\\x";
  out += kDigits[byte >> 4];
  out += kDigits[byte & 0xf];
}

std::string hex_number(uint64_t value) {
  std::string digits;
  do {
    digits.insert(digits.begin(), kDigits[value & 0xf]);
    value >>= 4;
  } while (value);
  return "0x" + digits;
}

}  // namespace plugboard
