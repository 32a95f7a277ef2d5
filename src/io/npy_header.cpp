// The .npy header: the descr <-> dtype table, a small reader for the Python dict literal the header
// holds, its fields, the preamble (magic, version, length) and the layout they declare.
#include "io/npy_format.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <system_error>

#include "base/hex.h"
#include "io/npy.h"

namespace plugboard::io::npy_format {

// The element bytes are copied as they are, which is only right on a little-endian host.
static_assert(std::endian::native == std::endian::little, "plugboard's .npy code assumes a little-endian host");

std::string single_quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

std::unexpected<Error> npy_error(std::string_view source, Code code, std::string what) {
  return make_error(code, std::string(source) + ": " + what);
}

// Python's repr of a tuple of ints: "()", "(5,)", "(2, 3)".
std::string shape_repr(const std::vector<int64_t>& dims) {
  std::string out = "(";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(dims[i]);
  }
  if (dims.size() == 1) out += ",";
  return out + ")";
}

namespace {

// ---- descr <-> dtype ----------------------------------------------------------------------------------

struct DescrEntry {
  DType type;
  char kind;  // numpy's kind character: b, i, u, f, c
};

// The dtypes a descr names by itself. bf16 and the f8 types have no descr of their own (they hide in
// '<u2' / '|u1'), so they are resolved against the caller's expected dtype instead.
constexpr std::array<DescrEntry, 14> kDescrTable{{
    {DType::kBool, 'b'}, {DType::kI8, 'i'},  {DType::kI16, 'i'}, {DType::kI32, 'i'}, {DType::kI64, 'i'},
    {DType::kU8, 'u'},   {DType::kU16, 'u'}, {DType::kU32, 'u'}, {DType::kU64, 'u'}, {DType::kF16, 'f'},
    {DType::kF32, 'f'},  {DType::kF64, 'f'}, {DType::kC64, 'c'}, {DType::kC128, 'c'},
}};

// The dtype whose bits a raw-bits dtype is stored as; the dtype itself otherwise.
DType storage_dtype(DType t) {
  switch (t) {
    case DType::kBF16: return DType::kU16;
    case DType::kF8E5M2:
    case DType::kF8E4M3FN: return DType::kU8;
    default: return t;
  }
}



// ---- a small reader for the header's Python dict literal ---------------------------------------------

// The few Python literal forms a .npy header can hold. Anything else is a parse error.
struct PyValue {
  enum class Kind { kString, kBool, kNone, kInt, kTuple, kList };
  Kind kind = Kind::kNone;
  std::string text;  // the literal as written, for messages
  std::string str;   // kString
  bool boolean = false;
  bool int_overflow = false;  // kInt that does not fit int64
  int64_t integer = 0;
  std::vector<PyValue> items;   // kTuple, kList
  bool trailing_comma = false;  // distinguishes "(5,)" (a tuple) from "(5)" (just 5)
};

class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : text_(text) {}

  // Parses "{ key: value, ... }" followed only by whitespace. On failure returns nullopt and leaves a
  // description in error().
  std::optional<std::vector<std::pair<std::string, PyValue>>> parse_dict() {
    std::vector<std::pair<std::string, PyValue>> entries;
    skip_space();
    if (!consume('{')) return fail_dict("expected '{' at the start");
    skip_space();
    while (!consume('}')) {
      PyValue key;
      if (!parse_value(key)) return std::nullopt;
      if (key.kind != PyValue::Kind::kString) return fail_dict("a key is not a string: " + key.text);
      skip_space();
      if (!consume(':')) return fail_dict("expected ':' after key " + single_quoted(key.str));
      PyValue value;
      if (!parse_value(value)) return std::nullopt;
      entries.emplace_back(key.str, std::move(value));
      skip_space();
      if (consume(',')) {
        skip_space();
        continue;
      }
      skip_space();
      if (!consume('}')) return fail_dict("expected ',' or '}' after the value of " + single_quoted(key.str));
      break;
    }
    skip_space();
    if (pos_ != text_.size()) return fail_dict("unexpected text after the closing '}'");
    return entries;
  }

  const std::string& error() const { return error_; }

