#!/usr/bin/env python3
"""Draws a plugboard trace (Chrome trace-event JSON) as a timeline PNG.

    trace_timeline.py TRACE.json OUT.png [--title TEXT] [--focus NAME] [--occurrence K]
                      [--category CAT]... [--width INCHES]

One row per track (a thread, a device, an Elixir process), grouped under its process (a cluster
trace has one process per node); each span is a bar coloured by its category, nested spans drawn
below the span that holds them; a bar wide enough for its name is labelled with it and its
duration. The time axis starts at the first span drawn, in µs, ms or s as the window needs.

--focus NAME zooms on one span of that name (the longest; the K-th in time order with --occurrence
K, negative K counting from the end; the one of median duration with --occurrence median): the
window is that span plus 3% either side, spans outside it are left out and tracks with nothing in
it are not drawn. --category CAT (repeatable)
keeps only spans of those categories. Reads only complete events (ph "X", ts/dur in µs) and the
process_name / thread_name / *_sort_index metadata (ph "M"); other events are ignored.

Exits 1 with a message naming the file when the trace cannot be read, is not JSON, is not a trace
or has no span to draw (or none named by --focus), 2 on a usage error. On success prints one line:
what was drawn (spans, tracks, processes, window).
"""
import argparse
import json
import math
import sys

# Categories in a fixed order, so a category keeps its colour from one picture to the next; others
# follow in the order they are met.
KNOWN_CATEGORIES = ["cli", "select", "compile", "plugin", "execute", "device", "transfer", "callback",
                    "delivery", "elixir", "nx", "serving", "cluster"]
PALETTE = ["#7f7f7f", "#8c564b", "#9467bd", "#c5b0d5", "#1f77b4", "#2ca02c", "#ff7f0e", "#d62728",
           "#e377c2", "#17becf", "#bcbd22", "#aec7e8", "#393b79", "#ffbb78", "#ff9896", "#f7b6d2",
           "#dbdb8d", "#9edae5", "#c49c94", "#c7c7c7"]


class TraceError(Exception):
    """A trace that cannot be drawn; the message names the file."""


