// The library's side of traces (include/plugboard/trace.h is the user's): spans opened at an
// instrumented site. Off, a site costs one relaxed atomic load and a branch (Scope's constructor and
// destructor, each arg() a branch on a flag already loaded); nothing is built, read or locked.
//
//   trace::Scope span("compile", "compile");          // this thread's track, from here to scope end
//   span.arg("program", program.name());             // only copied when tracing is on
//
//   trace::Deferred done("execute", "device");       // started now, finished on another thread
//   ... event.on_ready([d = std::move(done), track](Status) mutable { d.finish(track); });
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "plugboard/trace.h"

namespace plugboard::trace {

namespace internal {
extern std::atomic<bool> g_on;
extern std::atomic<uint64_t> g_session;

// A span that has started: what Deferred and Scope carry while it runs.
struct Open {
  Open(const char* name, const char* category, int64_t start_ns);
  const char* name;
  const char* category;
  int64_t start_ns;
  uint64_t session;
  std::vector<Arg> args;
};
// Keeps `span` ending at end_ns on `track` (0: the calling thread's), if its trace is still recording.
void commit(Open&& span, int64_t end_ns, Track track) noexcept;
void add(Open& span, const char* key, Value value) noexcept;

// Work tied to a trace's life, from a layer above (a plugin's own profiler): started() runs when a
// trace starts, after recording began; stopping() when one is asked to stop, before recording ends,
// so that what it records is in the trace. Both on the thread calling start() / stop(), never while
// the recorder holds a lock of its own.
class Collector {
 public:
  virtual void started() noexcept = 0;
  virtual void stopping() noexcept = 0;
  // After recording has ended: what started since stopping() (a race with stop()) is ended here.
  virtual void stopped() noexcept {}

 protected:
  ~Collector() = default;
};
// Registers `collector` (never unregistered: it must live as long as the process).
void add_collector(Collector* collector) noexcept;
// A note for the trace being recorded (Trace::notes); nothing when none is.
void note(std::string text) noexcept;
// The trace's clock pair (CLOCK_MONOTONIC, CLOCK_REALTIME) read at its start; {0, 0} when none runs.
struct ClockPair {
  int64_t monotonic_ns = 0, realtime_ns = 0;
};
ClockPair clock_pair() noexcept;
}  // namespace internal

// Whether tracing is on: one relaxed load, what every site pays when it is off.
inline bool on() noexcept { return internal::g_on.load(std::memory_order_relaxed); }

// A span started now (when tracing is on), to be finished once, on any thread and track. Movable
// into a continuation; dropped unfinished, it records nothing. `name` and `category` are literals.
class Deferred {
 public:
  Deferred() = default;
  Deferred(const char* name, const char* category) noexcept {
    if (on()) begin(name, category, now());
  }
  // Started at `start_ns` (another span's start) instead of now.
  Deferred(const char* name, const char* category, int64_t start_ns) noexcept {
    if (on()) begin(name, category, start_ns);
  }
  Deferred(Deferred&&) noexcept = default;
  Deferred& operator=(Deferred&&) noexcept = default;

  explicit operator bool() const noexcept { return open_ != nullptr; }
  int64_t start_ns() const noexcept { return open_ ? open_->start_ns : 0; }

  Deferred& arg(const char* key, int64_t v) noexcept {
    if (open_) internal::add(*open_, key, v);
    return *this;
  }
  Deferred& arg(const char* key, std::string_view v) noexcept {
    if (open_) internal::add(*open_, key, std::string(v));
    return *this;
  }
  Deferred& arg(const char* key, const char* v) noexcept { return arg(key, std::string_view(v)); }

  // Ends the span now (or at end_ns) on `track` (0: the calling thread's).
  void finish(Track track = 0) noexcept {
    if (open_) finish_at(now(), track);
  }
  void finish_at(int64_t end_ns, Track track = 0) noexcept {
    if (!open_) return;
    internal::commit(std::move(*open_), end_ns, track);
    open_.reset();
  }

 private:
  void begin(const char* name, const char* category, int64_t start_ns) noexcept;
  std::unique_ptr<internal::Open> open_;  // null while tracing is off: nothing made
};

// A span on this thread's track from construction to the end of the scope.
class Scope {
 public:
  Scope(const char* name, const char* category) noexcept : span_(name, category) {}
  ~Scope() { span_.finish(); }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

  explicit operator bool() const noexcept { return static_cast<bool>(span_); }
  int64_t start_ns() const noexcept { return span_.start_ns(); }
  Scope& arg(const char* key, int64_t v) noexcept {
    span_.arg(key, v);
    return *this;
  }
  Scope& arg(const char* key, std::string_view v) noexcept {
    span_.arg(key, v);
    return *this;
  }
  Scope& arg(const char* key, const char* v) noexcept { return arg(key, std::string_view(v)); }

 private:
  Deferred span_;
};

}  // namespace plugboard::trace
