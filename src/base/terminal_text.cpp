#include "base/terminal_text.h"

#include <cstdint>

#include "base/hex.h"

namespace plugboard {
namespace {

// The length of the well-formed UTF-8 sequence starting at text[i] (2..4), or 0 when it is not one
// (overlong forms, surrogates and code points past U+10FFFF included).
size_t utf8_length(std::string_view text, size_t i, uint32_t& code_point) {
  const auto b0 = static_cast<unsigned char>(text[i]);
  size_t n = 0;
  uint32_t cp = 0, min = 0;
  if (b0 >= 0xc2 && b0 <= 0xdf) n = 2, cp = b0 & 0x1f, min = 0x80;
  else if (b0 >= 0xe0 && b0 <= 0xef) n = 3, cp = b0 & 0x0f, min = 0x800;
  else if (b0 >= 0xf0 && b0 <= 0xf4) n = 4, cp = b0 & 0x07, min = 0x10000;
  else return 0;
  if (i + n > text.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(text[i + k]);
    if ((b & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  code_point = cp;
  return n;
}

}  // namespace

std::string terminal_safe(std::string_view text, Newlines newlines) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      if (c == '\n' && newlines == Newlines::kKeep) out += '\n';
      else if (c == '\n') out += "\\n";
      else if (c == '\t') out += "\\t";
      else if (c == '\r') out += "\\r";
      else if (c == 0x1b) out += "\\e";
      else if (c < 0x20 || c == 0x7f) append_hex_escape(out, c);
      else out += static_cast<char>(c);
      ++i;
      continue;
    }
    uint32_t cp = 0;
    const size_t n = utf8_length(text, i, cp);
    if (n == 0) {
      append_hex_escape(out, c);
      ++i;
    } else if (cp <= 0x9f) {  // a C1 control
      const auto byte = static_cast<unsigned char>(cp);
      out += "\\u00" + hex_encode(std::span(&byte, 1));
      i += n;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

}  // namespace plugboard
