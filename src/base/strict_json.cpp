#include "base/strict_json.h"

#include <set>
#include <vector>

#include "base/hex.h"
#include "base/nesting.h"

namespace plugboard::strict_json {
namespace {

std::unexpected<Error> bad_field(std::string_view where, std::string_view key, std::string_view problem) {
  std::string field(where);
  if (!key.empty()) field += (field.empty() ? "" : ".") + std::string(key);
  return invalid_argument(field + " " + std::string(problem));
}

std::string field_name(std::string_view where, std::string_view key) {
  return where.empty() ? std::string(key) : std::string(where) + "." + std::string(key);
}

}  // namespace

Expected<json> parse(std::string_view text, std::string_view what, bool want_object) {
  PB_RETURN_IF_ERROR(check_nesting(text, Syntax::kJson, what));
  // One set of keys per open object; a key seen twice in the same object is refused (a JSON reader
  // that keeps the last one lets two tools read two different manifests out of one file).
  std::vector<std::set<std::string>> open_objects;
  std::optional<std::string> duplicate;
  auto callback = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start: open_objects.emplace_back(); break;
      case json::parse_event_t::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        break;
      case json::parse_event_t::key:
        if (!open_objects.empty() && parsed.is_string()) {
          const std::string& key = parsed.get_ref<const std::string&>();
          if (!open_objects.back().insert(key).second && !duplicate) duplicate = key;
        }
        break;
      default: break;
    }
    return true;
  };
  json doc;
  try {
    doc = json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/true);
  } catch (const json::exception& e) {
    return invalid_argument(std::string(what) + " is not valid JSON: " + e.what());
  } catch (const std::bad_alloc&) {
    return make_error(Code::kResourceExhausted, std::string(what) + ": out of memory while parsing");
  }
  if (duplicate) return invalid_argument(std::string(what) + " has the key \"" + *duplicate + "\" twice in one object");
  if (want_object && !doc.is_object()) return invalid_argument(std::string(what) + " must hold a JSON object");
  return doc;
}

Status check_text(std::string_view text, std::string_view where, Text rule) {
  if (rule == Text::kAny) return ok();
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) {
      return invalid_argument(std::string(where) + " holds the control character " +
                              (c == 0 ? std::string("NUL") : "0x" + hex_encode(std::span(&c, 1))) +
                              " at byte " + std::to_string(i) + ": refused");
    }
  }
  return ok();
}

Expected<std::string> as_string(const json& v, std::string_view where, Text rule) {
  if (!v.is_string()) return bad_field(where, "", "must be a string");
  const std::string& s = v.get_ref<const std::string&>();
  PB_RETURN_IF_ERROR(check_text(s, where, rule));
  return s;
}

Expected<int64_t> as_int(const json& v, std::string_view where, int64_t min, int64_t max) {
  int64_t value = 0;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return bad_field(where, "", "is " + std::to_string(u) + ", out of range [" + std::to_string(min) + ", " +
                                      std::to_string(max) + "]");
    }
    value = static_cast<int64_t>(u);
  } else if (v.is_number_integer()) {
    value = v.get<int64_t>();
  } else {
    return bad_field(where, "", "must be an integer");
  }
  if (value < min || value > max) {
    return bad_field(where, "", "is " + std::to_string(value) + ", out of range [" + std::to_string(min) + ", " +
                                    std::to_string(max) + "]");
  }
  return value;
}

Expected<uint64_t> as_uint(const json& v, std::string_view where, uint64_t max) {
  if (!v.is_number_integer()) return bad_field(where, "", "must be a non-negative integer");
  if (!v.is_number_unsigned()) return bad_field(where, "", "must be a non-negative integer, not " + v.dump());
  const uint64_t u = v.get<uint64_t>();
  if (u > max) return bad_field(where, "", "is " + std::to_string(u) + ", more than " + std::to_string(max));
  return u;
}

namespace {
Expected<const json*> field(const json& obj, std::string_view key, std::string_view where) {
  if (!obj.is_object()) return bad_field(where, "", "must be an object");
  auto it = obj.find(key);
  if (it == obj.end()) return bad_field(where, key, "is missing");
  return &*it;
}
}  // namespace

Expected<std::string> get_string(const json& obj, std::string_view key, std::string_view where, Text rule) {
  PB_ASSIGN_OR_RETURN(const json* v, field(obj, key, where));
  return as_string(*v, field_name(where, key), rule);
}

Expected<std::optional<std::string>> get_optional_string(const json& obj, std::string_view key,
                                                         std::string_view where, Text rule) {
  if (!obj.is_object()) return bad_field(where, "", "must be an object");
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::optional<std::string>();
  PB_ASSIGN_OR_RETURN(std::string s, as_string(*it, field_name(where, key), rule));
  return std::optional<std::string>(std::move(s));
}

Expected<int64_t> get_int(const json& obj, std::string_view key, std::string_view where, int64_t min, int64_t max) {
  PB_ASSIGN_OR_RETURN(const json* v, field(obj, key, where));
  return as_int(*v, field_name(where, key), min, max);
}

Expected<uint64_t> get_uint(const json& obj, std::string_view key, std::string_view where, uint64_t max) {
  PB_ASSIGN_OR_RETURN(const json* v, field(obj, key, where));
  return as_uint(*v, field_name(where, key), max);
}

Expected<bool> get_bool(const json& obj, std::string_view key, std::string_view where) {
  PB_ASSIGN_OR_RETURN(const json* v, field(obj, key, where));
  if (!v->is_boolean()) return bad_field(where, key, "must be true or false");
  return v->get<bool>();
}

Expected<const json*> get_container(const json& obj, std::string_view key, std::string_view where,
                                    json::value_t kind) {
  PB_ASSIGN_OR_RETURN(const json* v, field(obj, key, where));
  if (v->type() != kind) return bad_field(where, key, kind == json::value_t::array ? "must be a list" : "must be an object");
  return v;
}

}  // namespace plugboard::strict_json
