#include "select/candidate_span.h"

#include <algorithm>
#include <cmath>

namespace plugboard::select {

CandidateSpan::CandidateSpan(const CandidateReport& report) : report_(report), span_("candidate", "select") {
  if (span_) span_.arg("candidate", report.candidate.name).arg("path", report.candidate.path.string());
}

CandidateSpan::~CandidateSpan() {
  if (!span_) return;
  span_.arg("verdict", verdict_name(report_.verdict));
  if (report_.error) span_.arg("error", report_.error->to_string());
}

void CandidateSpan::stages(const char* how) {
  const auto& stages = report_.stages;
  const size_t from = std::min(recorded_, stages.size());
  recorded_ = stages.size();
  if (!span_ || from == stages.size()) return;
  // Laid out backwards from now, never before the candidate's span began nor the stages recorded before.
  const int64_t floor = std::max(span_.start_ns(), recorded_end_);
  std::vector<int64_t> starts(stages.size() - from);
  int64_t end = trace::now();
  for (size_t i = stages.size(); i-- > from;) {
    const auto ns = static_cast<int64_t>(std::llround(std::max(0.0, stages[i].ms) * 1e6));
    end = std::max(floor, end - ns);
    starts[i - from] = end;
  }
  const trace::Track track = trace::this_thread_track();
  for (size_t i = from; i < stages.size(); ++i) {
    const StageResult& st = stages[i];
    const int64_t start = starts[i - from];
    const int64_t stop = i + 1 < stages.size() ? starts[i + 1 - from] : trace::now();
    std::vector<trace::Arg> args{{"candidate", report_.candidate.name},
                                 {"path", report_.candidate.path.string()},
                                 {"how", how},
                                 {"outcome", st.passed ? std::string("passed") : std::string("failed")}};
    if (!st.detail.empty()) args.push_back({"detail", st.detail});
    if (!st.passed && report_.error) args.push_back({"error", report_.error->to_string()});
    const int64_t ends = std::max(start, std::min(stop, start + static_cast<int64_t>(std::llround(std::max(0.0, st.ms) * 1e6))));
    trace::record(stage_name(st.stage), "select", start, ends, track, args);
    recorded_end_ = std::max(recorded_end_, ends);
  }
}

}  // namespace plugboard::select
