#include "instruction_count.h"

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define PB_HAVE_CALLGRIND 1
#endif

namespace pbbench {

bool running_under_callgrind() {
#ifdef PB_HAVE_CALLGRIND
  return RUNNING_ON_VALGRIND != 0;
#else
  return false;
#endif
}

void count_instructions(const std::string& name, const std::function<void()>& body) {
  if (!running_under_callgrind()) return;
#ifdef PB_HAVE_CALLGRIND
  body();
  CALLGRIND_ZERO_STATS;
  CALLGRIND_TOGGLE_COLLECT;
  for (int64_t i = 0; i < kCountedIterations; ++i) body();
  CALLGRIND_TOGGLE_COLLECT;
  CALLGRIND_DUMP_STATS_AT(name.c_str());
#endif
}

}  // namespace pbbench
