// Checks on what a plugin hands back: every pointer and count a PJRT function writes into its
// argument struct is checked before it is read, so that a plugin's null list with a count above 0, a
// null string with a size, or an absurd count comes back as an error value naming the plugin and the
// function instead of a crash. (A non-null pointer cannot be checked further: it is the plugin's word.)
//
// Only the layers below the public API include this header (it includes abi/api.h).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "abi/api.h"
#include "base/status.h"

namespace plugboard::plugin_output {

// Bounds no real plugin comes near; beyond them the count is garbage.
inline constexpr size_t kMaxListEntries = size_t{1} << 20;   // devices, attributes, list values
inline constexpr size_t kMaxStringBytes = size_t{1} << 30;   // names, versions, descriptions

inline Error bad_output(const abi::Api& api, std::string_view function, const std::string& what) {
  return Error(Code::kInternal, api.label() + ": " + std::string(function) + " handed back " + what +
                                    "; refusing to read it");
}

// `count` entries at `data`: a null `data` is allowed only with a count of 0.
template <class T>
Expected<std::span<T>> list(const abi::Api& api, std::string_view function, std::string_view field, T* data,
                            size_t count, size_t max = kMaxListEntries) {
  if (count == 0) return std::span<T>();
  if (data == nullptr)
    return std::unexpected(bad_output(api, function, "a null " + std::string(field) + " with a count of " + std::to_string(count)));
  if (count > max)
    return std::unexpected(bad_output(api, function, std::string(field) + " with a count of " + std::to_string(count) +
                                                         " (more than " + std::to_string(max) + ")"));
  return std::span<T>(data, count);
}

// A string of `size` bytes at `data`: a null `data` is allowed only with a size of 0.
inline Expected<std::string_view> string(const abi::Api& api, std::string_view function, std::string_view field,
                                         const char* data, size_t size) {
  if (size == 0) return std::string_view();
  if (data == nullptr)
    return std::unexpected(bad_output(api, function, "a null " + std::string(field) + " with a size of " + std::to_string(size)));
  if (size > kMaxStringBytes)
    return std::unexpected(bad_output(api, function, std::string(field) + " of " + std::to_string(size) + " bytes"));
  return std::string_view(data, size);
}

// A pointer that must not be null (a handle the caller passes on to the plugin next).
template <class T>
Expected<T*> non_null(const abi::Api& api, std::string_view function, std::string_view field, T* p) {
  if (p == nullptr) return std::unexpected(bad_output(api, function, "a null " + std::string(field)));
  return p;
}

}  // namespace plugboard::plugin_output
