#include "terms.h"

#include <cctype>
#include <cstring>
#include <functional>
#include <limits>
#include <unordered_map>

namespace plugboard::nif {

bool send_from_thread(const ErlNifPid& to, OwnedEnv& env, ERL_NIF_TERM message) {
  return enif_send(nullptr, &to, env.get(), message) != 0;
}

namespace {
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
}  // namespace

// Atoms are the same term in every environment and are never freed: each thread remembers the ones
// it made (the atom table's lookup costs more than this map's).
ERL_NIF_TERM atom(ErlNifEnv* env, std::string_view name) {
  thread_local std::unordered_map<std::string, ERL_NIF_TERM, StringHash, std::equal_to<>> known;
  if (auto it = known.find(name); it != known.end()) return it->second;
  ERL_NIF_TERM a;
  if (!enif_make_existing_atom_len(env, name.data(), name.size(), &a, ERL_NIF_LATIN1))
    a = enif_make_atom_len(env, name.data(), name.size());
  known.emplace(std::string(name), a);
  return a;
}

ERL_NIF_TERM make_bytes(ErlNifEnv* env, std::span<const std::byte> bytes) {
  ERL_NIF_TERM term;
  unsigned char* data = enif_make_new_binary(env, bytes.size(), &term);
  if (!bytes.empty()) std::memcpy(data, bytes.data(), bytes.size());
  return term;
}

ERL_NIF_TERM make_string(ErlNifEnv* env, std::string_view text) {
  return make_bytes(env, std::as_bytes(std::span<const char>(text.data(), text.size())));
}

ERL_NIF_TERM make_ok(ErlNifEnv* env, ERL_NIF_TERM value) { return enif_make_tuple2(env, atom(env, "ok"), value); }

ERL_NIF_TERM make_list(ErlNifEnv* env, const std::vector<ERL_NIF_TERM>& items) {
  return enif_make_list_from_array(env, items.data(), static_cast<unsigned>(items.size()));
}

ERL_NIF_TERM make_nil(ErlNifEnv* env) { return atom(env, "nil"); }

ERL_NIF_TERM make_struct(ErlNifEnv* env, const char* module,
                         std::initializer_list<std::pair<const char*, ERL_NIF_TERM>> fields) {
  std::vector<ERL_NIF_TERM> keys, values;
  keys.reserve(fields.size() + 1);
  values.reserve(fields.size() + 1);
  keys.push_back(atom(env, "__struct__"));
  values.push_back(atom(env, module));
  for (const auto& [k, v] : fields) {
    keys.push_back(atom(env, k));
    values.push_back(v);
  }
  ERL_NIF_TERM map;
  enif_make_map_from_arrays(env, keys.data(), values.data(), keys.size(), &map);
  return map;
}

ERL_NIF_TERM make_error_struct(ErlNifEnv* env, const Error& error) {
  std::string code = code_name(error.code());
  for (char& c : code) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string message;
  const auto& context = error.context();
  for (auto it = context.rbegin(); it != context.rend(); ++it) message += *it + ": ";
  message += error.message();
  return make_struct(env, "Elixir.Plugboard.Error",
                     {{"__exception__", atom(env, "true")}, {"code", atom(env, code)}, {"message", make_string(env, message)}});
}

ERL_NIF_TERM make_error(ErlNifEnv* env, const Error& error) {
  return enif_make_tuple2(env, atom(env, "error"), make_error_struct(env, error));
}

ERL_NIF_TERM make_error(ErlNifEnv* env, Code code, std::string message) {
  return make_error(env, Error(code, std::move(message)));
}

ERL_NIF_TERM make_status(ErlNifEnv* env, const Status& status) {
  return status ? atom(env, "ok") : make_error(env, status.error());
}

ERL_NIF_TERM make_dtype(ErlNifEnv* env, DType dtype) { return atom(env, dtype_name(dtype)); }

ERL_NIF_TERM make_shape(ErlNifEnv* env, std::span<const int64_t> dims) {
  std::vector<ERL_NIF_TERM> items;
  items.reserve(dims.size());
  for (int64_t d : dims) items.push_back(enif_make_int64(env, d));
  return enif_make_tuple_from_array(env, items.data(), static_cast<unsigned>(items.size()));
}

ERL_NIF_TERM make_host_tensor(ErlNifEnv* env, DType dtype, std::span<const int64_t> dims,
                              std::span<const std::byte> bytes) {
  return make_struct(env, "Elixir.Plugboard.HostTensor",
                     {{"data", make_bytes(env, bytes)}, {"dtype", make_dtype(env, dtype)}, {"shape", make_shape(env, dims)}});
}

namespace {
std::unexpected<Error> expected_a(std::string_view what, std::string_view kind) {
  return invalid_argument(std::string(what) + " must be " + std::string(kind));
}
}  // namespace

Expected<ErlNifBinary> get_binary(ErlNifEnv* env, ERL_NIF_TERM term, std::string_view what) {
  ErlNifBinary bin;
  if (!enif_inspect_binary(env, term, &bin)) return expected_a(what, "a binary");
  return bin;
}

Expected<std::string> get_string(ErlNifEnv* env, ERL_NIF_TERM term, std::string_view what) {
  ErlNifBinary bin;
  if (enif_inspect_binary(env, term, &bin)) return std::string(reinterpret_cast<const char*>(bin.data), bin.size);
  char buf[256];
  if (enif_get_atom(env, term, buf, sizeof buf, ERL_NIF_LATIN1) > 0 && !is_nil(env, term)) return std::string(buf);
  return expected_a(what, "a string");
}

Expected<std::optional<std::string>> get_optional_string(ErlNifEnv* env, ERL_NIF_TERM term, std::string_view what) {
  if (is_nil(env, term)) return std::optional<std::string>();
  PB_ASSIGN_OR_RETURN(std::string s, get_string(env, term, what));
  return std::optional<std::string>(std::move(s));
}

Expected<std::vector<std::string>> get_string_list(ErlNifEnv* env, ERL_NIF_TERM term, std::string_view what) {
  std::vector<std::string> out;
  ERL_NIF_TERM head, tail = term;
  while (enif_get_list_cell(env, tail, &head, &tail)) {
    PB_ASSIGN_OR_RETURN(std::string s, get_string(env, head, std::string(what) + " element " + std::to_string(out.size())));
    out.push_back(std::move(s));
  }
  if (!enif_is_empty_list(env, tail)) return expected_a(what, "a list of strings");
  return out;
}

Expected<int64_t> get_int(ErlNifEnv* env, ERL_NIF_TERM term, std::string_view what) {
  return get_int_in(env, term, what, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
}

Expected<int64_t> get_int_in(ErlNifEnv* env, ERL_NIF_TERM term, std::string_view what, int64_t lo, int64_t hi) {
  ErlNifSInt64 v;
  double d;
  const bool integer = enif_is_number(env, term) && !enif_get_double(env, term, &d);
  if (enif_get_int64(env, term, &v) && v >= lo && v <= hi) return static_cast<int64_t>(v);
  const std::string range = std::to_string(lo) + ".." + std::to_string(hi);
  if (integer) return invalid_argument(std::string(what) + " is out of range: it must be an integer in " + range);
  return expected_a(what, "an integer in " + range);
}

Expected<uint64_t> get_uint64(ErlNifEnv* env, ERL_NIF_TERM term, std::string_view what) {
  ErlNifUInt64 v;
  double d;
  if (enif_get_uint64(env, term, &v)) return static_cast<uint64_t>(v);
  if (enif_is_number(env, term) && !enif_get_double(env, term, &d))
    return invalid_argument(std::string(what) + " is out of range: it must be an integer in 0..18446744073709551615");
  return expected_a(what, "a non-negative integer");
}

Expected<std::string> get_path(ErlNifEnv* env, ERL_NIF_TERM term, std::string_view what) {
  PB_ASSIGN_OR_RETURN(std::string path, get_string(env, term, what));
  if (path.find('\0') != std::string::npos)
    return invalid_argument(std::string(what) + " contains a NUL byte (at " + std::to_string(path.find('\0')) +
                            "): not a usable path");
  return path;
}

Expected<std::vector<int64_t>> get_int_list(ErlNifEnv* env, ERL_NIF_TERM term, std::string_view what) {
  std::vector<int64_t> out;
  ERL_NIF_TERM head, tail = term;
  while (enif_get_list_cell(env, tail, &head, &tail)) {
    PB_ASSIGN_OR_RETURN(int64_t v, get_int(env, head, std::string(what) + " element " + std::to_string(out.size())));
    out.push_back(v);
  }
  if (!enif_is_empty_list(env, tail)) return expected_a(what, "a list of integers");
  return out;
}

Expected<bool> get_bool(ErlNifEnv* env, ERL_NIF_TERM term, std::string_view what) {
  if (enif_is_identical(term, atom(env, "true"))) return true;
  if (enif_is_identical(term, atom(env, "false"))) return false;
  return expected_a(what, "true or false");
}

Expected<std::optional<bool>> get_optional_bool(ErlNifEnv* env, ERL_NIF_TERM term, std::string_view what) {
  if (is_nil(env, term)) return std::optional<bool>();
  PB_ASSIGN_OR_RETURN(bool b, get_bool(env, term, what));
  return std::optional<bool>(b);
}

Expected<DType> get_dtype(ErlNifEnv* env, ERL_NIF_TERM term, std::string_view what) {
  char buf[32];
  if (enif_get_atom(env, term, buf, sizeof buf, ERL_NIF_LATIN1) > 0)
    if (auto t = dtype_from_name(buf)) return *t;
  std::string known;
  for (DType t : all_dtypes()) known += (known.empty() ? ":" : ", :") + dtype_name(t);
  return invalid_argument(std::string(what) + " must be a dtype atom (one of " + known + ")");
}

Expected<std::vector<int64_t>> get_shape(ErlNifEnv* env, ERL_NIF_TERM term, std::string_view what) {
  int arity;
  const ERL_NIF_TERM* items;
  if (!enif_get_tuple(env, term, &arity, &items)) return expected_a(what, "a tuple of dimension sizes");
  std::vector<int64_t> dims;
  for (int i = 0; i < arity; ++i) {
    PB_ASSIGN_OR_RETURN(int64_t d, get_int_in(env, items[i], std::string(what) + ": dimension " + std::to_string(i), 0,
                                              std::numeric_limits<int64_t>::max()));
    dims.push_back(d);
  }
  return dims;
}

Expected<ErlNifPid> get_pid(ErlNifEnv* env, ERL_NIF_TERM term, std::string_view what) {
  ErlNifPid pid;
  if (!enif_get_local_pid(env, term, &pid)) return expected_a(what, "a local pid");
  return pid;
}

bool is_nil(ErlNifEnv* env, ERL_NIF_TERM term) { return enif_is_identical(term, atom(env, "nil")); }

std::optional<ERL_NIF_TERM> map_get(ErlNifEnv* env, ERL_NIF_TERM map, const char* key) {
  ERL_NIF_TERM value;
  if (enif_get_map_value(env, map, atom(env, key), &value)) return value;
  return std::nullopt;
}

}  // namespace plugboard::nif
