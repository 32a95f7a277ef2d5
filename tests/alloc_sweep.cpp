// The failing allocator behind alloc_sweep.h: this file replaces the global operator new of the
// binary it is linked into (libplugboard.so's allocations included: they resolve to it).
#include "alloc_sweep.h"

#include <cstdlib>
#include <new>

namespace {

thread_local long t_countdown = 0;  // > 0: armed; the allocation that takes it to 0 fails
thread_local bool t_fired = false;

void* allocate(std::size_t n) {
  if (t_countdown > 0 && --t_countdown == 0) {
    t_fired = true;
    throw std::bad_alloc();
  }
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}

}  // namespace

void* operator new(std::size_t n) { return allocate(n); }
void* operator new[](std::size_t n) { return allocate(n); }
// The nothrow forms too (std::stable_sort's temporary buffer uses them and frees through the plain
// operator delete): all of a kind from one allocator, or ASan reports a mismatch.
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return allocate(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return allocate(n);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace plugboard::testing {

void disarm() { t_countdown = 0; }
void rearm(long n) { t_countdown = n; }

SweepResult sweep(const std::function<bool()>& call, long max_calls) {
  SweepResult r;
  for (long n = 1; n <= max_calls; ++n) {
    t_fired = false;
    t_countdown = n;
    bool ok = false;
    try {
      ok = call();
    } catch (...) {
      t_countdown = 0;
      ADD_FAILURE() << "an exception escaped with allocation " << n << " failing";
      return r;
    }
    t_countdown = 0;
    ++r.calls;
    if (!t_fired) {
      EXPECT_TRUE(ok) << "the call without a failed allocation must succeed";
      return r;
    }
    if (!ok) ++r.errors;
  }
  ADD_FAILURE() << "the sweep did not finish in " << max_calls << " calls";
  return r;
}

}  // namespace plugboard::testing
