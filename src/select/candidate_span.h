// A candidate's time in a trace: one span per candidate ("candidate", its name, path and verdict), and
// under it one per stage, named by the stage, with its outcome. The stages' times are the report's
// own (each stage is timed once, for the report): they are drawn back to back, ending when they are
// recorded. Off, it costs what any instrumented site does (base/trace.h).
#pragma once

#include <cstddef>

#include "base/trace.h"
#include "select/report.h"

namespace plugboard::select {

class CandidateSpan {
 public:
  explicit CandidateSpan(const CandidateReport& report);
  ~CandidateSpan();
  CandidateSpan(const CandidateSpan&) = delete;
  CandidateSpan& operator=(const CandidateSpan&) = delete;

  // Records the stages the report gained since the last call (`how`: "isolated" for a child's).
  void stages(const char* how = "in process");
  // The report's stages were cut back (a child's replaced by this process's): later ones are new.
  void recorded_up_to_now() { recorded_ = report_.stages.size(); }

 private:
  const CandidateReport& report_;
  size_t recorded_ = 0;
  int64_t recorded_end_ = 0;  // where the stages recorded so far end
  trace::Scope span_;
};

}  // namespace plugboard::select
