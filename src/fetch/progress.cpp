// Progress: "\r<label> [#####     ]  52%  135/260 MB", redrawn at most every 100 ms or per percent.
#include "fetch/progress.h"

#include <cstdio>

namespace plugboard::fetch {

Progress::Progress(bool enabled, std::string label, uint64_t total)
    : enabled_(enabled), label_(std::move(label)), total_(total) {}

Progress::~Progress() {
  if (drawn_) {
    draw(total_);
    std::fputc('\n', stderr);
  }
}

void Progress::update(uint64_t done) {
  if (!enabled_ || total_ == 0) return;
  const int percent = static_cast<int>(done * 100 / total_);
  const auto now = std::chrono::steady_clock::now();
  if (percent == last_percent_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_percent_ = percent;
  last_draw_ = now;
  draw(done);
}

void Progress::draw(uint64_t done) {
  constexpr int kWidth = 30;
  if (done > total_) done = total_;
  const int filled = total_ ? static_cast<int>(done * kWidth / total_) : kWidth;
  std::string bar(filled, '#');
  bar.resize(kWidth, ' ');
  std::fprintf(stderr, "\r%s [%s] %3d%%  %llu/%llu MB", label_.c_str(), bar.c_str(),
               total_ ? static_cast<int>(done * 100 / total_) : 100,
               static_cast<unsigned long long>(done >> 20), static_cast<unsigned long long>(total_ >> 20));
  std::fflush(stderr);
  drawn_ = true;
}

}  // namespace plugboard::fetch
