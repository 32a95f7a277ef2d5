// The NIFs of Plugboard.Trace: the switch of plugboard's trace recorder (plugboard/trace.h) and the
// Elixir side's own spans.
//   trace_start(max_spans, process_name) -> :ok | {:error, error}   ("" : the recorder's default name)
//   trace_stop() -> {:ok, fields, stopped} | {:error, error}        (dirty CPU: the recorder's stop)
//   trace_spans(stopped, budget) -> [span]                            (the next spans; [] when all were given)
//   trace_now() -> integer                                            (ns of CLOCK_MONOTONIC, the spans' clock)
//   trace_record(name, category, start_ns, end_ns, track, args) -> :ok | :unsupported | {:error, error}
// A span's args: a map of atom or string keys to integers, floats, strings or atoms; anything else
// (a bignum, a tuple) answers :unsupported and Plugboard.Trace passes it again inspected.
//
// A stopped trace's spans come out a chunk a call (trace_spans: at most `budget` spans and args
// together), on the caller's normal scheduler: one term of all of them, built on a dirty scheduler,
// would be merged into the caller's heap by a garbage collection on its normal scheduler when the
// NIF returns (46 ms for 200,000 spans). Every call but trace_stop does a bounded amount of work
// (record: at most kMaxArgs arguments). The spans given out are freed as they go; what is left
// when the `stopped` term is dropped is freed on a launch-pool thread.
#include <cmath>
#include <string>
#include <vector>

#include <mutex>
#include <utility>

#include "nif_functions.h"
#include "plugboard/trace.h"
#include "work_pool.h"

