// Erlang terms for the NIF: atoms, binaries, strings, structs and the error value every NIF returns
// on failure. Nothing here knows about plugboard's objects; resources.h and the nif_*.cpp files
// build on it.
#pragma once

#include <erl_nif.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "plugboard/dtype.h"
#include "plugboard/status.h"

namespace plugboard::nif {

// The longest time-out an option takes, in ms: Erlang's own limit for `receive ... after`.
inline constexpr int64_t kMaxTimeoutMs = 4'294'967'295;
// Copies of more bytes than this (about 0.1 ms) are done on a dirty scheduler.
inline constexpr size_t kDirtyCopyBytes = 1 << 20;
// True on a normal scheduler (where a NIF must return within a millisecond).
inline bool on_normal_scheduler() { return enif_thread_type() == ERL_NIF_THR_NORMAL_SCHEDULER; }

// A process-independent environment (for messages sent from plugboard's threads, and for terms kept
// beyond one NIF call). Owns what it allocates; freed with it.
class OwnedEnv {
 public:
  OwnedEnv() : env_(enif_alloc_env()) {}
  ~OwnedEnv() {
    if (env_) enif_free_env(env_);
  }
  OwnedEnv(const OwnedEnv&) = delete;
  OwnedEnv& operator=(const OwnedEnv&) = delete;
  ErlNifEnv* get() const { return env_; }
  explicit operator bool() const { return env_ != nullptr; }

 private:
  ErlNifEnv* env_;
};

// Sends `message` (built in `env`) from a thread that is not a scheduler; `env` is cleared.
// False when the process is gone.
bool send_from_thread(const ErlNifPid& to, OwnedEnv& env, ERL_NIF_TERM message);

ERL_NIF_TERM atom(ErlNifEnv* env, std::string_view name);
ERL_NIF_TERM make_string(ErlNifEnv* env, std::string_view text);  // an Elixir string (UTF-8 binary)
ERL_NIF_TERM make_bytes(ErlNifEnv* env, std::span<const std::byte> bytes);
ERL_NIF_TERM make_ok(ErlNifEnv* env, ERL_NIF_TERM value);
ERL_NIF_TERM make_list(ErlNifEnv* env, const std::vector<ERL_NIF_TERM>& items);
// A struct: `%Module{key: value, ...}` (module as an atom name: "Elixir.Plugboard.Buffer").
ERL_NIF_TERM make_struct(ErlNifEnv* env, const char* module,
                         std::initializer_list<std::pair<const char*, ERL_NIF_TERM>> fields);
ERL_NIF_TERM make_nil(ErlNifEnv* env);
template <class T>
ERL_NIF_TERM make_optional(ErlNifEnv* env, const std::optional<T>& v, ERL_NIF_TERM (*make)(ErlNifEnv*, const T&)) {
  return v ? make(env, *v) : make_nil(env);
}

// `%Plugboard.Error{code: :invalid_argument, message: "..."}`, the message with its context.
ERL_NIF_TERM make_error_struct(ErlNifEnv* env, const Error& error);
// `{:error, %Plugboard.Error{}}`
ERL_NIF_TERM make_error(ErlNifEnv* env, const Error& error);
ERL_NIF_TERM make_error(ErlNifEnv* env, Code code, std::string message);
// `:ok` or `{:error, %Plugboard.Error{}}`
ERL_NIF_TERM make_status(ErlNifEnv* env, const Status& status);

// dtype atoms are plugboard's names (:f32, :bf16, :bool, ...); shapes are tuples of sizes.
ERL_NIF_TERM make_dtype(ErlNifEnv* env, DType dtype);
ERL_NIF_TERM make_shape(ErlNifEnv* env, std::span<const int64_t> dims);
// `%Plugboard.HostTensor{data: binary, dtype: atom, shape: tuple}`
ERL_NIF_TERM make_host_tensor(ErlNifEnv* env, DType dtype, std::span<const int64_t> dims,
                              std::span<const std::byte> bytes);

// Readers: an error names `what` (the argument) and says what it expected.
Expected<std::string> get_string(ErlNifEnv* env, ERL_NIF_TERM term, std::string_view what);
Expected<std::optional<std::string>> get_optional_string(ErlNifEnv* env, ERL_NIF_TERM term, std::string_view what);
Expected<std::vector<std::string>> get_string_list(ErlNifEnv* env, ERL_NIF_TERM term, std::string_view what);
Expected<int64_t> get_int(ErlNifEnv* env, ERL_NIF_TERM term, std::string_view what);
// An integer in lo..hi, checked before any narrowing (a bignum is refused as out of range).
Expected<int64_t> get_int_in(ErlNifEnv* env, ERL_NIF_TERM term, std::string_view what, int64_t lo, int64_t hi);
// A non-negative integer of up to 64 bits (a device address), checked before any narrowing.
Expected<uint64_t> get_uint64(ErlNifEnv* env, ERL_NIF_TERM term, std::string_view what);
// A file-system path: a string without NUL bytes (the C library would stop reading at the first).
Expected<std::string> get_path(ErlNifEnv* env, ERL_NIF_TERM term, std::string_view what);
Expected<std::vector<int64_t>> get_int_list(ErlNifEnv* env, ERL_NIF_TERM term, std::string_view what);
Expected<bool> get_bool(ErlNifEnv* env, ERL_NIF_TERM term, std::string_view what);
Expected<std::optional<bool>> get_optional_bool(ErlNifEnv* env, ERL_NIF_TERM term, std::string_view what);
Expected<DType> get_dtype(ErlNifEnv* env, ERL_NIF_TERM term, std::string_view what);
Expected<std::vector<int64_t>> get_shape(ErlNifEnv* env, ERL_NIF_TERM term, std::string_view what);
Expected<ErlNifPid> get_pid(ErlNifEnv* env, ERL_NIF_TERM term, std::string_view what);
Expected<ErlNifBinary> get_binary(ErlNifEnv* env, ERL_NIF_TERM term, std::string_view what);
bool is_nil(ErlNifEnv* env, ERL_NIF_TERM term);
// A map's value under an atom key, or nullopt.
std::optional<ERL_NIF_TERM> map_get(ErlNifEnv* env, ERL_NIF_TERM map, const char* key);

}  // namespace plugboard::nif
