// The compile cache: a warm hit (compile_cache::compile finding the entry in the persistent cache:
// read, checksum, PJRT_Executable_DeserializeAndLoad, signature) against a cold compile
// (Client::compile) and against the raw C API's PJRT_Executable_DeserializeAndLoad of the same
// serialized bytes, for mlp_tiny and an RNG program. Interleaved, medians of paired repetitions.
#include <fstream>
#include <sstream>

#include "base/temp_dir.h"
#include "bench_util.h"
#include "compile_cache/cached_compile.h"

namespace pbbench {

Table bench_compile_cache(Context& ctx) {
  using namespace plugboard;
  Table tab;
  tab.title = "compile cache: warm hit vs cold compile vs raw DeserializeAndLoad (median ms)";
  tab.header = {"program", "compile", "raw deserialize", "cache hit", "hit/raw", "compile/hit", "entry KiB", "reps"};
  auto dir = value_or_throw(TempDir::create(std::filesystem::temp_directory_path(), "pb-bench-cache-"), "TempDir");
  compile_cache::CompileSources sources;
  sources.cache.emplace(dir.path());
  const CompileOptions options;
  for (const char* name : {"mlp_tiny", "rng_threefry_bits"}) {
    const std::filesystem::path path = ctx.opt.cases / name / "program.mlir";
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + path.string() + " (use --cases DIR)");
    std::ostringstream text;
    text << in.rdbuf();
    const Program program = value_or_throw(Program::from_bytes(text.str(), path.string()), "Program::from_bytes");
    // Warm the cache: one compile stores the entry.
    auto stored = value_or_throw(compile_cache::compile(*ctx.client, program, options, sources), "compile_cache::compile");
    const std::string serialized = value_or_throw(stored.executable->serialize(), "serialize");
    std::vector<Batch> variants = {
        batch([&] { (void)value_or_throw(ctx.client->compile(program, options), "Client::compile"); }),
        batch([&] {
          RAW_ARGS(PJRT_Executable_DeserializeAndLoad_Args, d);
          d.client = ctx.raw_client;
          d.serialized_executable = serialized.data();
          d.serialized_executable_size = serialized.size();
          raw_check(ctx.api, ctx.api->PJRT_Executable_DeserializeAndLoad(&d), "PJRT_Executable_DeserializeAndLoad");
          raw_executable_destroy(ctx.api, d.loaded_executable);
        }),
        batch([&] {
          auto hit = value_or_throw(compile_cache::compile(*ctx.client, program, options, sources), "cache hit");
          if (hit.origin != compile_cache::Origin::kCompileCache) throw std::runtime_error("expected a cache hit");
        }),
    };
    for (auto& v : variants) v(1);
    const int reps = ctx.opt.quick ? 3 : 9;
    auto t = run_interleaved(variants, {1, 1, 1}, reps);
    const double compile_ms = median(t[0]) * 1e3, raw_ms = median(t[1]) * 1e3, hit_ms = median(t[2]) * 1e3;
    tab.goal(std::string(name) + ": cache hit / raw DeserializeAndLoad", paired_ratio(t[2], t[1]), 1.2, true);
    tab.goal(std::string(name) + ": compile / cache hit", paired_ratio(t[0], t[2]), 20, false);
    tab.rows.push_back({name, fmt("%.2f", compile_ms), fmt("%.2f", raw_ms), fmt("%.2f", hit_ms),
                        fmt("%.3fx", paired_ratio(t[2], t[1])), fmt("%.1fx", paired_ratio(t[0], t[2])),
                        fmt("%.0f", std::filesystem::file_size(stored.entry) / 1024.0), fmt("%d", reps)});
  }
  tab.notes.push_back("cache hit = read the entry + checksum + DeserializeAndLoad + name and signature; goals: hit/raw <= 1.2, "
                      "compile/hit >= 20");
  return tab;
}

}  // namespace pbbench
