#include "select/isolate_protocol.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "base/strict_json.h"
#include "select/create_options_json.h"

namespace plugboard::select::isolate_protocol {
namespace {
namespace sj = strict_json;
using ojson = nlohmann::ordered_json;

// Strings that are not UTF-8 (a plugin's message, a path) are replaced, never thrown over.
std::string dump(const ojson& j) { return j.dump(-1, ' ', false, ojson::error_handler_t::replace); }

Expected<std::string> optional_string(const sj::json& j, const char* key, sj::Text rule) {
  PB_ASSIGN_OR_RETURN(auto v, sj::get_optional_string(j, key, "", rule));
  return v.value_or("");
}

}  // namespace

std::string encode_candidate(const Candidate& c) {
  ojson j;
  j["name"] = c.name;
  j["platform"] = c.platform;
  j["source"] = c.source;
  j["path"] = c.path.string();
  j["create_options"] = create_options_to_json(c.create_options);
  return dump(j);
}

Expected<Candidate> decode_candidate(const std::string& text) {
  auto parsed = sj::parse(text, "the candidate argument");
  auto bad = [](const Error& e) {
    return invalid_argument("isolation helper: the candidate argument is not the JSON the parent sends: " + e.message());
  };
  if (!parsed) return bad(parsed.error());
  const sj::json& j = *parsed;
  Candidate c;
  auto path = sj::get_string(j, "path", "", sj::Text::kNoControl);
  if (!path) return bad(path.error());
  c.path = *path;
  for (auto [key, value] : {std::pair{"name", &c.name}, std::pair{"platform", &c.platform}, std::pair{"source", &c.source}}) {
    auto v = optional_string(j, key, sj::Text::kAny);
    if (!v) return bad(v.error());
    *value = std::move(*v);
  }
  if (auto it = j.find("create_options"); it != j.end()) {
    PB_ASSIGN_OR_RETURN(c.create_options, create_options_from_json(*it, "create_options"));
  }
  return c;
}

std::string encode_stage(const StageResult& s, const Error* error) {
  ojson j;
  j["stage"] = stage_name(s.stage);
  j["passed"] = s.passed;
  j["ms"] = s.ms;
  j["detail"] = s.detail;
  if (error) {
    j["code"] = static_cast<int>(error->code());
    j["message"] = error->message();
    j["context"] = error->context();
  }
  return dump(j);
}

// The child's answer is untrusted (a plugin shares its stdout): every field is type-checked, and a line
// that is not a stage report is an error value, never an exception.
Expected<DecodedStage> decode_stage(const std::string& line) {
  auto bad = [&](const std::string& why) {
    return invalid_argument("isolation helper sent a line that is not a stage report (" + why + "): " + line.substr(0, 200));
  };
  auto parsed = sj::parse(line, "the line");
  if (!parsed) return bad(parsed.error().message());
  const sj::json& j = *parsed;
  auto name = sj::get_string(j, "stage", "");
  if (!name) return bad(name.error().message());
  std::optional<Stage> stage = parse_stage(*name);
  if (!stage) return bad("unknown stage");
  auto passed = sj::get_bool(j, "passed", "");
  if (!passed) return bad(passed.error().message());
  double ms = 0;
  if (auto it = j.find("ms"); it != j.end()) {
    if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0) return bad("ms must be a duration");
    ms = it->get<double>();
  }
  auto detail = optional_string(j, "detail", sj::Text::kAny);
  if (!detail) return bad(detail.error().message());
  DecodedStage out{{*stage, *passed, ms, std::move(*detail)}, std::nullopt};
  if (j.contains("code")) {
    auto code = sj::get_int(j, "code", "", static_cast<int64_t>(Code::kCancelled), static_cast<int64_t>(Code::kUnauthenticated));
    if (!code) return bad(code.error().message());
    auto message = optional_string(j, "message", sj::Text::kAny);
    if (!message) return bad(message.error().message());
    Error e(static_cast<Code>(*code), std::move(*message));
    if (auto it = j.find("context"); it != j.end()) {
      if (!it->is_array()) return bad("context must be a list");
      for (const auto& c : *it) {
        if (!c.is_string()) return bad("context must be a list of strings");
        e.annotate(c.get<std::string>());
      }
    }
    out.error = std::move(e);
  }
  return out;
}

}  // namespace plugboard::select::isolate_protocol
