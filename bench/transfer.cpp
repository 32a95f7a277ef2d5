// Host <-> device transfer of one 64 MiB f32 array, against memcpy into already-touched memory.
//   host->device copy:  raw PJRT_Client_BufferFromHostBuffer (kImmutableOnlyDuringCall) vs
//                       Client::buffer_from_host; both await the buffer's ready event and destroy it.
//   host->device pooled: Client::buffer_from_host_pooled (memcpy into a warm block of the client's
//                       pool, which the device buffer then aliases) vs the same raw copy.
//   host->device adopt: raw kMutableZeroCopy vs Client::buffer_from_host_adopt on 64-byte-aligned
//                       memory (no copy on CPU: the figure is the per-buffer overhead, shown as an
//                       "effective" bandwidth).
//   device->host:       raw PJRT_Buffer_ToHostBuffer + await vs Buffer::to_host, into touched memory.
//   round trips:        host->device->host of the same array, against two memcpys.
#include <cstdlib>

#include "bench_util.h"

namespace pbbench {
namespace {

constexpr size_t kBytes = size_t{64} << 20;
constexpr int64_t kElems = static_cast<int64_t>(kBytes / sizeof(float));

struct HostMem {
  std::byte* p;
  explicit HostMem(std::byte fill) : p(static_cast<std::byte*>(std::aligned_alloc(64, kBytes))) {
    if (!p) throw std::bad_alloc();
    std::memset(p, static_cast<int>(fill), kBytes);  // touched: no page faults in the timed loops
  }
  ~HostMem() { std::free(p); }
  HostMem(const HostMem&) = delete;
  HostMem& operator=(const HostMem&) = delete;
};

}  // namespace

Table bench_transfer(Context& ctx) {
  using namespace plugboard;
  const PJRT_Api* api = ctx.api;
  const bool quick = ctx.opt.quick;
  const int64_t dims[1] = {kElems};
  const std::span<const int64_t> dims_span(dims, 1);

  HostMem src(std::byte{0x3f}), dst(std::byte{0}), mid(std::byte{0});
  const std::span<const std::byte> src_span(src.p, kBytes);
  const std::span<std::byte> dst_span(dst.p, kBytes);

  // A device buffer that the plugin owns (a copy), the source of the device->host figures.
  Buffer device = value_or_throw(ctx.client->buffer_from_host(src_span, DType::kF32, dims_span), "buffer_from_host");
  ok_or_throw(value_or_throw(device.ready_event(), "ready_event").await(), "await");

  // ---- raw pieces ----
  auto raw_h2d = [&](PJRT_HostBufferSemantics semantics, PJRT_Event** done_with_host) {
    RAW_ARGS(PJRT_Client_BufferFromHostBuffer_Args, a);
    a.client = ctx.raw_client;
    a.data = src.p;
    a.type = PJRT_Buffer_Type_F32;
    a.dims = dims;
    a.num_dims = 1;
    a.host_buffer_semantics = semantics;
    a.device = ctx.raw_device;
    raw_check(api, api->PJRT_Client_BufferFromHostBuffer(&a), "PJRT_Client_BufferFromHostBuffer");
    *done_with_host = a.done_with_host_buffer;
    RAW_ARGS(PJRT_Buffer_ReadyEvent_Args, r);
    r.buffer = a.buffer;
    raw_check(api, api->PJRT_Buffer_ReadyEvent(&r), "PJRT_Buffer_ReadyEvent");
    raw_await_and_destroy(api, r.event, "ready event");
    return a.buffer;
  };
  auto raw_h2d_copy = [&] {
    PJRT_Event* done = nullptr;
    PJRT_Buffer* b = raw_h2d(PJRT_HostBufferSemantics_kImmutableOnlyDuringCall, &done);
    raw_await_and_destroy(api, done, "done_with_host_buffer");
    return b;
  };
  auto raw_d2h = [&](PJRT_Buffer* b) {
    RAW_ARGS(PJRT_Buffer_ToHostBuffer_Args, a);
    a.src = b;
    a.dst = dst.p;
    a.dst_size = kBytes;
    raw_check(api, api->PJRT_Buffer_ToHostBuffer(&a), "PJRT_Buffer_ToHostBuffer");
    raw_await_and_destroy(api, a.event, "ToHostBuffer event");
  };
  // Zero-copy: the plugin is done with the host memory once the buffer is gone.
  auto raw_zero_copy = [&](bool to_host) {
    PJRT_Event* done = nullptr;
    PJRT_Buffer* b = raw_h2d(PJRT_HostBufferSemantics_kMutableZeroCopy, &done);
    if (to_host) raw_d2h(b);
    raw_buffer_destroy(api, b);
    raw_await_and_destroy(api, done, "done_with_host_buffer");
  };

  // ---- plugboard pieces ----
  auto pb_copy = [&] {
    Buffer b = value_or_throw(ctx.client->buffer_from_host(src_span, DType::kF32, dims_span), "buffer_from_host");
    ok_or_throw(value_or_throw(b.ready_event(), "ready_event").await(), "await");
    return b;
  };
  auto pb_pooled = [&] {
    Buffer b = value_or_throw(ctx.client->buffer_from_host_pooled(src_span, DType::kF32, dims_span), "buffer_from_host_pooled");
    ok_or_throw(value_or_throw(b.ready_event(), "ready_event").await(), "await");
    return b;
  };
  auto pb_adopt = [&] {
    // The bench owns the memory: a no-op deleter (a user would hand over real ownership).
    std::shared_ptr<const void> keep(static_cast<const void*>(src.p), [](const void*) {});
    Buffer b = value_or_throw(ctx.client->buffer_from_host_adopt(src_span, std::move(keep), HostMemory::kMutable, DType::kF32, dims_span),
                              "buffer_from_host_adopt");
    ok_or_throw(value_or_throw(b.ready_event(), "ready_event").await(), "await");
    return b;
  };

  // Both sides must move the right bytes before their speed means anything.
  auto verify = [&](const char* what) {
    if (std::memcmp(dst.p, src.p, kBytes) != 0) throw std::runtime_error(std::string(what) + " returned wrong bytes");
    std::memset(dst.p, 0, kBytes);
  };
  raw_d2h(device.raw());
  verify("raw ToHostBuffer");
  ok_or_throw(device.to_host(dst_span), "to_host");
  verify("Buffer::to_host");
  ok_or_throw(pb_adopt().to_host(dst_span), "to_host");
  verify("buffer_from_host_adopt + to_host");
  ok_or_throw(pb_pooled().to_host(dst_span), "to_host");
  verify("buffer_from_host_pooled + to_host");
  {
    PJRT_Buffer* b = raw_h2d_copy();
    raw_d2h(b);
    raw_buffer_destroy(api, b);
    verify("raw BufferFromHostBuffer + ToHostBuffer");
  }

  enum V {
    kMemcpy, kRawH2D, kPbH2D, kRawZero, kPbAdopt, kRawD2H, kPbD2H,
    kMemcpy2, kRawRt, kPbRt, kRawRtZero, kPbRtAdopt, kFresh, kPbPooled, kPbRtPooled, kCount
  };
  std::vector<Batch> variants(kCount);
  variants[kMemcpy] = batch([&] {
    std::memcpy(dst.p, src.p, kBytes);
    clobber(dst.p);
  });
  variants[kRawH2D] = batch([&] { raw_buffer_destroy(api, raw_h2d_copy()); });
  variants[kPbH2D] = batch([&] { (void)pb_copy(); });
  variants[kRawZero] = batch([&] { raw_zero_copy(false); });
  variants[kPbAdopt] = batch([&] { (void)pb_adopt(); });
  variants[kPbPooled] = batch([&] { (void)pb_pooled(); });
  variants[kPbRtPooled] = batch([&] { ok_or_throw(pb_pooled().to_host(dst_span), "to_host"); });
  variants[kRawD2H] = batch([&] { raw_d2h(device.raw()); });
  variants[kPbD2H] = batch([&] { ok_or_throw(device.to_host(dst_span), "to_host"); });
  // The floor for any copy into memory allocated per transfer: malloc + first touch + free.
  variants[kFresh] = batch([&] {
    void* p = std::aligned_alloc(64, kBytes);
    if (!p) throw std::bad_alloc();
    std::memcpy(p, src.p, kBytes);
    clobber(p);
    std::free(p);
  });
  variants[kMemcpy2] = batch([&] {
    std::memcpy(mid.p, src.p, kBytes);
    clobber(mid.p);
    std::memcpy(dst.p, mid.p, kBytes);
    clobber(dst.p);
  });
  variants[kRawRt] = batch([&] {
    PJRT_Buffer* b = raw_h2d_copy();
    raw_d2h(b);
    raw_buffer_destroy(api, b);
  });
  variants[kPbRt] = batch([&] { ok_or_throw(pb_copy().to_host(dst_span), "to_host"); });
  variants[kRawRtZero] = batch([&] { raw_zero_copy(true); });
  variants[kPbRtAdopt] = batch([&] { ok_or_throw(pb_adopt().to_host(dst_span), "to_host"); });

  // Warm up (first-touch of the plugin's allocations, thread pools), then size each variant.
  const double rep_s = quick ? 0.012 : 0.04;
  const int reps = quick ? 4 : 9;
  std::vector<int64_t> iters(kCount);
  for (size_t i = 0; i < kCount; ++i) {
    if (!quick) variants[i](1);  // (in --quick the calibration run is the warm-up)
    iters[i] = calibrate(variants[i], rep_s);
  }
  auto t = run_interleaved(variants, iters, reps);

  const double gb = static_cast<double>(kBytes) / 1e9;
  auto gbps = [&](int v) { return gb / median(t[v]); };
  // Bandwidth ratio x/y = time(y)/time(x), paired per repetition.
  auto bw_ratio = [&](int x, int y) { return paired_ratio(t[y], t[x]); };
  auto goal = [](double r) { return std::string(r >= 0.9 ? ">=0.9 ok" : ">=0.9 MISS"); };

  Table tab;
  tab.title = "transfer: one 64 MiB f32 array (median GB/s; ratios are bandwidth ratios)";
  tab.header = {"direction", "memcpy", "raw C API", "plugboard", "raw/memcpy", "pb/memcpy", "pb/raw", "goal pb/memcpy",
                "spread raw", "spread pb"};
  auto row = [&](const char* name, int base, int raw, int pb, bool with_goal) {
    tab.rows.push_back({name, fmt("%.2f", gbps(base)), fmt("%.2f", gbps(raw)), fmt("%.2f", gbps(pb)),
                        fmt("%.3fx", bw_ratio(raw, base)), fmt("%.3fx", bw_ratio(pb, base)),
                        fmt("%.3fx", bw_ratio(pb, raw)), with_goal ? goal(bw_ratio(pb, base)) : "-",
                        fmt("%.1f%%", spread_pct(t[raw])), fmt("%.1f%%", spread_pct(t[pb]))});
  };
  row("host->device copy", kMemcpy, kRawH2D, kPbH2D, true);
  row("host->device pooled copy", kMemcpy, kRawH2D, kPbPooled, true);
  tab.goal("64 MiB host->device pooled copy / memcpy", bw_ratio(kPbPooled, kMemcpy), 0.9, false);
  tab.goal("64 MiB device->host / memcpy", bw_ratio(kPbD2H, kMemcpy), 0.9, false);
  row("host->device adopt (zero-copy)", kMemcpy, kRawZero, kPbAdopt, true);
  row("device->host", kMemcpy, kRawD2H, kPbD2H, true);
  row("round trip, copy + to_host", kMemcpy2, kRawRt, kPbRt, true);
  row("round trip, pooled + to_host", kMemcpy2, kRawRt, kPbRtPooled, true);
  row("round trip, adopt + to_host", kMemcpy2, kRawRtZero, kPbRtAdopt, true);
  tab.notes.push_back(fmt("memcpy: into touched memory, %.2f GB/s one way (round-trip rows: two memcpys, %.2f GB/s)",
                          gbps(kMemcpy), gbps(kMemcpy2)));
  tab.notes.push_back(fmt("memcpy into freshly allocated memory (aligned_alloc + memcpy + free): %.2f GB/s, "
                          "%.3fx of memcpy: the floor for a copy into a new device buffer",
                          gbps(kFresh), bw_ratio(kFresh, kMemcpy)));
  tab.notes.push_back("pooled rows: plugboard's buffer_from_host_pooled against the raw copy (kImmutableOnlyDuringCall)");
  tab.notes.push_back(fmt("adopt per buffer: raw zero-copy %.1f us, plugboard %.1f us (no bytes move on CPU)",
                          median(t[kRawZero]) * 1e6, median(t[kPbAdopt]) * 1e6));
  tab.notes.push_back(fmt("%d reps, interleaved; GB/s = 64 MiB (%.4f GB) / median time of one transfer; ratios: median "
                          "of paired per-rep ratios; spread: interquartile range / median", reps, gb));
  return tab;
}

}  // namespace pbbench
