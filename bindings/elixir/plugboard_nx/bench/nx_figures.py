#!/usr/bin/env python3
"""The Nx guide's benchmark figures, made from the recorded data rather than typed: reads the
`figures: {JSON}` lines (one per CPU plugin) of docs/data/nx_bench.json (the run bench/nx_bench.sh
--record recorded with scripts/bench_record.sh) and

  * writes the table between the markers `<!-- figures: nx_bench -->` and `<!-- /figures -->` in
    docs/nx.md, with a line saying what measured it (machine, software, commit, command, date);
  * draws docs/images/nx_dispatch.png (what a cached jit of x + 1 costs, part by part, per plugin)
    when matplotlib is there (scripts/plot_venv.sh).

    nx_figures.py REPO_ROOT            rewrite the table (and the plot)
    nx_figures.py REPO_ROOT --check    exit 1 when the guide's table is not what the data gives
                                       (ctest docs.figures: a figure edited by hand, or data without its table)
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../../bench"))
import figures as recorded  # noqa: E402  (bench/figures.py: the provenance line every figure carries)

BEGIN, END = "<!-- figures: nx_bench -->", "<!-- /figures -->"


def plugin_label(plugin):
    """xla_cpu_081 -> 0.81, xla_cpu_115 -> 0.115: the plugin's PJRT API version, as the guides name it."""
    folder = plugin["plugin"].split("/")[0]
    m = re.match(r"xla_cpu_(\d+)$", folder)
    return f"0.{m.group(1).lstrip('0')}" if m else folder


def load(root):
    """The recorded run and its plugins' figures, in the order of their API versions (0.81, 0.106, 0.115)."""
    path = os.path.join(root, "docs/data/nx_bench.json")
    if not os.path.exists(path):
        sys.exit("nx_figures: no docs/data/nx_bench.json (run bindings/elixir/plugboard_nx/bench/nx_bench.sh --record)")
    with open(path, encoding="utf-8") as f:
        record = json.load(f)
    plugins = [json.loads(line[len("figures: "):]) for line in record["output"] if line.startswith("figures: ")]
    if not plugins:
        sys.exit("nx_figures: docs/data/nx_bench.json holds no `figures:` line (a run of an older nx_bench.exs?)")

    def order(plugin):
        label = plugin_label(plugin)
        return (0, int(label.split(".")[1])) if re.match(r"0\.\d+$", label) else (1, label)
    return record, sorted(plugins, key=order)


def us(v):
    return f"{v:.2f} µs"


def table(record, records):
    fig = [r["figures"] for r in records]
    rows = [
        ("cached `jit` of `x + 1` (f32[4], argument on the device)", [us(f["jit_us"]) for f in fig]),
        ("the same program through `Plugboard.run`", [f"{us(f['run_us'])} (Nx layer +{f['jit_us'] - f['run_us']:.2f})" for f in fig]),
        ("of the Nx layer: Nx.Defn's own dispatch (a compiler that runs nothing)", [us(f["nx_defn_dispatch_us"]) for f in fig]),
        ("of the Nx layer: Plugboard.Nx's own", [f"+{f['jit_us'] - f['run_us'] - f['nx_defn_dispatch_us']:.2f} µs" for f in fig]),
        ("`Nx.Defn.Evaluator` on `Nx.BinaryBackend`", [us(f["evaluator_us"]) for f in fig]),
        ("`runtime_call` round trip into the calling process, per call (100 chained against none)", [us(f["runtime_call_us"]) for f in fig]),
        ("plugboard's own blocking callback, same run (the Nx layer's share)",
         [f"{us(f['blocking_callback_us'])} (+{f['runtime_call_us'] - f['blocking_callback_us']:.1f})" for f in fig]),
        ("MLP training step (forward + grad, batch 128, 64→128→10)", [f"{f['mlp_step_ms']:.2f} ms" for f in fig]),
        ("the same on `Nx.BinaryBackend` (Evaluator)",
         [f"{f['mlp_step_binary_backend_ms']:.0f} ms ({f['mlp_step_binary_backend_ms'] / f['mlp_step_ms']:.0f}×)" for f in fig]),
        ("emitting that step's StableHLO; XLA's compile of it", [f"{f['mlp_emit_ms']:.2f} ms; {f['mlp_compile_ms']:.0f} ms" for f in fig]),
    ]
    head = "| | " + " | ".join(plugin_label(r) for r in records) + " |"
    lines = [head, "|---" * (len(records) + 1) + "|"] + [f"| {name} | " + " | ".join(cells) + " |" for name, cells in rows]
    nx = ", ".join(sorted({r["nx"] for r in records}))
    lines += ["", f"Nx {nx}. " + recorded.provenance("nx_bench", record) + " The table and the plot are made from its "
              "`figures:` lines by `bindings/elixir/plugboard_nx/bench/nx_figures.py`."]
    return "\n".join(lines)


def plot(records, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("nx_figures: no matplotlib (scripts/plot_venv.sh): the plot is left as it is")
        return
    labels = [plugin_label(r) for r in records]
    fig = [r["figures"] for r in records]
    run = [f["run_us"] for f in fig]
    nx_defn = [f["nx_defn_dispatch_us"] for f in fig]
    ours = [f["jit_us"] - f["run_us"] - f["nx_defn_dispatch_us"] for f in fig]
    evaluator = [f["evaluator_us"] for f in fig]
    x = range(len(labels))
    figure, axis = plt.subplots(figsize=(7, 4.4), dpi=120)
    axis.bar(x, run, 0.5, label="Plugboard.run (the NIF, the plugin's launch)", color="#4c72b0")
    axis.bar(x, nx_defn, 0.5, bottom=run, label="Nx.Defn's own dispatch", color="#dd8452")
    axis.bar(x, ours, 0.5, bottom=[a + b for a, b in zip(run, nx_defn)], label="Plugboard.Nx's own", color="#55a868")
    axis.scatter(x, evaluator, marker="_", s=900, color="black", label="Nx.Defn.Evaluator on Nx.BinaryBackend", zorder=3)
    axis.set_xticks(list(x), [f"plugin {l}" for l in labels])
    axis.set_ylabel("µs per call")
    axis.set_title("A cached jit of x + 1 (f32[4]), part by part")
    axis.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2, frameon=False)
    figure.tight_layout()
    figure.savefig(path)
    print(f"nx_figures: wrote {path}")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    root = sys.argv[1]
    check = "--check" in sys.argv[2:]
    record, records = load(root)
    guide_path = os.path.join(root, "docs/nx.md")
    with open(guide_path) as f:
        guide = f.read()
    if BEGIN not in guide or END not in guide:
        sys.exit(f"nx_figures: docs/nx.md has no {BEGIN} ... {END} markers")
    start = guide.index(BEGIN) + len(BEGIN)
    end = guide.index(END)
    wanted = "\n" + table(record, records) + "\n"
    if check:
        if guide[start:end] != wanted:
            sys.exit("docs/nx.md: the table between the nx_bench markers is not what docs/data/nx_bench.json gives "
                     "(edited by hand, or the data changed without it): run bindings/elixir/plugboard_nx/bench/nx_figures.py")
        print(f"docs/nx.md's nx_bench table is the data's ({len(records)} plugins)")
        return
    with open(guide_path, "w") as f:
        f.write(guide[:start] + wanted + guide[end:])
    print(f"nx_figures: wrote the table into {guide_path}")
    plot(records, os.path.join(root, "docs/images/nx_dispatch.png"))


if __name__ == "__main__":
    main()
