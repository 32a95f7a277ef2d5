// What plugboard reads of a tensorflow.profiler.XSpace, the serialized profile a plugin's profiler
// hands back (abi/profiler.h): planes ("/device:GPU:0", "/host:CPU"), their lines (a stream, a thread),
// and the lines' events with their names and stats. Read with plugboard's own wire-format reader
// (protobuf_wire.h), by field number as xplane.proto (package tensorflow.profiler) gives them:
//   XSpace        planes 1, errors 2, warnings 3, hostnames 4
//   XPlane        id 1, name 2, lines 3, event_metadata 4 (map<int64, XEventMetadata>), stat_metadata 5
//                 (map<int64, XStatMetadata>), stats 6
//   XLine         id 1, name 2, timestamp_ns 3 (ns since the Unix epoch), events 4, duration_ps 9,
//                 display_id 10, display_name 11
//   XEvent        metadata_id 1, offset_ps 2 (from the line's timestamp_ns), duration_ps 3, stats 4,
//                 num_occurrences 5 (an aggregate: no time of its own, not read)
//   XStat         metadata_id 1, double 2, uint64 3, int64 4, str 5, bytes 6, ref_value 7 (a stat
//                 metadata's name)
//   XEventMetadata id 1, name 2, metadata 3, display_name 4, stats 5, child_id 6
//   XStatMetadata id 1, name 2, description 3
// A map entry is a message of key 1 and value 2.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "plugboard/trace.h"

namespace plugboard::xspace {

struct Event {
  std::string name;          // its metadata's display_name, else its name, else "event N"
  int64_t offset_ps = 0;     // from the line's timestamp_ns
  int64_t duration_ps = 0;   // never negative
  std::vector<trace::Arg> stats;  // name (its stat metadata's) and value; bytes values are left out
};

struct Line {
  int64_t id = 0;
  std::string name;  // display_name, else name, else "line N"
  int64_t timestamp_ns = 0;
  std::vector<Event> events;  // timed events only (an aggregate, with num_occurrences, is counted)
  uint64_t aggregates = 0;
};

struct Plane {
  int64_t id = 0;
  std::string name;
  std::vector<Line> lines;
};

struct Space {
  std::vector<Plane> planes;
  std::vector<std::string> errors, warnings, hostnames;
};

// Decodes serialized XSpace bytes. DATA_LOSS naming the message and field for bytes that are not a
// well-formed XSpace: malformed wire format, a known field of the wrong wire type, a length past its
// message's end. Unknown fields are skipped, as protobuf's parsers do. Empty bytes: an empty space.
Expected<Space> decode(std::string_view bytes);

// Counts, for a summary: planes, lines, timed events.
struct Counts {
  size_t planes = 0, lines = 0, events = 0;
};
Counts count(const Space& space);

}  // namespace plugboard::xspace
