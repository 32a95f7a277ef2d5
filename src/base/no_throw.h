// The last line of defence at a public entry point: whatever a call throws (std::bad_alloc, a
// std::filesystem_error, a std::length_error from a size taken out of a hostile file, anything else)
// comes back as an error value, never as an exception into the caller. A binding that embeds
// plugboard (the Elixir NIF: an exception into the VM kills it) relies on this; the entry points that
// use it are declared noexcept, so a throw that slipped past would end in std::terminate, which the
// tests (tests/no_throw_test.cpp) would see, rather than in the caller's stack.
#pragma once

#include <exception>
#include <new>
#include <string>
#include <string_view>
#include <type_traits>

#include "base/status.h"

namespace plugboard {

// Calls f() (which returns an Expected<T> or a Status) and turns an exception into an error naming
// `what` ("boot", "reading bundle app-plugins"): RESOURCE_EXHAUSTED for bad_alloc, INTERNAL for
// anything else.
template <class F>
auto no_throw(std::string_view what, F&& f) noexcept -> std::invoke_result_t<F> {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return make_error(Code::kResourceExhausted, std::string(what) + ": out of memory");
  } catch (const std::exception& e) {
    return make_error(Code::kInternal, std::string(what) + ": unexpected exception: " + e.what());
  } catch (...) {
    return make_error(Code::kInternal, std::string(what) + ": unexpected exception of unknown type");
  }
}

}  // namespace plugboard
