// What the parent and the plugboard-isolate child say to each other. The parent passes the candidate
// as one JSON argument; the child answers with one JSON object per line on stdout:
//   {"stage": "loaded", "passed": true, "ms": 11.2, "detail": "..."}
//   {"stage": "client", "passed": false, "ms": 2.1, "code": 14, "message": "...", "context": [...]}
#pragma once

#include <string>

#include "select/candidate.h"
#include "select/report.h"

namespace plugboard::select::isolate_protocol {

std::string encode_candidate(const Candidate& candidate);
Expected<Candidate> decode_candidate(const std::string& json);

std::string encode_stage(const StageResult& stage, const Error* error);
struct DecodedStage {
  StageResult stage;
  std::optional<Error> error;
};
Expected<DecodedStage> decode_stage(const std::string& line);

}  // namespace plugboard::select::isolate_protocol