def load(path):
    """The trace's spans and names: (spans, process names, track names, process order, track order).

    spans: dicts with pid, tid, name, cat, ts, dur (µs, floats), args. Raises TraceError."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise TraceError(f"cannot read trace '{path}': {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise TraceError(f"trace '{path}' is not UTF-8 text: {e.reason} at byte {e.start}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise TraceError(f"trace '{path}' is not JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise TraceError(f"trace '{path}' is not a Chrome trace: no traceEvents list")
    spans, processes, tracks, process_order, track_order = [], {}, {}, {}, {}
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            raise TraceError(f"trace '{path}': event {i} is not an object")
        ph = e.get("ph")
        if ph == "M":
            args = e.get("args") if isinstance(e.get("args"), dict) else {}
            key = (e.get("pid"), e.get("tid"))
            if e.get("name") == "process_name" and "name" in args:
                processes[key[0]] = str(args["name"])
            elif e.get("name") == "thread_name" and "name" in args:
                tracks[key] = str(args["name"])
            elif e.get("name") == "process_sort_index" and isinstance(args.get("sort_index"), (int, float)):
                process_order[key[0]] = args["sort_index"]
            elif e.get("name") == "thread_sort_index" and isinstance(args.get("sort_index"), (int, float)):
                track_order[key] = args["sort_index"]
        elif ph == "X":
            ts, dur = e.get("ts"), e.get("dur")
            for field, v in (("ts", ts), ("dur", dur)):
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                    raise TraceError(f"trace '{path}': event {i} ({e.get('name')!r}) has no numeric {field}")
            if dur < 0:
                raise TraceError(f"trace '{path}': event {i} ({e.get('name')!r}) has a negative dur {dur}")
            spans.append({"pid": e.get("pid"), "tid": e.get("tid"), "name": str(e.get("name", "?")),
                          "cat": str(e.get("cat", "")), "ts": float(ts), "dur": float(dur),
                          "args": e.get("args") if isinstance(e.get("args"), dict) else {}})
    if not spans:
        raise TraceError(f"trace '{path}' has no span to draw (no complete 'X' events)")
    return spans, processes, tracks, process_order, track_order


def pick_window(spans, path, focus, occurrence):
    """The (start, end) in µs to draw: the whole trace, or the focused span with a 3% margin."""
    if focus is None:
        return min(s["ts"] for s in spans), max(s["ts"] + s["dur"] for s in spans)
    named = sorted((s for s in spans if s["name"] == focus), key=lambda s: s["ts"])
    if not named:
        names = sorted({s["name"] for s in spans})
        shown = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "")
        raise TraceError(f"trace '{path}' has no span named '{focus}' (--focus); its spans: {shown}")
    if occurrence is None:
        chosen = max(named, key=lambda s: s["dur"])
    elif occurrence == "median":
        chosen = sorted(named, key=lambda s: s["dur"])[(len(named) - 1) // 2]
    elif -len(named) <= occurrence <= len(named) and occurrence != 0:
        chosen = named[occurrence - 1 if occurrence > 0 else occurrence]
    else:
        raise TraceError(f"trace '{path}' has {len(named)} spans named '{focus}'; --occurrence {occurrence} "
                         f"is not one of 1..{len(named)} or -{len(named)}..-1")
    margin = max(chosen["dur"] * 0.03, 0.5)
    return chosen["ts"] - margin, chosen["ts"] + chosen["dur"] + margin


def nests(spans):
    """Whether every two of the spans are disjoint or one holds the other."""
    open_ends = []
    for s in sorted(spans, key=lambda s: (s["ts"], -s["dur"])):
        while open_ends and open_ends[-1] <= s["ts"]:
            open_ends.pop()
        if open_ends and s["ts"] + s["dur"] > open_ends[-1]:
            return False
        open_ends.append(s["ts"] + s["dur"])
    return True


def merge_nested_lanes(spans, tracks):
    """Draws a track's lanes ("elixir x", "elixir x [2]", ...) as one row when their spans nest.

    Before 9c17cb1 the recorder gave a span of a named track the first lane free at its start; spans
    are recorded when they end, so a span that held others, recorded after them, found their lane
    busy and took the next one. Lanes whose spans overlap without nesting (two requests at once) stay
    apart."""
    groups = {}
    for key in {(s["pid"], s["tid"]) for s in spans}:
        name = tracks.get(key)
        if name is not None:
            groups.setdefault((key[0], lane_base(name)), []).append(key)
    for (pid, base), keys in groups.items():
        if len(keys) < 2:
            continue
        members = [s for s in spans if (s["pid"], s["tid"]) in keys]
        if nests(members):
            into = next((k for k in keys if tracks[k] == base), min(keys, key=lambda k: tracks[k]))
            for s in members:
                s["tid"] = into[1]


def lay_out(spans):
    """Gives each span its depth on its track (0 for the outermost); returns {track: max depth + 1}.

    Spans that overlap without nesting (which a checked trace does not have) go one level below."""
    levels = {}
    by_track = {}
    for s in spans:
        by_track.setdefault((s["pid"], s["tid"]), []).append(s)
    for key, group in by_track.items():
        group.sort(key=lambda s: (s["ts"], -s["dur"]))
        open_ends = []  # the ends of the spans holding the current one, outermost first
        deepest = 0
        for s in group:
            while open_ends and open_ends[-1] <= s["ts"]:
                open_ends.pop()
            s["depth"] = len(open_ends)
            deepest = max(deepest, s["depth"])
            open_ends.append(s["ts"] + s["dur"])
        levels[key] = deepest + 1
    return levels


def lane_base(name):
    """The track a lane belongs to: "device 0 (cpu)" for "device 0 (cpu) [2]"."""
    head, sep, tail = name.rpartition(" [")
    return head if sep and tail.endswith("]") and tail[:-1].isdigit() else name


def track_rank(name):
    """Top to bottom in a process: the Elixir processes (the callers), the threads that run the
    library's calls, the delivery threads, the devices."""
    if name.startswith("elixir "):
        return 0
    if name.startswith("device "):
        return 3
    if name.startswith("pb-delivery"):
        return 2
    return 1


def dark(hex_colour):
    """Whether black text would be hard to read on this colour (its luma under 40%)."""
    r, g, b = (int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5))
    return 0.299 * r + 0.587 * g + 0.114 * b < 0.4


def time_unit(width_us):
    if width_us < 2000:
        return "µs", 1.0
    if width_us < 2_000_000:
        return "ms", 1e3
    return "s", 1e6


