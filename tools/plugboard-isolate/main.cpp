// plugboard-isolate: runs the load and create stages of one candidate and reports each stage as a JSON
// line on stdout (select/isolate_protocol.h). The parent (select/isolate.cpp) spawns it so that a
// plugin that crashes or hangs while starting takes only this process down.
#include <cstdio>
#include <string>

#include "select/isolate_protocol.h"
#include "select/start.h"

int main(int argc, char** argv) {
  using namespace plugboard::select;
  if (argc != 2) {
    std::fprintf(stderr, "usage: plugboard-isolate CANDIDATE_JSON (spawned by plugboard, not run by hand)\n");
    return 2;
  }
  auto candidate = isolate_protocol::decode_candidate(argv[1]);
  if (!candidate) {
    std::fprintf(stderr, "plugboard-isolate: %s\n", candidate.error().to_string().c_str());
    return 2;
  }
  StartOutcome outcome = start_in_process(*candidate, [](const StageResult& s, const plugboard::Error* e) {
    std::string line = isolate_protocol::encode_stage(s, e) + "\n";
    std::fwrite(line.data(), 1, line.size(), stdout);
    std::fflush(stdout);
  });
  // Leave without running the plugins' static destructors: they may not expect it, and the parent has
  // heard all it needs.
  std::fflush(nullptr);
  std::_Exit(outcome.client || outcome.failed_stage ? 0 : 1);
}
