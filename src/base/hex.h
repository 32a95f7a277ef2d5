// Hexadecimal text, written in one place: digests as lowercase hex, bytes as "\xNN" escapes in
// messages, numbers as "0x..." offsets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace plugboard {

// Two lowercase hex digits per byte: "00ff1a".
std::string hex_encode(std::span<const std::byte> bytes);
inline std::string hex_encode(std::span<const unsigned char> bytes) { return hex_encode(std::as_bytes(bytes)); }

// Appends "\xNN" (lowercase) for `byte`.
void append_hex_escape(std::string& out, unsigned char byte);

// "0x" followed by the digits of `value` without leading zeros: "0x0", "0x40", "0xffffffffffffffff".
std::string hex_number(uint64_t value);

}  // namespace plugboard
