// The trace recorder: per-thread buffers of finished spans, a process-wide table of named tracks with
// their lanes, and the Chrome trace-event JSON writer.
#include "base/trace.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <cinttypes>
#include <cstdio>
#include <deque>
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include <nlohmann/json.hpp>

#include "base/atomic_file.h"
#include "base/no_throw.h"

namespace plugboard::trace {

namespace internal {
std::atomic<bool> g_on{false};
std::atomic<uint64_t> g_session{0};
}  // namespace internal

namespace {

using internal::Open;

int64_t read_clock(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

int current_tid() {
  static thread_local const int tid = static_cast<int>(syscall(SYS_gettid));
  return tid;
}

// A finished span, as a thread's buffer keeps it.
struct Finished {
  const char* name;
  const char* category;
  std::string owned_name, owned_category;  // for record(): names that are not literals
  int64_t start_ns, end_ns;
  int tid;
  std::vector<Arg> args;
};

// One thread's spans in one trace. Its mutex is taken by that thread per span and by stop() once: never
// contended between recording threads.
struct ThreadBuffer {
  std::mutex mutex;
  std::deque<Finished> spans;
  uint64_t session = 0;
  int tid = 0;
  std::string name;
};

// Named tracks (for the process's life): each has kLanes lanes, drawn as tracks of their own, so that
// spans that overlap without nesting sit side by side. Spans are recorded when they end, so a parent
// comes after its children: a lane keeps its latest outermost spans (disjoint intervals), and a span
// takes the lane when it overlaps none of them in part (it is after them, or it contains them).
constexpr int kLanes = 8;
constexpr size_t kLaneIntervals = 16;  // outermost spans a lane remembers; older ones become its floor

struct Interval {
  int64_t start = 0, end = 0;
};

struct Lane {
  std::array<Interval, kLaneIntervals> outermost{};
  size_t count = 0;
  int64_t floor = INT64_MIN;  // the latest end among the intervals it forgot: a span starting before it may not take it

  // Takes [start, end] when it nests with every outermost span kept; the spans it contains stop being outermost.
  bool take(int64_t start, int64_t end) {
    if (start < floor) return false;
    for (size_t i = 0; i < count; ++i) {
      const Interval& o = outermost[i];
      const bool overlaps = o.start < end && o.end > start;
      const bool contains = start <= o.start && o.end <= end;
      if (overlaps && !contains) return false;
    }
    size_t kept = 0;
    for (size_t i = 0; i < count; ++i)
      if (!(start <= outermost[i].start && outermost[i].end <= end)) outermost[kept++] = outermost[i];
    count = kept;
    if (count == kLaneIntervals) {  // forget the one that ended first
      size_t first = 0;
      for (size_t i = 1; i < count; ++i)
        if (outermost[i].end < outermost[first].end) first = i;
      floor = std::max(floor, outermost[first].end);
      outermost[first] = outermost[--count];
    }
    outermost[count++] = Interval{start, end};
    return true;
  }
};
constexpr uint32_t kNamedBit = 0x80000000u;  // a Track with this bit is a named track's index
constexpr int kNamedTidBase = 0x40000000;    // above any Linux tid (pid_max <= 2^22)

struct NamedTrack {
  std::string name;
  std::mutex mutex;  // the lanes: held for a few comparisons by a span ending on this track
  std::array<Lane, kLanes> lanes{};
};

constexpr size_t kMaxNamed = 4096;  // past that, named_track() gives the caller's thread's track

struct Named {
  std::mutex mutex;                              // making a track
  std::map<std::string, uint32_t, std::less<>> index;
  std::array<std::atomic<NamedTrack*>, kMaxNamed> tracks{};  // read without the lock; never freed
  size_t count = 0;
};
Named& named() {
  static Named* n = new Named();  // never destroyed: spans may be recorded during exit
  return *n;
}

// The trace being recorded: its buffers, cap and clock pair.
struct Session {
  std::mutex mutex;  // buffers, and start/stop
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;
  std::atomic<uint64_t> kept{0};
  std::atomic<uint64_t> dropped{0};
  std::atomic<uint64_t> max_spans{0};
  std::atomic<int64_t> started_ns{0};
  std::string process_name;
  int64_t clock_monotonic_ns = 0, clock_realtime_ns = 0;
  bool running = false;
  std::vector<std::string> notes;
};
Session& session() {
  static Session* s = new Session();
  return *s;
}

thread_local std::shared_ptr<ThreadBuffer> t_buffer;

// The collectors (internal::Collector), registered for the process's life.
struct Collectors {
  std::mutex mutex;
  std::vector<internal::Collector*> list;
};
Collectors& collectors() {
  static Collectors* c = new Collectors();
  return *c;
}
std::vector<internal::Collector*> collector_list() noexcept {
  try {
    Collectors& c = collectors();
    std::lock_guard lock(c.mutex);
    return c.list;
  } catch (...) {
    return {};  // no memory: the collectors miss this trace
  }
}

std::string thread_name() {
  char name[32] = {};
  if (pthread_getname_np(pthread_self(), name, sizeof(name)) != 0 || name[0] == '\0') return "thread";
  return name;
}

// This thread's buffer for trace `id`, made (under the session's lock) on its first span there. Null
// when that trace has stopped meanwhile.
ThreadBuffer* buffer_for(uint64_t id) {
  if (t_buffer && t_buffer->session == id) return t_buffer.get();
  auto made = std::make_shared<ThreadBuffer>();
  made->session = id;
  made->tid = current_tid();
  made->name = thread_name();
  Session& s = session();
  std::lock_guard lock(s.mutex);
  if (!s.running || internal::g_session.load(std::memory_order_relaxed) != id) return nullptr;
  s.buffers.push_back(made);
  t_buffer = std::move(made);
  return t_buffer.get();
}

// The tid a span on `track` is drawn on: the calling thread's, a thread's, or a lane of a named track.
int resolve_track(Track track, int64_t start_ns, int64_t end_ns) {
  if (track == 0) return current_tid();
  if (!(track & kNamedBit)) return static_cast<int>(track);
  const uint32_t index = track & ~kNamedBit;
  NamedTrack* t = index < kMaxNamed ? named().tracks[index].load(std::memory_order_acquire) : nullptr;
  if (!t) return current_tid();
  int lane = kLanes - 1;  // no lane fits: the last one takes it, overlapping
  {
    std::lock_guard lock(t->mutex);
    for (int l = 0; l < kLanes; ++l) {
      if (t->lanes[static_cast<size_t>(l)].take(start_ns, end_ns)) {
        lane = l;
        break;
      }
    }
  }
  return kNamedTidBase + static_cast<int>(index) * kLanes + lane;
}

void keep(Finished&& span, uint64_t id) noexcept {
  try {
    Session& s = session();
    if (s.kept.fetch_add(1, std::memory_order_relaxed) >= s.max_spans.load(std::memory_order_relaxed)) {
      s.dropped.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    ThreadBuffer* buffer = buffer_for(id);
    if (!buffer) return;
    std::lock_guard lock(buffer->mutex);
    buffer->spans.push_back(std::move(span));
  } catch (...) {
    // Out of memory: the span is lost, nothing else.
  }
}

bool recording(uint64_t id) {
  return internal::g_on.load(std::memory_order_acquire) && internal::g_session.load(std::memory_order_acquire) == id;
}

std::string track_name(int tid, const std::map<int, std::string>& threads) {
  if (tid >= kNamedTidBase) {
    const int index = (tid - kNamedTidBase) / kLanes, lane = (tid - kNamedTidBase) % kLanes;
    const NamedTrack* t = static_cast<size_t>(index) < kMaxNamed
                              ? named().tracks[static_cast<size_t>(index)].load(std::memory_order_acquire)
                              : nullptr;
    std::string name = t ? t->name : "track";
    return lane == 0 ? name : name + " [" + std::to_string(lane + 1) + "]";
  }
  if (auto it = threads.find(tid); it != threads.end()) return it->second;
  return "thread " + std::to_string(tid);
}

// JSON text pieces. Strings go through nlohmann (escapes, invalid UTF-8 replaced).
void put_string(std::string& out, std::string_view s) {
  out += nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}
// Nanoseconds as microseconds with three decimals: exact, no floating point.
void put_micros(std::string& out, int64_t ns) {
  char text[40];
  const char* sign = ns < 0 ? "-" : "";
  const uint64_t v = ns < 0 ? static_cast<uint64_t>(-(ns + 1)) + 1 : static_cast<uint64_t>(ns);
  std::snprintf(text, sizeof(text), "%s%" PRIu64 ".%03" PRIu64, sign, v / 1000, v % 1000);
  out += text;
}
void put_value(std::string& out, const Value& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) {
    out += std::to_string(*i);
  } else if (const auto* d = std::get_if<double>(&v)) {
    out += nlohmann::json(*d).dump();  // null for a NaN or an infinity
  } else {
    put_string(out, std::get<std::string>(v));
  }
}

}  // namespace

namespace internal {

Open::Open(const char* name, const char* category, int64_t start_ns)
    : name(name), category(category), start_ns(start_ns), session(g_session.load(std::memory_order_acquire)) {}

void add(Open& span, const char* key, Value value) noexcept {
  try {
    span.args.push_back(Arg{key, std::move(value)});
  } catch (...) {
  }
}

void commit(Open&& span, int64_t end_ns, Track track) noexcept {
  if (!recording(span.session)) return;
  try {
    const int tid = resolve_track(track, span.start_ns, end_ns);
    keep(Finished{span.name, span.category, {}, {}, span.start_ns, end_ns, tid, std::move(span.args)}, span.session);
  } catch (...) {
  }
}

void add_collector(Collector* collector) noexcept {
  try {
    Collectors& c = collectors();
    std::lock_guard lock(c.mutex);
    c.list.push_back(collector);
  } catch (...) {
  }
}

void note(std::string text) noexcept {
  try {
    Session& s = session();
    std::lock_guard lock(s.mutex);
    if (s.running) s.notes.push_back(std::move(text));
  } catch (...) {
  }
}

ClockPair clock_pair() noexcept {
  Session& s = session();
  std::lock_guard lock(s.mutex);
  if (!s.running) return {};
  return {s.clock_monotonic_ns, s.clock_realtime_ns};
}

}  // namespace internal

void Deferred::begin(const char* name, const char* category, int64_t start_ns) noexcept {
  try {
    open_ = std::make_unique<internal::Open>(name, category, start_ns);
  } catch (...) {
  }
}

int64_t now() noexcept { return read_clock(CLOCK_MONOTONIC); }
bool enabled() noexcept { return on(); }

Status start(const Options& options) noexcept {
  Status started = no_throw("starting a trace", [&]() -> Status {
    if (options.max_spans == 0) return invalid_argument("trace max_spans must be at least 1");
    Session& s = session();
    std::lock_guard lock(s.mutex);
    if (s.running) return make_error(Code::kFailedPrecondition, "a trace is being recorded already: stop it first");
    s.buffers.clear();
    s.notes.clear();
    s.kept.store(0, std::memory_order_relaxed);
    s.dropped.store(0, std::memory_order_relaxed);
    s.max_spans.store(options.max_spans, std::memory_order_relaxed);
    s.process_name = options.process_name.empty() ? "plugboard (pid " + std::to_string(getpid()) + ")" : options.process_name;
    s.clock_monotonic_ns = read_clock(CLOCK_MONOTONIC);
    s.clock_realtime_ns = read_clock(CLOCK_REALTIME);
    s.started_ns.store(s.clock_monotonic_ns, std::memory_order_relaxed);
    s.running = true;
    internal::g_session.fetch_add(1, std::memory_order_acq_rel);
    internal::g_on.store(true, std::memory_order_release);
    return ok();
  });
  if (started)
    for (internal::Collector* c : collector_list()) c->started();
  return started;
}

Track this_thread_track() noexcept {
  if (on()) (void)buffer_for(internal::g_session.load(std::memory_order_acquire));  // so that the track gets its name
  return static_cast<Track>(current_tid());
}

Track named_track(std::string_view name) noexcept {
  try {
    Named& n = named();
    std::lock_guard lock(n.mutex);
    if (auto it = n.index.find(name); it != n.index.end()) return it->second;
    if (n.count == kMaxNamed) return 0;
    auto made = std::make_unique<NamedTrack>();
    made->name = std::string(name);
    const auto id = static_cast<uint32_t>(n.count) | kNamedBit;
    n.index.emplace(std::string(name), id);
    n.tracks[n.count++].store(made.release(), std::memory_order_release);
    return id;
  } catch (...) {
    return 0;  // no memory: the caller's thread's track
  }
}

void record(std::string_view name, std::string_view category, int64_t start_ns, int64_t end_ns, Track track,
            std::span<const Arg> args) noexcept {
  if (!on()) return;
  const uint64_t id = internal::g_session.load(std::memory_order_acquire);
  Session& s = session();
  if (start_ns < s.started_ns.load(std::memory_order_relaxed)) return;  // began before this trace
  try {
    const int tid = resolve_track(track, start_ns, std::max(start_ns, end_ns));
    Finished f{nullptr, nullptr, std::string(name), std::string(category), start_ns, std::max(start_ns, end_ns), tid,
               std::vector<Arg>(args.begin(), args.end())};
    if (recording(id)) keep(std::move(f), id);
  } catch (...) {
  }
}

namespace {

// stop() once the collectors have had their say: ends recording and gathers what was recorded.
Expected<Trace> stop_recording() noexcept {
  return no_throw("stopping a trace", [&]() -> Expected<Trace> {
    Session& s = session();
    std::vector<std::shared_ptr<ThreadBuffer>> buffers;
    Trace trace;
    {
      std::lock_guard lock(s.mutex);
      if (!s.running) return make_error(Code::kFailedPrecondition, "no trace is being recorded: start one first");
      internal::g_on.store(false, std::memory_order_release);
      s.running = false;
      buffers.swap(s.buffers);
      trace.process_name = s.process_name;
      trace.clock_monotonic_ns = s.clock_monotonic_ns;
      trace.clock_realtime_ns = s.clock_realtime_ns;
      trace.started_ns = s.started_ns.load(std::memory_order_relaxed);
      trace.max_spans = s.max_spans.load(std::memory_order_relaxed);
      trace.notes.swap(s.notes);
    }
    trace.stopped_ns = now();
    trace.pid = static_cast<int>(getpid());
    std::map<int, std::string> threads;
    std::set<int> used;
    for (const auto& b : buffers) {
      std::lock_guard lock(b->mutex);
      threads.emplace(b->tid, b->name);
      for (Finished& f : b->spans) {
        used.insert(f.tid);
        trace.spans.push_back(Span{f.name ? std::string(f.name) : std::move(f.owned_name),
                                   f.category ? std::string(f.category) : std::move(f.owned_category), f.start_ns,
                                   f.end_ns, f.tid, std::move(f.args)});
      }
      b->spans.clear();
    }
    trace.dropped_spans = s.dropped.load(std::memory_order_relaxed);
    for (int tid : used) trace.tracks.push_back({tid, track_name(tid, threads)});
    return trace;
  });
}

}  // namespace

Expected<Trace> stop() noexcept {
  if (on())
    for (internal::Collector* c : collector_list()) c->stopping();
  Expected<Trace> stopped = stop_recording();
  for (internal::Collector* c : collector_list()) c->stopped();
  return stopped;
}


Expected<std::string> Trace::to_json() const noexcept {
  return no_throw("writing a trace as JSON", [&]() -> Expected<std::string> {
    std::string out;
    out.reserve(256 + spans.size() * 160);
    const std::string pid_text = std::to_string(pid);
    out += "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
    out += "{\"ph\":\"M\",\"pid\":" + pid_text + ",\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":";
    put_string(out, process_name);
    out += "}}";
    for (const TrackName& t : tracks) {
      out += ",\n{\"ph\":\"M\",\"pid\":" + pid_text + ",\"tid\":" + std::to_string(t.tid) +
             ",\"name\":\"thread_name\",\"args\":{\"name\":";
      put_string(out, t.name);
      out += "}}";
    }
    for (const Span& span : spans) {
      out += ",\n{\"ph\":\"X\",\"pid\":" + pid_text + ",\"tid\":" + std::to_string(span.tid) + ",\"name\":";
      put_string(out, span.name);
      out += ",\"cat\":";
      put_string(out, span.category.empty() ? std::string_view("plugboard") : std::string_view(span.category));
      out += ",\"ts\":";
      put_micros(out, span.start_ns);
      out += ",\"dur\":";
      put_micros(out, std::max<int64_t>(0, span.end_ns - span.start_ns));
      if (!span.args.empty()) {
        out += ",\"args\":{";
        std::set<std::string_view> seen;  // a key given twice: the first one
        bool first = true;
        for (const Arg& a : span.args) {
          if (!seen.insert(a.key).second) continue;
          if (!first) out += ',';
          first = false;
          put_string(out, a.key);
          out += ':';
          put_value(out, a.value);
        }
        out += '}';
      }
      out += '}';
    }
    out += "\n],\"otherData\":{\"clock\":\"CLOCK_MONOTONIC\",\"clock_monotonic_ns\":" +
           std::to_string(clock_monotonic_ns) + ",\"clock_realtime_ns\":" + std::to_string(clock_realtime_ns) +
           ",\"started_ns\":" + std::to_string(started_ns) + ",\"stopped_ns\":" + std::to_string(stopped_ns) +
           ",\"spans\":" + std::to_string(spans.size()) + ",\"dropped_spans\":" + std::to_string(dropped_spans) +
           ",\"max_spans\":" + std::to_string(max_spans);
    if (!notes.empty()) {
      out += ",\"notes\":[";
      for (size_t i = 0; i < notes.size(); ++i) {
        if (i) out += ',';
        put_string(out, notes[i]);
      }
      out += ']';
    }
    out += "}}\n";
    return out;
  });
}

Status Trace::write(const std::filesystem::path& path) const noexcept {
  return no_throw("writing a trace", [&]() -> Status {
    const std::string where = "writing the trace to " + path.string();
    PB_ASSIGN_OR_RETURN(std::string text, annotate(to_json(), where));
    const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
    PB_ASSIGN_OR_RETURN(AtomicFile file, annotate(AtomicFile::create(dir, ".trace-"), where));
    PB_RETURN_IF_ERROR(annotate(file.write_all(text), where));
    return annotate(file.commit(path, 0644), where);
  });
}

}  // namespace plugboard::trace
