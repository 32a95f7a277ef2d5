#!/usr/bin/env python3
"""Draws the scaling tables of plugboard_bench (--only threads --only size) as PNG.

    plot_scaling.py BENCH_OUTPUT DELIVERY_OUTPUT BOOT_OUTPUT OUT_DIR

Each output is what the benchmark printed (plugboard_bench, delivery_bench, scripts/bench_boot.sh):
a text file, or the JSON file scripts/bench_record.sh recorded it in (docs/data/NAME.json).

Writes OUT_DIR/scaling_threads.png (executions per second against threads, plugboard and the raw C API,
per plugin: a plain program, and one with a blocking host callback), OUT_DIR/scaling_program_size.png (compile time and dispatch against the number of ops),
OUT_DIR/scaling_delivery.png (ordered-callback latency against receivers) and OUT_DIR/scaling_boot.png (boot time
against the targets in a bundle, with the CPU plugin alone).
"""
import json
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402



def output_of(path):
    """What a benchmark printed: a text file, or the lines a recorded docs/data/NAME.json holds."""
    if path.endswith(".json"):
        return "\n".join(json.load(open(path, encoding="utf-8"))["output"]) + "\n"
    return open(path, encoding="utf-8", errors="replace").read()


text = output_of(sys.argv[1])
delivery_text = output_of(sys.argv[2])
boot_text = output_of(sys.argv[3])
out = sys.argv[4]
sections = re.split(r"\n== ", "\n" + text)[1:]
plugins = {}
for sec in sections:
    name = sec.split()[0] + " (" + re.search(r"PJRT (\S+),", sec).group(1) + ")"
    tables = {}
    for title, body in re.findall(r"scaling: ([^\n]*)\n[^\n]*\n\s*-+\n((?:\s+\d+\s[^\n]*\n)+)", sec):
        rows = [line.split() for line in body.strip().splitlines()]
        if title.startswith("executions"):
            tables["threads_callbacks" if "callback" in title else "threads"] = rows
        else:
            tables["size"] = rows
    plugins[name] = tables


def plot_pair(ax, x, raw, pb, i, name, raw_label="raw C API"):
    """One plugin's two lines: the raw C API dashed, plugboard solid, in the plugin's colour."""
    ax.plot(x, raw, "--", marker="o", color=f"C{i}", label=f"{name} {raw_label}")
    ax.plot(x, pb, "-", marker="s", color=f"C{i}", label=f"{name} plugboard")


def column(rows, k, kind=float):
    return [kind(r[k]) for r in rows]


fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
for ax, key in ((axes[0], "threads"), (axes[1], "threads_callbacks")):
    for i, (name, t) in enumerate(plugins.items()):
        if key not in t:
            continue
        rows = t[key]
        plot_pair(ax, column(rows, 0, int), column(rows, 1), column(rows, 2), i, name)
    ax.set_xscale("log", base=2)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("threads executing on one client")
    ax.set_ylabel("executions per second")
    ax.legend(fontsize=7)
    ax.grid(True, alpha=0.3)
axes[0].set_title("add f32[4]: execute_into and the raw C API", fontsize=10)
axes[1].set_title("y = cb(x) + cb(x), a blocking host callback:\nexecute_with_callbacks and a raw FFI handler", fontsize=10)
fig.suptitle("Throughput vs callers on one client")
fig.tight_layout()
fig.savefig(f"{out}/scaling_threads.png", dpi=110)

fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4.2))
for i, (name, t) in enumerate(plugins.items()):
    if "size" not in t:
        continue
    rows = t["size"]
    x = column(rows, 0, int)
    plot_pair(a1, x, column(rows, 1), column(rows, 2), i, name, "raw")
    plot_pair(a2, x, column(rows, 4), column(rows, 5), i, name, "raw")
for a, label in ((a1, "compile time (ms)"), (a2, "execute + await (us)")):
    a.set_xscale("log")
    a.set_yscale("log")
    a.set_xlabel("ops in the program (elementwise chain on f32[64])")
    a.set_ylabel(label)
    a.grid(True, alpha=0.3)
    a.legend(fontsize=7)
fig.suptitle("Compile and dispatch vs program size")
fig.tight_layout()
fig.savefig(f"{out}/scaling_program_size.png", dpi=110)

def numeric_rows(text, width):
    """The rows of a table printed by delivery_bench / boot_bench: lines of `width` leading numbers."""
    rows = []
    for line in text.splitlines():
        cells = line.split()
        try:
            rows.append([float(c) for c in cells[:width]])
        except ValueError:
            continue
        if len(cells) < width:
            rows.pop()
    return rows



def finish(fig, ax, xlabel, ylabel, title, name):
    """Labels, grid and legend of a one-axes figure, saved as OUT_DIR/name."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(f"{out}/{name}", dpi=110)


rows = numeric_rows(delivery_text, 5)
fig, ax = plt.subplots(figsize=(7, 4.2))
ax.plot([r[0] for r in rows], [r[1] for r in rows], "-", marker="o", label="median")
ax.plot([r[0] for r in rows], [r[2] for r in rows], "--", marker="s", label="99th percentile")
ax.set_xscale("log")
ax.set_yscale("log")
finish(fig, ax, "receivers (ordered-delivery queues)", "post -> task starts (us)",
       "Ordered-callback delivery latency vs receivers", "scaling_delivery.png")

# The first run's table (bench_boot.sh --runs N prints one per run, then how far apart they are).
rows = numeric_rows(boot_text.split("run 2 of")[0], 5)
fig, ax = plt.subplots(figsize=(7, 4.2))
plot_pair(ax, [r[0] for r in rows], [r[2] for r in rows], [r[1] for r in rows], 0, "boot:", "CPU plugin alone")
ax.set_ylim(bottom=0)
finish(fig, ax, "targets in the bundle (cpu, cuda13, rocm7, then probed-out and failing ones)",
       "process start -> ready client (ms)", "Boot time vs targets in a bundle", "scaling_boot.png")
print(f"wrote {out}/scaling_threads.png, scaling_program_size.png, scaling_delivery.png and scaling_boot.png")
