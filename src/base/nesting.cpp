#include "base/nesting.h"

#include <string>

namespace plugboard {

Status check_nesting(std::string_view text, Syntax syntax, std::string_view what, size_t limit) {
  const bool mlir = syntax == Syntax::kMlir;
  size_t depth = 0;
  size_t line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    switch (c) {
      case '\n':
        ++line;
        line_start = i + 1;
        break;
      case '"':  // skip the string literal, escapes included
        for (++i; i < text.size() && text[i] != '"'; ++i) {
          if (text[i] == '\\') ++i;
          else if (text[i] == '\n') ++line, line_start = i + 1;
        }
        break;
      case '/':
        if (mlir && i + 1 < text.size() && text[i + 1] == '/') {
          while (i < text.size() && text[i] != '\n') ++i;
          --i;  // let the newline be counted
        }
        break;
      case '-':
        if (mlir && i + 1 < text.size() && text[i + 1] == '>') ++i;
        break;
      case '(':
      case '<':
        if (!mlir) break;
        [[fallthrough]];
      case '[':
      case '{':
        if (++depth > limit) {
          return invalid_argument(std::string(what) + ": nesting deeper than " + std::to_string(limit) +
                                  " levels at line " + std::to_string(line) + ", column " +
                                  std::to_string(i - line_start + 1) + " (refused before parsing)");
        }
        break;
      case ')':
      case '>':
        if (!mlir) break;
        [[fallthrough]];
      case ']':
      case '}':
        if (depth > 0) --depth;
        break;
      default:
        break;
    }
  }
  return ok();
}

}  // namespace plugboard
