// Array dimensions with inline storage for the common ranks, so that buffers made on the execute
// path cost no heap allocation for their shape.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <utility>
#include <vector>

namespace plugboard {

class Dims {
 public:
  static constexpr size_t kInline = 6;

  Dims() = default;
  Dims(std::span<const int64_t> d) { assign(d); }
  Dims(std::initializer_list<int64_t> d) { assign(std::span<const int64_t>(d.begin(), d.size())); }
  Dims(const std::vector<int64_t>& d) { assign(std::span<const int64_t>(d)); }
  Dims(const Dims& o) { assign(o.span()); }
  Dims& operator=(const Dims& o) {
    if (this != &o) assign(o.span());
    return *this;
  }
  // A moved-from Dims is empty (rank 0): its size never outlives the storage it described.
  Dims(Dims&& o) noexcept { take(o); }
  Dims& operator=(Dims&& o) noexcept {
    if (this != &o) take(o);
    return *this;
  }

  size_t size() const { return size_; }
  const int64_t* data() const { return heap_ ? heap_.get() : inline_; }
  std::span<const int64_t> span() const { return {data(), size_}; }
  int64_t operator[](size_t i) const { return data()[i]; }
  std::vector<int64_t> to_vector() const { return {data(), data() + size_}; }
  bool operator==(const Dims& o) const { return std::ranges::equal(span(), o.span()); }
  bool operator==(std::span<const int64_t> o) const { return std::ranges::equal(span(), o); }

 private:
  void take(Dims& o) noexcept {
    size_ = std::exchange(o.size_, 0);
    heap_ = std::move(o.heap_);
    if (!heap_) std::copy(o.inline_, o.inline_ + size_, inline_);
  }
  // size_ changes only once the storage for it exists: a failed allocation leaves the old value whole.
  void assign(std::span<const int64_t> d) {
    if (d.size() <= kInline) {
      heap_.reset();
      std::copy(d.begin(), d.end(), inline_);
    } else {
      auto heap = std::make_unique<int64_t[]>(d.size());
      std::copy(d.begin(), d.end(), heap.get());
      heap_ = std::move(heap);
    }
    size_ = d.size();
  }

  size_t size_ = 0;
  int64_t inline_[kInline] = {};
  std::unique_ptr<int64_t[]> heap_;
};

}  // namespace plugboard
