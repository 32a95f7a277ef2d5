#include "select/isolate_protocol.h"

#include <nlohmann/json.hpp>

#include "select/create_options_json.h"

namespace plugboard::select::isolate_protocol {
using json = nlohmann::ordered_json;

std::string encode_candidate(const Candidate& c) {
  json j;
  j["name"] = c.name;
  j["platform"] = c.platform;
  j["source"] = c.source;
  j["path"] = c.path.string();
  j["create_options"] = create_options_to_json(c.create_options);
  return j.dump();
}

Expected<Candidate> decode_candidate(const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("path") || !j["path"].is_string())
    return invalid_argument("isolation helper: the candidate argument is not the JSON the parent sends");
  Candidate c;
  c.name = j.value("name", "");
  c.platform = j.value("platform", "");
  c.source = j.value("source", "");
  c.path = j["path"].get<std::string>();
  if (j.contains("create_options")) {
    PB_ASSIGN_OR_RETURN(c.create_options, create_options_from_json(j["create_options"], "create_options"));
  }
  return c;
}

std::string encode_stage(const StageResult& s, const Error* error) {
  json j;
  j["stage"] = stage_name(s.stage);
  j["passed"] = s.passed;
  j["ms"] = s.ms;
  j["detail"] = s.detail;
  if (error) {
    j["code"] = static_cast<int>(error->code());
    j["message"] = error->message();
    j["context"] = error->context();
  }
  return j.dump();
}

Expected<DecodedStage> decode_stage(const std::string& line) {
  json j = json::parse(line, nullptr, false);
  auto bad = [&] { return invalid_argument("isolation helper sent a line that is not a stage report: " + line.substr(0, 200)); };
  if (j.is_discarded() || !j.is_object() || !j.contains("stage") || !j["stage"].is_string()) return bad();
  std::optional<Stage> stage = parse_stage(j["stage"].get<std::string>());
  if (!stage) return bad();
  DecodedStage out{{*stage, j.value("passed", false), j.value("ms", 0.0), j.value("detail", "")}, std::nullopt};
  if (j.contains("code")) {
    Error e(static_cast<Code>(j.value("code", 2)), j.value("message", ""));
    if (j.contains("context") && j["context"].is_array())
      for (const auto& c : j["context"])
        if (c.is_string()) e.annotate(c.get<std::string>());
    out.error = std::move(e);
  }
  return out;
}

}  // namespace plugboard::select::isolate_protocol
