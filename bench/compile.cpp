// Compile time: raw PJRT_Client_Compile (+ PJRT_LoadedExecutable_Destroy) against Client::compile
// (which also reads the executable's name and signature) and dropping the Executable, with the
// same program bytes and the same serialized CompileOptions.
#include <fstream>
#include <sstream>

#include "bench_util.h"

namespace pbbench {

Table bench_compile(Context& ctx) {
  using namespace plugboard;
  const std::filesystem::path path = ctx.opt.cases / "mlp_tiny" / "program.mlir";
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string() + " (use --cases DIR)");
  std::ostringstream text;
  text << in.rdbuf();
  const std::string code = text.str();

  const Program program = value_or_throw(Program::from_bytes(code, "mlp_tiny/program.mlir"), "Program::from_bytes");
  const CompileOptions options;
  const std::string options_bytes = options.serialize();

  std::vector<Batch> variants = {
      batch([&] { raw_executable_destroy(ctx.api, raw_compile(ctx, code, options_bytes)); }),
      batch([&] { (void)value_or_throw(ctx.client->compile(program, options), "Client::compile"); }),
  };
  for (auto& v : variants) v(1);  // warm-up: the first compile initializes the compiler
  const int reps = ctx.opt.quick ? 3 : 9;
  auto t = run_interleaved(variants, {1, 1}, reps);

  // Where plugboard's extra time goes: the signature query asks the plugin for the optimized HLO
  // module twice (size, then bytes). Timed raw on one compiled executable.
  PJRT_LoadedExecutable* loaded = raw_compile(ctx, code, options_bytes);
  size_t hlo_bytes = 0;
  auto query = batch([&] {
    RAW_ARGS(PJRT_LoadedExecutable_GetExecutable_Args, g);
    g.loaded_executable = loaded;
    raw_check(ctx.api, ctx.api->PJRT_LoadedExecutable_GetExecutable(&g), "PJRT_LoadedExecutable_GetExecutable");
    RAW_ARGS(PJRT_Program, prog);
    RAW_ARGS(PJRT_Executable_OptimizedProgram_Args, o);
    o.executable = g.executable;
    o.program = &prog;
    raw_check(ctx.api, ctx.api->PJRT_Executable_OptimizedProgram(&o), "PJRT_Executable_OptimizedProgram");
    std::string bytes(prog.code_size, '\0');
    prog.code = bytes.data();
    raw_check(ctx.api, ctx.api->PJRT_Executable_OptimizedProgram(&o), "PJRT_Executable_OptimizedProgram");
    hlo_bytes = bytes.size();
    RAW_ARGS(PJRT_Executable_Destroy_Args, d);
    d.executable = g.executable;
    raw_check(ctx.api, ctx.api->PJRT_Executable_Destroy(&d), "PJRT_Executable_Destroy");
  });
  std::vector<double> query_s;
  for (int i = 0; i < reps; ++i) query_s.push_back(query(1));
  raw_executable_destroy(ctx.api, loaded);

  const double raw_ms = median(t[0]) * 1e3, pb_ms = median(t[1]) * 1e3;
  std::vector<double> diffs;  // paired: adjacent compiles, so drift cancels
  for (size_t i = 0; i < t[0].size(); ++i) diffs.push_back((t[1][i] - t[0][i]) * 1e3);
  Table tab;
  tab.title = "compile: mlp_tiny/program.mlir (median ms per compile)";
  tab.header = {"program", "raw C API", "plugboard", "pb/raw", "extra ms", "spread raw", "spread pb", "reps"};
  tab.rows.push_back({"mlp_tiny", fmt("%.2f", raw_ms), fmt("%.2f", pb_ms), fmt("%.3fx", paired_ratio(t[1], t[0])),
                      fmt("%+.2f", median(diffs)), fmt("%.1f%%", spread_pct(t[0])), fmt("%.1f%%", spread_pct(t[1])),
                      fmt("%d", reps)});
  tab.notes.push_back("pb/raw, extra ms: medians of paired per-rep ratios / differences; spread: interquartile range / median");
  tab.notes.push_back(fmt("plugboard's signature query alone, timed raw (GetExecutable + OptimizedProgram x2, %zu bytes of HLO): %.2f ms", hlo_bytes,
                          median(query_s) * 1e3));
  tab.notes.push_back("plugboard = PJRT_Client_Compile + GetExecutable + Name + OptimizedProgram (x2) + HLO parse "
                      "+ output types/dims");
  return tab;
}

}  // namespace pbbench