def format_duration(us):
    if us < 1:
        return f"{us * 1000:.0f} ns"
    if us < 1000:
        return f"{us:.3g} µs"
    if us < 1_000_000:
        return f"{us / 1000:.3g} ms"
    return f"{us / 1e6:.3g} s"


def draw(path, out, title=None, focus=None, occurrence=None, categories=None, width=13.0):
    spans, processes, tracks, process_order, track_order = load(path)
    if categories:
        spans = [s for s in spans if s["cat"] in categories]
        if not spans:
            raise TraceError(f"trace '{path}' has no span of the categories {', '.join(categories)} (--category)")
    lo, hi = pick_window(spans, path, focus, occurrence)
    # Spans in the window, cut to it (a span wider than the window stays as wide as the window).
    shown = []
    for s in spans:
        start, end = max(s["ts"], lo), min(s["ts"] + s["dur"], hi)
        if end > start or (s["dur"] == 0 and lo <= s["ts"] <= hi):
            shown.append(dict(s, ts=start, dur=end - start, full_dur=s["dur"]))
    merge_nested_lanes(shown, tracks)
    levels = lay_out(shown)

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    first_ts = {}
    for s in shown:
        key = (s["pid"], s["tid"])
        first_ts[key] = min(first_ts.get(key, s["ts"]), s["ts"])
    pids = sorted({k[0] for k in levels},
                  key=lambda p: (process_order.get(p, 0), min(t for k, t in first_ts.items() if k[0] == p)))
    rows = []  # (pid, tid) top to bottom
    track_label = {}
    for pid in pids:
        keys = [k for k in levels if k[0] == pid]
        names = {k: tracks.get(k, f"tid {k[1]}") for k in keys}
        base_ts = {}  # a track and its lanes ("x [2]") sort together, where the first of them began
        for k in keys:
            base = lane_base(names[k])
            base_ts[base] = min(base_ts.get(base, first_ts[k]), first_ts[k])
        keys.sort(key=lambda k: (track_order.get(k, 0), track_rank(names[k]), base_ts[lane_base(names[k])],
                                 lane_base(names[k]), names[k] != lane_base(names[k]), names[k], str(k[1])))
        rows.extend(keys)
        for k in keys:  # two threads of one name (two pb-delivery threads) told apart by their tid
            same = sum(1 for j in keys if names[j] == names[k])
            track_label[k] = names[k] if same == 1 else f"{names[k]} ({k[1]})"

    cats = [c for c in KNOWN_CATEGORIES if any(s["cat"] == c for s in shown)]
    cats += sorted({s["cat"] for s in shown} - set(cats))
    colour = {c: PALETTE[KNOWN_CATEGORIES.index(c) if c in KNOWN_CATEGORIES else
                         (len(KNOWN_CATEGORIES) + i) % len(PALETTE)] for i, c in enumerate(cats)}

    unit, per_unit = time_unit(hi - lo)
    level_h = 1.0
    gap = 0.5          # between tracks
    process_gap = 1.2  # above each process's name
    y = 0.0
    row_top = {}
    process_label_y = {}
    for i, key in enumerate(rows):
        if i == 0 or rows[i - 1][0] != key[0]:
            y += process_gap
            process_label_y[key[0]] = y - 0.35
        row_top[key] = y
        y += levels[key] * level_h + gap
    total_h = y

    height = min(max(2.2, 0.95 + 0.21 * total_h), 16.0)
    fig, ax = plt.subplots(figsize=(width, height))
    ax.set_xlim(0, (hi - lo) / per_unit)
    ax.set_ylim(total_h, 0)
    fig.canvas.draw()
    bbox = ax.get_window_extent()
    px_per_us = bbox.width / ((hi - lo) if hi > lo else 1.0)
    min_w = 1.0 / px_per_us  # the narrowest bar: one pixel

    for i, key in enumerate(rows):  # a light band behind every other track
        if i % 2 == 0:
            ax.axhspan(row_top[key] - gap / 2, row_top[key] + levels[key] * level_h + gap / 2,
                       color="0.94", zorder=0, linewidth=0)
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextToPath
    font, to_path = FontProperties(size=7), TextToPath()

    def text_px(text):  # the label's width in pixels at 100 dpi
        return to_path.get_text_width_height_descent(text, font, ismath=False)[0] * 100 / 72

    # The room right of each span on its level, up to the next span there (or the window's end): a
    # span too narrow for its label gets it there when it fits.
    room = {}
    by_level = {}
    for s in shown:
        by_level.setdefault((s["pid"], s["tid"], s["depth"]), []).append(s)
    for level in by_level.values():
        level.sort(key=lambda s: s["ts"])
        for s, after in zip(level, level[1:] + [None]):
            room[id(s)] = ((after["ts"] if after else hi) - (s["ts"] + s["dur"])) * px_per_us
    for s in sorted(shown, key=lambda s: s["depth"]):
        key = (s["pid"], s["tid"])
        x = (s["ts"] - lo) / per_unit
        w = max(s["dur"], min_w) / per_unit
        top = row_top[key] + s["depth"] * level_h
        ax.add_patch(Rectangle((x, top + 0.06), w, level_h - 0.12, facecolor=colour[s["cat"]],
                               edgecolor="black", linewidth=0.3))
        bar_px = s["dur"] * px_per_us
        labels = [f"{s['name']} {format_duration(s['full_dur'])}", s["name"]]
        inside = [t for t in labels if text_px(t) + 6 <= bar_px]
        beside = [t for t in labels if text_px(t) + 8 <= room[id(s)]]
        if inside:
            ax.text(x + w / 2, top + level_h / 2, inside[0], ha="center", va="center", fontsize=7, clip_on=True,
                    color="white" if dark(colour[s["cat"]]) else "black")
        elif beside:
            ax.text(x + w + 3 / px_per_us / per_unit, top + level_h / 2, beside[0], ha="left", va="center",
                    fontsize=7, color="0.25", clip_on=True)

    ax.set_yticks([row_top[k] + levels[k] * level_h / 2 for k in rows])
    ax.set_yticklabels([track_label[k] for k in rows], fontsize=8)
    for pid, py in process_label_y.items():
        ax.text(0, py, f" {processes.get(pid, f'pid {pid}')}", fontsize=8.5, fontweight="bold",
                va="bottom", ha="left", transform=ax.get_yaxis_transform())
        ax.axhline(py + 0.1, color="0.6", linewidth=0.6)
    ax.set_xlabel(f"time ({unit}) from " + (f"just before '{focus}'" if focus else "the first span"))
    ax.grid(axis="x", alpha=0.3)
    ax.tick_params(axis="y", length=0)
    ax.legend(handles=[Patch(facecolor=colour[c], edgecolor="black", linewidth=0.3, label=c or "(none)")
                       for c in cats],
              title="category", fontsize=7, title_fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0),
              frameon=False)
    ax.set_title(title or f"{path}: {len(shown)} spans, {format_duration(hi - lo)}", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return (f"wrote {out}: {len(shown)} spans on {len(rows)} tracks in {len(pids)} processes, "
            f"window {format_duration(hi - lo)}")


def occurrence_arg(text):
    if text == "median":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is neither an integer nor 'median'") from None


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("trace", help="the trace: Chrome trace-event JSON (plugboard run --trace, Plugboard.Trace.write)")
    p.add_argument("out", help="the PNG to write")
    p.add_argument("--title", help="the picture's title (default: the file, its spans and its length)")
    p.add_argument("--focus", metavar="NAME", help="zoom on the longest span of this name")
    p.add_argument("--occurrence", metavar="K", type=occurrence_arg,
                   help="with --focus: the K-th span of that name in time order instead (negative: from the end), "
                        "or 'median': the one of median duration")
    p.add_argument("--category", metavar="CAT", action="append", help="draw only spans of this category (repeatable)")
    p.add_argument("--width", metavar="INCHES", type=float, default=13.0, help="the picture's width (default 13, at 100 dpi)")
    a = p.parse_args(argv)
    if a.occurrence is not None and a.focus is None:
        p.error("--occurrence needs --focus")
    if not 4 <= a.width <= 40:
        p.error("--width must be between 4 and 40 inches")
    try:
        print(draw(a.trace, a.out, a.title, a.focus, a.occurrence, a.category, a.width))
    except TraceError as e:
        print(f"trace_timeline: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"trace_timeline: cannot write '{a.out}': {e.strerror or e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
