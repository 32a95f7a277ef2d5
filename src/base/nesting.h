// A bound on how deeply a text nests its brackets, checked before a recursive parser sees it.
//
// The plugins' MLIR parser and a JSON parser both recurse once per nesting level, so a program with an
// attribute 20,000 '[' deep overflows the stack of whatever thread parses it. check_nesting scans the
// text once, without recursion, counting the opening brackets of the syntax outside string literals
// (and, for MLIR, outside comments and '->'), and refuses the first one past the limit, naming where.
#pragma once

#include <cstddef>
#include <string_view>

#include "base/status.h"

namespace plugboard {

enum class Syntax {
  kJson,  // [ ] { }, strings in "..." with backslash escapes
  kMlir,  // ( ) [ ] { } < >, strings in "...", // comments to the end of the line, '->' is no bracket
};

// Deep enough for any program or manifest a tool writes (JAX's deepest real programs stay below 100);
// shallow enough that the plugins' parsers stay far from their stack's end (checked in the tests).
inline constexpr size_t kMaxNesting = 256;

// INVALID_ARGUMENT "<what>: nesting deeper than <limit> levels at line L, column C".
Status check_nesting(std::string_view text, Syntax syntax, std::string_view what, size_t limit = kMaxNesting);

}  // namespace plugboard
