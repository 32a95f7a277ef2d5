// Instruction counts beside wall time: this machine's run-to-run spread is larger than the gaps
// the dispatch goals are about. Under valgrind's callgrind (scripts/bench_instructions.sh), a loop
// is counted alone and dumped under its name; elsewhere nothing is done.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace pbbench {

// Iterations each counted loop runs (the script divides by it).
constexpr int64_t kCountedIterations = 2000;

bool running_under_callgrind();

// Runs `body` once (warm), then kCountedIterations times with callgrind collecting, and dumps the
// counts under `name`. Does nothing (not even the warm call) outside callgrind.
void count_instructions(const std::string& name, const std::function<void()>& body);

}  // namespace pbbench
