#!/usr/bin/env python3
"""The guides' benchmark figures, made from recorded data rather than typed. A guide marks where a
figure goes:

    <!-- figures: NAME "START" "END" -->           or   <!-- figures: NAME "START" "END" "KEEP" -->
    (made by this script)
    <!-- /figures -->

and this script fills the space with the part of docs/data/NAME.json's recorded output (written by
scripts/bench_record.sh NAME COMMAND...) that starts at the first line matching the regular
expression START and ends before the next line matching END (an empty END: the next blank line).
START may be `A >> B`: the first line matching B after the first matching A (a plugin's table:
`PJRT 0.106 >> ^ dispatch:`); with KEEP, only the part's lines that match it are shown (the
`FIGURE` lines of a benchmark that also logs). The part is followed by a line saying what measured it (command,
machine, load, commit, date). A table as the C++ benchmarks print it (a title, a header, a rule of
dashes, rows) becomes a Markdown table; any other output is shown as printed.

    bench/figures.py REPO_ROOT            remake every marked figure in docs/*.md
    bench/figures.py REPO_ROOT --check    exit 1 when a guide's figure is not what its data gives
                                          (ctest docs.bench_figures: a figure edited by hand, a
                                          rerun whose figures were not remade, a marker whose data
                                          or lines are gone)
"""
import json
import pathlib
import re
import sys

Q = r'"((?:[^"\\]|\\.)*)"'
MARK = re.compile(r'<!-- figures: ([a-z0-9_-]+) ' + Q + ' ' + Q + '(?: ' + Q + ')? -->\n(.*?)<!-- /figures -->\n', re.S)


class Failure(Exception):
    pass


def excerpt(record, name, start, end):
    lines = record["output"]
    first = 0
    for k, pattern in enumerate(start.split(" >> ")):
        first = next((i for i in range(first + (k > 0), len(lines)) if re.search(pattern, lines[i])), None)
        if first is None:
            raise Failure(f"docs/data/{name}.json: no line matches {pattern!r}" + (f" (in {start!r})" if k else ""))
    stop = first + 1
    while stop < len(lines) and not (re.search(end, lines[stop]) if end else not lines[stop].strip()):
        stop += 1
    return lines[first:stop]


def as_table(lines):
    """A C++ benchmark table (title, header, dashes, rows, notes) as Markdown; None for other text."""
    if len(lines) < 4 or not re.fullmatch(r"\s*-{5,}\s*", lines[2]):
        return None
    split = lambda l: re.split(r"\s{2,}", l.strip())
    header = split(lines[1])
    # The rows: the lines after the rule with the same number of cells as the first (a last column
    # with no heading, such as a goal's check mark, is allowed); the lines after them are notes.
    width = len(split(lines[3]))
    if width not in (len(header), len(header) + 1):
        return None
    header += [""] * (width - len(header))
    rows, notes = [], []
    for line in lines[3:]:
        cells = split(line)
        if len(cells) == width and not notes:
            rows.append(cells)
        elif line.strip():
            notes.append(line.strip())
    out = [f"**{lines[0].strip()}**", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
    if notes:
        out += [""] + [f"- {n}" for n in notes]
    return out


def provenance(name, record):
    m = record["machine"]
    load = lambda xs: " / ".join(f"{x:.2f}" for x in xs)
    return (f"Recorded by `{record['command']}` ({record['seconds']:.0f} s) on {m['cpu']}, {m['cores']} cores "
            f"(load average {load(m['load_average_before'])} before, {load(m['load_average_after'])} after), "
            f"commit {record['commit']}, {record['recorded_at'][:10]}: `docs/data/{name}.json`.")


def render(root, name, start, end, keep=None):
    path = root / "docs" / "data" / f"{name}.json"
    if not path.is_file():
        raise Failure(f"no docs/data/{name}.json (record it: scripts/bench_record.sh {name} COMMAND...)")
    record = json.loads(path.read_text())
    lines = excerpt(record, name, start, end)
    if keep:
        lines = [l for l in lines if re.search(keep, l)]
    body = as_table(lines) or [f"<!-- example: output {path.relative_to(root)} -->", "```", *lines, "```"]
    return "\n" + "\n".join(body) + "\n\n" + provenance(name, record) + "\n"


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    root = pathlib.Path(sys.argv[1]).resolve()
    check = "--check" in sys.argv[2:]
    failures, count = [], 0
    for guide in sorted((root / "docs").glob("*.md")):
        text = guide.read_text()
        out, at = [], 0
        for m in MARK.finditer(text):
            unquote = lambda g: g.replace('\\"', '"') if g is not None else None
            name, start, end, keep, current = m.group(1), unquote(m.group(2)), unquote(m.group(3)), unquote(m.group(4)), m.group(5)
            where = f"{guide.relative_to(root)}: figures {name} {start!r}"
            try:
                wanted = render(root, name, start, end, keep)
            except (Failure, re.error, KeyError, ValueError) as e:
                failures.append(f"{where}: {e}")
                wanted = current
            else:
                if check and current != wanted:
                    failures.append(f"{where}: not what docs/data/{name}.json gives (edited by hand, or recorded "
                                    f"again without remaking it): run python3 bench/figures.py .")
            out.append(text[at:m.start()] + text[m.start():m.start(5)] + wanted + "<!-- /figures -->\n")
            at = m.end()
            count += 1
        out.append(text[at:])
        if not check:
            new = "".join(out)
            if new != text:
                guide.write_text(new)
                print(f"figures: remade {guide.relative_to(root)}")
    for f in failures:
        print(f"FAIL {f}", file=sys.stderr)
    print(f"figures: {count} marked in docs/*.md" + (f", {len(failures)} failed" if failures else ""))
    if failures:
        sys.exit(1)


if __name__ == "__main__":
    main()
