#include "runtime/xspace.h"

#include <bit>
#include <map>
#include <optional>

#include "base/no_throw.h"
#include "runtime/protobuf_wire.h"

namespace plugboard::xspace {
namespace {

using protobuf_wire::ProtoField;
using protobuf_wire::ProtoReader;
using protobuf_wire::WireType;

std::unexpected<Error> malformed(std::string_view message, const ProtoField& f) {
  return make_error(Code::kDataLoss, "not a well-formed XSpace: " + std::string(message) + " field " +
                                         std::to_string(f.number) + " has wire type " +
                                         std::to_string(static_cast<int>(f.type)));
}

// A known field's value, checked against the wire type xplane.proto gives it.
Status want(const ProtoField& f, WireType type, std::string_view message) {
  if (f.type != type) return malformed(message, f);
  return ok();
}

// Reads every field of `bytes` as message `name`, handing each to `take`.
template <class Take>
Status each_field(std::string_view bytes, std::string_view name, Take take) {
  ProtoReader reader(bytes);
  ProtoField f;
  for (;;) {
    auto more = reader.next(f);
    if (!more) return std::unexpected(std::move(more).error().annotate("not a well-formed XSpace (in an " + std::string(name) + ")"));
    if (!*more) return ok();
    PB_RETURN_IF_ERROR(take(f));
  }
}

// A stat as read, before its names are known (they are in the plane's stat metadata).
struct RawStat {
  int64_t metadata_id = 0;
  std::optional<trace::Value> value;
  std::optional<int64_t> ref;  // ref_value: the name of that stat metadata
};
struct RawEvent {
  int64_t metadata_id = 0;
  int64_t offset_ps = 0, duration_ps = 0;
  bool aggregate = false;
  std::vector<RawStat> stats;
};
struct RawLine {
  int64_t id = 0;
  std::string name, display_name;
  int64_t timestamp_ns = 0;
  std::vector<RawEvent> events;
};
struct EventMetadata {
  std::string name, display_name;
};

Expected<RawStat> read_stat(std::string_view bytes) {
  RawStat s;
  PB_RETURN_IF_ERROR(each_field(bytes, "XStat", [&](const ProtoField& f) -> Status {
    switch (f.number) {
      case 1: PB_RETURN_IF_ERROR(want(f, WireType::kVarint, "XStat")); s.metadata_id = static_cast<int64_t>(f.value); break;
      case 2: PB_RETURN_IF_ERROR(want(f, WireType::kFixed64, "XStat")); s.value = std::bit_cast<double>(f.value); break;
      case 3:  // uint64: kept as int64 when it fits, else as its decimal text
        PB_RETURN_IF_ERROR(want(f, WireType::kVarint, "XStat"));
        if (f.value <= static_cast<uint64_t>(INT64_MAX)) s.value = static_cast<int64_t>(f.value);
        else s.value = std::to_string(f.value);
        break;
      case 4: PB_RETURN_IF_ERROR(want(f, WireType::kVarint, "XStat")); s.value = static_cast<int64_t>(f.value); break;
      case 5: PB_RETURN_IF_ERROR(want(f, WireType::kLengthDelimited, "XStat")); s.value = std::string(f.bytes); break;
      case 6: PB_RETURN_IF_ERROR(want(f, WireType::kLengthDelimited, "XStat")); break;  // bytes: not shown
      case 7: PB_RETURN_IF_ERROR(want(f, WireType::kVarint, "XStat")); s.ref = static_cast<int64_t>(f.value); break;
      default: break;
    }
    return ok();
  }));
  return s;
}

Expected<RawEvent> read_event(std::string_view bytes) {
  RawEvent e;
  PB_RETURN_IF_ERROR(each_field(bytes, "XEvent", [&](const ProtoField& f) -> Status {
    switch (f.number) {
      case 1: PB_RETURN_IF_ERROR(want(f, WireType::kVarint, "XEvent")); e.metadata_id = static_cast<int64_t>(f.value); break;
      case 2:
        PB_RETURN_IF_ERROR(want(f, WireType::kVarint, "XEvent"));
        e.offset_ps = static_cast<int64_t>(f.value);
        e.aggregate = false;
        break;
      case 3: PB_RETURN_IF_ERROR(want(f, WireType::kVarint, "XEvent")); e.duration_ps = static_cast<int64_t>(f.value); break;
      case 4: {
        PB_RETURN_IF_ERROR(want(f, WireType::kLengthDelimited, "XEvent"));
        PB_ASSIGN_OR_RETURN(RawStat s, read_stat(f.bytes));
        e.stats.push_back(std::move(s));
        break;
      }
      case 5: PB_RETURN_IF_ERROR(want(f, WireType::kVarint, "XEvent")); e.aggregate = true; break;  // oneof with offset_ps
      default: break;
    }
    return ok();
  }));
  if (e.duration_ps < 0) e.duration_ps = 0;
  return e;
}

Expected<RawLine> read_line(std::string_view bytes) {
  RawLine l;
  PB_RETURN_IF_ERROR(each_field(bytes, "XLine", [&](const ProtoField& f) -> Status {
    switch (f.number) {
      case 1: PB_RETURN_IF_ERROR(want(f, WireType::kVarint, "XLine")); l.id = static_cast<int64_t>(f.value); break;
      case 2: PB_RETURN_IF_ERROR(want(f, WireType::kLengthDelimited, "XLine")); l.name = std::string(f.bytes); break;
      case 3: PB_RETURN_IF_ERROR(want(f, WireType::kVarint, "XLine")); l.timestamp_ns = static_cast<int64_t>(f.value); break;
      case 4: {
        PB_RETURN_IF_ERROR(want(f, WireType::kLengthDelimited, "XLine"));
        PB_ASSIGN_OR_RETURN(RawEvent e, read_event(f.bytes));
        l.events.push_back(std::move(e));
        break;
      }
      case 11: PB_RETURN_IF_ERROR(want(f, WireType::kLengthDelimited, "XLine")); l.display_name = std::string(f.bytes); break;
      default: break;  // display_id, duration_ps
    }
    return ok();
  }));
  return l;
}

Expected<std::pair<int64_t, EventMetadata>> read_event_metadata_entry(std::string_view bytes) {
  int64_t key = 0;
  EventMetadata m;
  PB_RETURN_IF_ERROR(each_field(bytes, "XPlane.event_metadata entry", [&](const ProtoField& f) -> Status {
    if (f.number == 1) {
      PB_RETURN_IF_ERROR(want(f, WireType::kVarint, "XPlane.event_metadata entry"));
      key = static_cast<int64_t>(f.value);
    } else if (f.number == 2) {
      PB_RETURN_IF_ERROR(want(f, WireType::kLengthDelimited, "XPlane.event_metadata entry"));
      return each_field(f.bytes, "XEventMetadata", [&](const ProtoField& g) -> Status {
        if (g.number == 2 || g.number == 4) {
          PB_RETURN_IF_ERROR(want(g, WireType::kLengthDelimited, "XEventMetadata"));
          (g.number == 2 ? m.name : m.display_name) = std::string(g.bytes);
        }
        return ok();
      });
    }
    return ok();
  }));
  return std::pair{key, std::move(m)};
}

Expected<std::pair<int64_t, std::string>> read_stat_metadata_entry(std::string_view bytes) {
  int64_t key = 0;
  std::string name;
  PB_RETURN_IF_ERROR(each_field(bytes, "XPlane.stat_metadata entry", [&](const ProtoField& f) -> Status {
    if (f.number == 1) {
      PB_RETURN_IF_ERROR(want(f, WireType::kVarint, "XPlane.stat_metadata entry"));
      key = static_cast<int64_t>(f.value);
    } else if (f.number == 2) {
      PB_RETURN_IF_ERROR(want(f, WireType::kLengthDelimited, "XPlane.stat_metadata entry"));
      return each_field(f.bytes, "XStatMetadata", [&](const ProtoField& g) -> Status {
        if (g.number == 2) {
          PB_RETURN_IF_ERROR(want(g, WireType::kLengthDelimited, "XStatMetadata"));
          name = std::string(g.bytes);
        }
        return ok();
      });
    }
    return ok();
  }));
  return std::pair{key, std::move(name)};
}

Expected<Plane> read_plane(std::string_view bytes) {
  Plane plane;
  std::vector<RawLine> lines;
  std::map<int64_t, EventMetadata> events;
  std::map<int64_t, std::string> stats;
  PB_RETURN_IF_ERROR(each_field(bytes, "XPlane", [&](const ProtoField& f) -> Status {
    switch (f.number) {
      case 1: PB_RETURN_IF_ERROR(want(f, WireType::kVarint, "XPlane")); plane.id = static_cast<int64_t>(f.value); break;
      case 2: PB_RETURN_IF_ERROR(want(f, WireType::kLengthDelimited, "XPlane")); plane.name = std::string(f.bytes); break;
      case 3: {
        PB_RETURN_IF_ERROR(want(f, WireType::kLengthDelimited, "XPlane"));
        PB_ASSIGN_OR_RETURN(RawLine l, read_line(f.bytes));
        lines.push_back(std::move(l));
        break;
      }
      case 4: {
        PB_RETURN_IF_ERROR(want(f, WireType::kLengthDelimited, "XPlane"));
        PB_ASSIGN_OR_RETURN(auto entry, read_event_metadata_entry(f.bytes));
        events[entry.first] = std::move(entry.second);  // a key given twice: the last, as protobuf's maps
        break;
      }
      case 5: {
        PB_RETURN_IF_ERROR(want(f, WireType::kLengthDelimited, "XPlane"));
        PB_ASSIGN_OR_RETURN(auto entry, read_stat_metadata_entry(f.bytes));
        stats[entry.first] = std::move(entry.second);
        break;
      }
      default: break;  // the plane's own stats
    }
    return ok();
  }));
  auto stat_name = [&](int64_t id) {
    auto it = stats.find(id);
    return it != stats.end() && !it->second.empty() ? it->second : "stat " + std::to_string(id);
  };
  for (RawLine& raw : lines) {
    Line line;
    line.id = raw.id;
    line.name = !raw.display_name.empty() ? raw.display_name : !raw.name.empty() ? raw.name : "line " + std::to_string(raw.id);
    line.timestamp_ns = raw.timestamp_ns;
    for (RawEvent& re : raw.events) {
      if (re.aggregate) {
        ++line.aggregates;
        continue;
      }
      Event e;
      auto it = events.find(re.metadata_id);
      if (it != events.end()) e.name = !it->second.display_name.empty() ? it->second.display_name : it->second.name;
      if (e.name.empty()) e.name = "event " + std::to_string(re.metadata_id);
      e.offset_ps = re.offset_ps;
      e.duration_ps = re.duration_ps;
      for (RawStat& s : re.stats) {
        if (s.ref) e.stats.push_back({stat_name(s.metadata_id), stat_name(*s.ref)});
        else if (s.value) e.stats.push_back({stat_name(s.metadata_id), std::move(*s.value)});
      }
      line.events.push_back(std::move(e));
    }
    plane.lines.push_back(std::move(line));
  }
  return plane;
}

Expected<Space> decode_exact(std::string_view bytes) {
  return no_throw("decoding an XSpace", [&]() -> Expected<Space> {
    Space space;
    PB_RETURN_IF_ERROR(each_field(bytes, "XSpace", [&](const ProtoField& f) -> Status {
      if (f.number == 1) {
        PB_RETURN_IF_ERROR(want(f, WireType::kLengthDelimited, "XSpace"));
        PB_ASSIGN_OR_RETURN(Plane p, read_plane(f.bytes));
        space.planes.push_back(std::move(p));
      } else if (f.number >= 2 && f.number <= 4) {
        PB_RETURN_IF_ERROR(want(f, WireType::kLengthDelimited, "XSpace"));
        (f.number == 2 ? space.errors : f.number == 3 ? space.warnings : space.hostnames).emplace_back(f.bytes);
      }
      return ok();
    }));
    return space;
  });
}

}  // namespace

Expected<Space> decode(std::string_view bytes) {
  // XLA's plugins hand out the XSpace with one zero byte after it. A zero where a field's tag would
  // start is never valid (there is no field 0), so a last zero byte at the top level is that padding.
  if (!bytes.empty() && bytes.back() == '\0') {
    Expected<Space> unpadded = decode_exact(bytes.substr(0, bytes.size() - 1));
    if (unpadded) return unpadded;
  }
  return decode_exact(bytes);
}

Counts count(const Space& space) {
  Counts c;
  c.planes = space.planes.size();
  for (const Plane& p : space.planes) {
    c.lines += p.lines.size();
    for (const Line& l : p.lines) c.events += l.events.size();
  }
  return c;
}

}  // namespace plugboard::xspace
