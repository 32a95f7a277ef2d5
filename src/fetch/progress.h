// A one-line progress bar on stderr for long extractions and hashes; silent when disabled.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace plugboard::fetch {

class Progress {
 public:
  Progress(bool enabled, std::string label, uint64_t total);
  ~Progress();  // ends the line if anything was drawn

  void update(uint64_t done);

 private:
  void draw(uint64_t done);

  bool enabled_;
  std::string label_;
  uint64_t total_;
  bool drawn_ = false;
  int last_percent_ = -1;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace plugboard::fetch