 private:
  // Records what went wrong and where; returns false so callers can `return fail(...)`.
  bool fail(std::string what) {
    error_ = what + " (at offset " + std::to_string(pos_) + ")";
    return false;
  }
  std::nullopt_t fail_dict(std::string what) {
    fail(std::move(what));
    return std::nullopt;
  }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }
  bool consume(char c) {
    if (peek() != c || at_end()) return false;
    ++pos_;
    return true;
  }
  void skip_space() {
    while (!at_end() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }
  bool consume_word(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  bool parse_value(PyValue& out) {
    skip_space();
    const size_t start = pos_;
    const char c = peek();
    bool ok;
    if (c == '\'' || c == '"') {
      ok = parse_string(out);
    } else if (c == '(' || c == '[') {
      ok = parse_sequence(out);
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      ok = parse_int(out);
    } else if (consume_word("True") || consume_word("False")) {
      out.kind = PyValue::Kind::kBool;
      out.boolean = text_[start] == 'T';
      ok = true;
    } else if (consume_word("None")) {
      out.kind = PyValue::Kind::kNone;
      ok = true;
    } else {
      return fail(at_end() ? "the header ends where a value should start"
                          : "unexpected character " + single_quoted(std::string(1, c)));
    }
    if (ok) out.text = std::string(text_.substr(start, pos_ - start));
    return ok;
  }

  bool parse_string(PyValue& out) {
    const char quote = text_[pos_++];
    out.kind = PyValue::Kind::kString;
    while (!at_end() && text_[pos_] != quote) {
      if (text_[pos_] == '\\' && pos_ + 1 < text_.size()) ++pos_;  // keep the escaped character as is
      out.str += text_[pos_++];
    }
    if (!consume(quote)) return fail("unterminated string");
    return true;
  }

  bool parse_int(PyValue& out) {
    out.kind = PyValue::Kind::kInt;
    const char* first = text_.data() + pos_;
    const char* last = text_.data() + text_.size();
    auto [end, ec] = std::from_chars(first, last, out.integer);
    if (end == first) return fail("malformed integer");
    if (ec == std::errc::result_out_of_range) out.int_overflow = true;
    pos_ += static_cast<size_t>(end - first);
    consume('L');  // Python 2 wrote long integers as "5L"
    return true;
  }

  bool parse_sequence(PyValue& out) {
    // A real header nests one level; the cap keeps a hostile file from exhausting the stack.
    if (++depth_ > kMaxDepth) return fail("sequences nested too deeply");
    const char close = text_[pos_] == '(' ? ')' : ']';
    out.kind = close == ')' ? PyValue::Kind::kTuple : PyValue::Kind::kList;
    ++pos_;
    skip_space();
    while (!consume(close)) {
      PyValue item;
      if (!parse_value(item)) return false;
      out.items.push_back(std::move(item));
      skip_space();
      out.trailing_comma = consume(',');
      skip_space();
      if (!out.trailing_comma && peek() != close)
        return fail(std::string("expected ',' or '") + close + "' in a sequence");
    }
    --depth_;
    return true;
  }

  static constexpr int kMaxDepth = 16;
  std::string_view text_;
  size_t pos_ = 0;
  int depth_ = 0;
  std::string error_;
};

// ---- header fields --------------------------------------------------------------------------------------

struct Header {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

std::string header_for_message(std::string_view text) {
  while (!text.empty() && (text.back() == ' ' || text.back() == '\n')) text.remove_suffix(1);
  constexpr size_t kMax = 200;
  std::string out(text.substr(0, kMax));
  if (text.size() > kMax) out += "...";
  return out;
}

Expected<Header> parse_header(std::string_view text, std::string_view source) {
  HeaderParser parser(text);
  auto entries = parser.parse_dict();
  if (!entries)
    return npy_error(source, Code::kInvalidArgument,
                     "malformed header: " + parser.error() + " in " + header_for_message(text));

  const PyValue* descr = nullptr;
  const PyValue* fortran = nullptr;
  const PyValue* shape = nullptr;
  for (const auto& [key, value] : *entries) {
    const PyValue** slot = key == "descr" ? &descr : key == "fortran_order" ? &fortran : key == "shape" ? &shape : nullptr;
    if (!slot) return npy_error(source, Code::kInvalidArgument, "header has an unexpected key " + single_quoted(key));
    if (*slot) return npy_error(source, Code::kInvalidArgument, "header repeats the key " + single_quoted(key));
    *slot = &value;
  }
  const std::array<std::pair<const PyValue*, std::string_view>, 3> required{
      {{descr, "descr"}, {fortran, "fortran_order"}, {shape, "shape"}}};
  for (const auto& [value, name] : required)
    if (!value) return npy_error(source, Code::kInvalidArgument, "header has no " + single_quoted(name) + " key");

  Header header;
  if (descr->kind != PyValue::Kind::kString)
    return npy_error(source, Code::kInvalidArgument,
                     "unsupported descr " + descr->text + ": structured dtypes are not supported");
  header.descr = descr->str;

  if (fortran->kind != PyValue::Kind::kBool)
    return npy_error(source, Code::kInvalidArgument, "fortran_order is " + fortran->text + ", not True or False");
  if (fortran->boolean)
    return npy_error(source, Code::kInvalidArgument, "fortran_order is True: Fortran-order arrays are not supported");

  const bool is_tuple = shape->kind == PyValue::Kind::kTuple && (shape->items.size() != 1 || shape->trailing_comma);
  if (!is_tuple)
    return npy_error(source, Code::kInvalidArgument, "malformed shape " + shape->text + ": not a tuple");
  for (const PyValue& dim : shape->items) {
    if (dim.kind != PyValue::Kind::kInt)
      return npy_error(source, Code::kInvalidArgument,
                       "malformed shape " + shape->text + ": " + dim.text + " is not an integer");
    if (dim.int_overflow || dim.integer < 0)
      return npy_error(source, Code::kInvalidArgument,
                       "malformed shape " + shape->text + ": dimension " + dim.text +
                           (dim.int_overflow ? " is out of range" : " is negative"));
    header.shape.push_back(dim.integer);
  }
  return header;
}

// Maps a descr to the dtype it names by itself (u16 for '<u2', u8 for '|u1').
Expected<DType> descr_dtype(std::string_view descr, std::string_view source) {
  const auto unsupported = [&](std::string why) {
    return npy_error(source, Code::kInvalidArgument, "unsupported descr " + single_quoted(descr) + ": " + why);
  };
  if (descr.size() < 3) return unsupported("not a simple numeric type");
  const char order = descr[0];
  const char kind = descr[1];
  size_t size = 0;
  const char* first = descr.data() + 2;
  const char* last = descr.data() + descr.size();
  auto [end, ec] = std::from_chars(first, last, size);
  if (ec != std::errc() || end != last || std::string_view("<>|=").find(order) == std::string_view::npos)
    return unsupported("not a simple numeric type");

  const auto* entry = std::ranges::find_if(kDescrTable, [&](const DescrEntry& e) {
    return e.kind == kind && dtype_size(e.type) == size;
  });
  if (entry == kDescrTable.end()) {
    if (kind == 'V')
      return unsupported("opaque void data (bf16 and f8 arrays must be stored as raw bits in '<u2' / '|u1')");
    return unsupported("plugboard reads only b1, i1-i8, u1-u8, f2, f4, f8, c8 and c16");
  }
  if (size > 1 && order == '>')
    return npy_error(source, Code::kInvalidArgument,
                     "big-endian data (descr " + single_quoted(descr) + ") is not supported; store it little-endian");
  if (size > 1 && order == '|') return unsupported("a multi-byte type needs a byte order");
  return entry->type;
}

// Combines the descr's dtype with the caller's expectation (see parse_npy).
Expected<DType> resolve_dtype(DType from_descr, std::string_view descr, std::optional<DType> expected,
                              std::string_view source) {
  if (!expected || *expected == from_descr) return from_descr;
  if (storage_dtype(*expected) == from_descr && *expected != from_descr) return *expected;
  std::string what = "descr " + single_quoted(descr) + " is " + dtype_name(from_descr) + " but " +
                     dtype_name(*expected) + " was expected";
  if (const std::string want = npy_descr(*expected); !want.empty()) what += " (descr " + single_quoted(want) + ")";
  return npy_error(source, Code::kInvalidArgument, what);
}

}  // namespace

// The magic, the version and the header length, from the file's first min(12, file_size) bytes.
// Returns the preamble's size and the header's length.
Expected<std::pair<size_t, size_t>> parse_preamble(std::span<const std::byte> first, uint64_t file_size,
                                                   std::string_view source) {
  const auto byte_at = [&](size_t i) { return static_cast<unsigned char>(first[i]); };
  const size_t magic_seen = std::min(first.size(), kMagic.size());
  for (size_t i = 0; i < magic_seen; ++i) {
    if (byte_at(i) != static_cast<unsigned char>(kMagic[i])) {
      std::string found;
      for (size_t j = 0; j < magic_seen; ++j) append_hex_escape(found, byte_at(j));
      return npy_error(source, Code::kInvalidArgument,
                       "not a .npy file: bad magic (expected \\x93NUMPY, found " + found + ")");
    }
  }
  if (file_size < 8 || first.size() < 8)
    return npy_error(source, Code::kInvalidArgument,
                     "header truncated: the file is " + std::to_string(file_size) +
                         " bytes, too short for the magic and version");
  const unsigned major = byte_at(6), minor = byte_at(7);
  size_t hlen_bytes;
  if (major == 1 && minor == 0) {
    hlen_bytes = 2;
  } else if ((major == 2 || major == 3) && minor == 0) {
    hlen_bytes = 4;
  } else {
    return npy_error(source, Code::kInvalidArgument,
                     "unsupported .npy version " + std::to_string(major) + "." + std::to_string(minor) +
                         " (plugboard reads 1.0, 2.0 and 3.0)");
  }
  const size_t preamble = 8 + hlen_bytes;
  if (file_size < preamble || first.size() < preamble)
    return npy_error(source, Code::kInvalidArgument,
                     "header truncated: the file is " + std::to_string(file_size) + " bytes, the preamble needs " +
                         std::to_string(preamble));
  size_t hlen = 0;
  for (size_t i = 0; i < hlen_bytes; ++i) hlen |= static_cast<size_t>(byte_at(8 + i)) << (8 * i);
  if (hlen > file_size - preamble)
    return npy_error(source, Code::kInvalidArgument,
                     "header truncated: the header length says " + std::to_string(hlen) + " bytes, only " +
                         std::to_string(file_size - preamble) + " follow");
  if (hlen > kMaxHeaderBytes)
    return npy_error(source, Code::kInvalidArgument,
                     "the header length says " + std::to_string(hlen) + " bytes, more than the limit of " +
                         std::to_string(kMaxHeaderBytes));
  return std::pair{preamble, hlen};
}

// The header's dict, checked against the file's size: the data after it must be exactly what the header
// declares (DATA_LOSS for less, INVALID_ARGUMENT for trailing bytes).
Expected<Layout> parse_layout(std::string_view header_text, size_t data_offset, uint64_t file_size,
                              std::string_view source, std::optional<DType> expected) {
  PB_ASSIGN_OR_RETURN(Header header, parse_header(header_text, source));
  PB_ASSIGN_OR_RETURN(DType from_descr, descr_dtype(header.descr, source));
  Layout layout;
  PB_ASSIGN_OR_RETURN(layout.dtype, resolve_dtype(from_descr, header.descr, expected, source));
  layout.dims = std::move(header.shape);
  layout.data_offset = data_offset;
  auto want = byte_size(layout.dtype, layout.dims);
  if (!want)
    return npy_error(source, Code::kInvalidArgument,
                     "malformed shape " + shape_repr(layout.dims) + ": too many elements (" + want.error().message() + ")");
  layout.data_bytes = *want;
  const uint64_t have = file_size - data_offset;
  const std::string sizes = "expects " + std::to_string(*want) + " bytes for " +
                            shape_string(layout.dtype, layout.dims) + ", file has " + std::to_string(have);
  if (have < *want) return npy_error(source, Code::kDataLoss, "data truncated: " + sizes);
  if (have > *want)
    return npy_error(source, Code::kInvalidArgument,
                     "trailing bytes after the data: " + sizes + " (" + std::to_string(have - *want) + " extra)");
  return layout;
}

}  // namespace plugboard::io::npy_format

namespace plugboard::io {

using namespace npy_format;

std::string npy_descr(DType t) {
  const DType storage = storage_dtype(t);
  const auto* entry = std::ranges::find(kDescrTable, storage, &DescrEntry::type);
  if (entry == kDescrTable.end()) return "";
  const size_t size = dtype_size(storage);
  return std::string(1, size == 1 ? '|' : '<') + entry->kind + std::to_string(size);
}

}  // namespace plugboard::io