namespace plugboard::nif {
namespace {

constexpr size_t kMaxArgs = 64;

// An atom's or a binary's text; false for anything else.
bool get_text(ErlNifEnv* env, ERL_NIF_TERM term, std::string& out) {
  ErlNifBinary bin;
  if (enif_inspect_binary(env, term, &bin)) {
    out.assign(reinterpret_cast<const char*>(bin.data), bin.size);
    return true;
  }
  unsigned length = 0;
  if (enif_get_atom_length(env, term, &length, ERL_NIF_LATIN1)) {
    std::string latin1(length + 1, '\0');
    if (!enif_get_atom(env, term, latin1.data(), length + 1, ERL_NIF_LATIN1)) return false;
    latin1.resize(length);
    // Spans hold UTF-8 (OTP 25 reads atoms as Latin-1 only): :"é" is one byte there, two here.
    out.clear();
    for (unsigned char c : latin1) {
      if (c < 0x80) {
        out += static_cast<char>(c);
      } else {
        out += static_cast<char>(0xC0 | (c >> 6));
        out += static_cast<char>(0x80 | (c & 0x3F));
      }
    }
    return true;
  }
  return false;
}

// The args map as the recorder's Args; false when a key or a value is not of a kind it keeps.
bool get_args(ErlNifEnv* env, ERL_NIF_TERM map, std::vector<trace::Arg>& args) {
  ErlNifMapIterator it;
  if (!enif_map_iterator_create(env, map, &it, ERL_NIF_MAP_ITERATOR_FIRST)) return false;
  bool fine = true;
  ERL_NIF_TERM key, value;
  while (fine && enif_map_iterator_get_pair(env, &it, &key, &value)) {
    trace::Arg arg;
    ErlNifSInt64 i;
    double d;
    std::string s;
    fine = get_text(env, key, arg.key);
    if (!fine) break;
    if (enif_get_int64(env, value, &i)) arg.value = int64_t{i};
    else if (enif_get_double(env, value, &d)) arg.value = d;
    else if (get_text(env, value, s)) arg.value = std::move(s);
    else fine = false;
    if (fine) args.push_back(std::move(arg));
    enif_map_iterator_next(env, &it);
  }
  enif_map_iterator_destroy(env, &it);
  return fine;
}

ERL_NIF_TERM make_value(ErlNifEnv* env, const trace::Value& value) {
  if (auto* i = std::get_if<int64_t>(&value)) return enif_make_int64(env, *i);
  // The VM has no NaN or infinity (enif_make_double raises badarg): nil, as the C++ JSON writes null.
  if (auto* d = std::get_if<double>(&value)) return std::isfinite(*d) ? enif_make_double(env, *d) : enif_make_atom(env, "nil");
  return make_string(env, std::get<std::string>(value));
}

ERL_NIF_TERM make_args(ErlNifEnv* env, const std::vector<trace::Arg>& args) {
  ERL_NIF_TERM map = enif_make_new_map(env);
  for (const auto& a : args) enif_make_map_put(env, map, make_string(env, a.key), make_value(env, a.value), &map);
  return map;
}

ERL_NIF_TERM make_map(ErlNifEnv* env, std::vector<ERL_NIF_TERM>& keys, std::vector<ERL_NIF_TERM>& values) {
  ERL_NIF_TERM map;
  if (!enif_make_map_from_arrays(env, keys.data(), values.data(), keys.size(), &map)) return enif_make_new_map(env);
  return map;
}

ERL_NIF_TERM make_span(ErlNifEnv* env, std::vector<ERL_NIF_TERM>& keys, const trace::Span& s) {
  std::vector<ERL_NIF_TERM> values{make_string(env, s.name), make_string(env, s.category), enif_make_int64(env, s.start_ns),
                                   enif_make_int64(env, s.end_ns), enif_make_int(env, s.tid), make_args(env, s.args)};
  return make_map(env, keys, values);
}

// The trace's fields but its spans.
ERL_NIF_TERM make_fields(ErlNifEnv* env, const trace::Trace& t) {
  ERL_NIF_TERM tracks = enif_make_new_map(env);
  for (const auto& track : t.tracks)
    enif_make_map_put(env, tracks, enif_make_int(env, track.tid), make_string(env, track.name), &tracks);
  std::vector<ERL_NIF_TERM> notes;
  for (const auto& note : t.notes) notes.push_back(make_string(env, note));
  std::vector<ERL_NIF_TERM> keys{atom(env, "process_name"), atom(env, "pid"),          atom(env, "clock_monotonic_ns"),
                                 atom(env, "clock_realtime_ns"), atom(env, "started_ns"), atom(env, "stopped_ns"),
                                 atom(env, "max_spans"),  atom(env, "dropped_spans"), atom(env, "tracks"),
                                 atom(env, "notes")};
  std::vector<ERL_NIF_TERM> values{make_string(env, t.process_name),
                                   enif_make_int(env, t.pid),
                                   enif_make_int64(env, t.clock_monotonic_ns),
                                   enif_make_int64(env, t.clock_realtime_ns),
                                   enif_make_int64(env, t.started_ns),
                                   enif_make_int64(env, t.stopped_ns),
                                   enif_make_uint64(env, t.max_spans),
                                   enif_make_uint64(env, t.dropped_spans),
                                   tracks,
                                   make_list(env, notes)};
  return make_map(env, keys, values);
}

// A stopped trace whose spans are being given out (trace_spans).
struct Stopped {
  std::mutex mutex;
  trace::Trace trace;
  size_t next = 0;
};

ErlNifResourceType* stopped_type = nullptr;

// Spans a normal scheduler may destroy at once (given out or not, each costs its destructor).
constexpr size_t kFreeOnScheduler = 4096;

void destroy_stopped(ErlNifEnv*, void* memory) {
  Stopped* stopped = std::exchange(*static_cast<Stopped**>(memory), nullptr);
  if (!stopped) return;
  // Many spans (given out or not: each is still destroyed): freed off the scheduler.
  if (stopped->trace.spans.size() <= kFreeOnScheduler || !launch_pool().post([stopped] { delete stopped; }))
    delete stopped;
}

}  // namespace

PB_NIF(nif_trace_start) {
  return guarded(env, "Plugboard.Trace.start", [&]() -> ERL_NIF_TERM {
    (void)argc;
    auto max_spans = get_int_in(env, argv[0], "max_spans", 1, int64_t{1} << 40);
    if (!max_spans) return make_error(env, max_spans.error());
    auto name = get_string(env, argv[1], "process_name");
    if (!name) return make_error(env, name.error());
    return make_status(env, trace::start(trace::Options{.max_spans = static_cast<size_t>(*max_spans),
                                                        .process_name = std::move(*name)}));
  });
}

PB_NIF(nif_trace_stop) {
  return guarded(env, "Plugboard.Trace.stop", [&]() -> ERL_NIF_TERM {
    (void)argc;
    (void)argv;
    auto t = trace::stop();
    if (!t) return make_error(env, t.error());
    auto stopped = std::make_unique<Stopped>();
    stopped->trace = std::move(*t);
    ERL_NIF_TERM fields = make_fields(env, stopped->trace);
    void* memory = enif_alloc_resource(stopped_type, sizeof(Stopped*));
    if (!memory) return make_error(env, Code::kResourceExhausted, "Plugboard.Trace.stop: out of memory");
    *static_cast<Stopped**>(memory) = stopped.release();
    ERL_NIF_TERM term = enif_make_resource(env, memory);
    enif_release_resource(memory);
    return enif_make_tuple3(env, atom(env, "ok"), fields, term);
  });
}

PB_NIF(nif_trace_spans) {
  return guarded(env, "Plugboard.Trace.stop (trace_spans)", [&]() -> ERL_NIF_TERM {
    (void)argc;
    void* memory = nullptr;
    if (!enif_get_resource(env, argv[0], stopped_type, &memory) || !*static_cast<Stopped**>(memory))
      return make_error(env, Code::kInvalidArgument, "Plugboard.Trace: not a stopped trace");
    auto budget = get_int_in(env, argv[1], "budget", 1, 1 << 20);
    if (!budget) return make_error(env, budget.error());
    Stopped& stopped = **static_cast<Stopped**>(memory);
    std::lock_guard lock(stopped.mutex);
    std::vector<ERL_NIF_TERM> keys{atom(env, "name"),   atom(env, "category"), atom(env, "start_ns"),
                                   atom(env, "end_ns"), atom(env, "tid"),      atom(env, "args")};
    std::vector<ERL_NIF_TERM> spans;
    auto& all = stopped.trace.spans;
    // Spans and their args count against the budget: a chunk's work is bounded whatever the args.
    for (int64_t spent = 0; stopped.next < all.size() && spent < *budget; ++stopped.next) {
      trace::Span span = std::move(all[stopped.next]);  // freed as it goes
      spent += 1 + static_cast<int64_t>(span.args.size());
      spans.push_back(make_span(env, keys, span));
    }
    if (stopped.next == all.size()) {  // all given out: the spans left behind go on a launch-pool thread
      auto given_out = std::make_shared<std::vector<trace::Span>>(std::move(all));
      all = {};
      // The task holds the only reference, so the pool thread frees them (here only if it cannot post).
      if (given_out->size() > kFreeOnScheduler) (void)launch_pool().post([left = std::move(given_out)] {});
    }
    return enif_make_list_from_array(env, spans.data(), static_cast<unsigned>(spans.size()));
  });
}

bool open_trace_resource_type(ErlNifEnv* env, ErlNifResourceFlags flags) {
  stopped_type = enif_open_resource_type(env, nullptr, "plugboard_trace", destroy_stopped, flags, nullptr);
  return stopped_type != nullptr;
}

PB_NIF(nif_trace_now) {
  (void)argc;
  (void)argv;
  return enif_make_int64(env, trace::now());
}

PB_NIF(nif_trace_record) {
  return guarded(env, "Plugboard.Trace.record", [&]() -> ERL_NIF_TERM {
    (void)argc;
    if (!trace::enabled()) return atom(env, "ok");
    std::string name, category, track_name;
    if (!get_text(env, argv[0], name)) return make_error(env, Code::kInvalidArgument, "Plugboard.Trace.record: name must be a string");
    if (!get_text(env, argv[1], category))
      return make_error(env, Code::kInvalidArgument, "Plugboard.Trace.record: category must be a string");
    ErlNifSInt64 start_ns, end_ns;
    if (!enif_get_int64(env, argv[2], &start_ns) || !enif_get_int64(env, argv[3], &end_ns))
      return make_error(env, Code::kInvalidArgument, "Plugboard.Trace.record: start_ns and end_ns must be integers (Plugboard.Trace.now/0)");
    if (!get_text(env, argv[4], track_name))
      return make_error(env, Code::kInvalidArgument, "Plugboard.Trace.record: track must be a string");
    size_t count = 0;
    if (!enif_get_map_size(env, argv[5], &count))
      return make_error(env, Code::kInvalidArgument, "Plugboard.Trace.record: args must be a map");
    if (count > kMaxArgs)
      return make_error(env, Code::kInvalidArgument,
                        "Plugboard.Trace.record: at most " + std::to_string(kMaxArgs) + " args a span, got " + std::to_string(count));
    std::vector<trace::Arg> args;
    args.reserve(count);
    if (!get_args(env, argv[5], args)) return atom(env, "unsupported");
    trace::record(name, category, start_ns, end_ns, trace::named_track(track_name), args);
    return atom(env, "ok");
  });
}

}  // namespace plugboard::nif
