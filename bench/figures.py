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
dashes, rows) becomes a Markdown table, and a Markdown table stays one; any other output is shown as
printed.

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
OPEN = re.compile(r'<!-- figures: ([a-z0-9_-]+) ' + Q + ' ' + Q + '(?: ' + Q + ')? -->')
CLOSE = "<!-- /figures -->"
# nx_figures.py's own marker (a table of its own making from structured data), left to it.
OTHER = re.compile(r"<!-- figures: nx_bench -->")
TO_THE_END = "(?!)"  # an END that never matches: the rest of the output


def unquote(g):
    """A marker's quoted string: `\\"` is a quote, `\\\\` a backslash."""
    return None if g is None else re.sub(r'\\(.)', r'\1', g)


def markers(text, where):
    """(opening line's span, NAME, START, END, KEEP, content span) of each marker, in order; a line
    that opens a marker malformed, or one left open, fails naming it."""
    found, lines, at, i, fence = [], text.split("\n"), 0, 0, None
    offsets = []
    for line in lines:
        offsets.append(at)
        at += len(line) + 1
    while i < len(lines):
        line = lines[i]
        opening = re.match(r"\s*(`{3,}|~{3,})", line)
        if fence:  # inside a code block: nothing there is a marker
            if opening and opening.group(1)[0] == fence[0] and len(opening.group(1)) >= len(fence):
                fence = None
            i += 1
            continue
        if opening:
            fence = opening.group(1)
            i += 1
            continue
        if OTHER.fullmatch(line.strip()):  # nx_figures.py's block: skip it whole
            while i < len(lines) and lines[i].strip() != CLOSE:
                i += 1
            i += 1
            continue
        if line.strip() == CLOSE:
            raise Failure(f"{where}:{i + 1}: {CLOSE} with no figures marker open")
        if re.search(r"<!--\s*/?\s*figures", line, re.I) and "<!-- figures:" not in line:
            raise Failure(f"{where}:{i + 1}: a malformed figures marker: {line.strip()}")
        if "<!-- figures:" in line:
            m = OPEN.fullmatch(line.strip())
            if not m:
                raise Failure(f"{where}:{i + 1}: a malformed figures marker: {line.strip()}")
            j = i + 1
            while j < len(lines) and lines[j].strip() != CLOSE:
                if "<!-- figures:" in lines[j]:
                    raise Failure(f"{where}:{i + 1}: the figures marker is not closed before the next one (line {j + 1})")
                j += 1
            if j == len(lines):
                raise Failure(f"{where}:{i + 1}: the figures marker is never closed ({CLOSE})")
            found.append((i + 1, m.group(1), unquote(m.group(2)), unquote(m.group(3)), unquote(m.group(4)),
                          offsets[i + 1], offsets[j]))
            i = j
        i += 1
    return found


class Failure(Exception):
    pass


def excerpt(record, name, start, end):
    lines = record["output"]
    first = 0
    for k, pattern in enumerate(start.split(" >> ")):
        regex = compile_regex(pattern, "START")
        first = next((i for i in range(first + (k > 0), len(lines)) if regex.search(lines[i])), None)
        if first is None:
            raise Failure(f"docs/data/{name}.json: no line matches START {pattern!r}" + (f" (in {start!r})" if k else ""))
    stop = first + 1
    end_regex = compile_regex(end, "END") if end else None
    while stop < len(lines) and not (end_regex.search(lines[stop]) if end_regex else not lines[stop].strip()):
        stop += 1
    if end and end != TO_THE_END and stop == len(lines):
        raise Failure(f"docs/data/{name}.json: no line after START matches END {end!r} (write \"{TO_THE_END}\" for the rest of the output)")
    part = lines[first:stop]
    while part and not part[-1].strip():
        part.pop()
    return part


def compile_regex(pattern, what):
    try:
        return re.compile(pattern)
    except re.error as e:
        raise Failure(f"{what} {pattern!r} is not a regular expression: {e}")


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
    cell = lambda c: c.replace("|", "\\|").replace("<!--", "&lt;!--")
    out = [f"**{lines[0].strip()}**", "", "| " + " | ".join(map(cell, header)) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(map(cell, r)) + " |" for r in rows]
    if notes:
        out += [""] + [f"- {n}" for n in notes]
    return out


def provenance(name, record):
    m = record["machine"]
    load = lambda xs: " / ".join(f"{x:.2f}" for x in xs)
    took = f"{record['seconds']:.0f} s" if record["seconds"] >= 10 else f"{record['seconds']:.1f} s"
    return (f"Recorded by `{record['command']}` ({took}) on {m['cpu']}, {m['cores']} cores "
            f"(load average {load(m['load_average_before'])} before, {load(m['load_average_after'])} after), "
            f"commit {record['commit']}, {record['recorded_at'][:10]}: `docs/data/{name}.json`.")


def check_record(name, record):
    """A record as scripts/bench_record.sh writes it; its text fields one line each, with no marker."""
    bad = lambda why: Failure(f"docs/data/{name}.json is not a record of scripts/bench_record.sh: {why}")
    if not isinstance(record, dict):
        raise bad("not an object")
    if not isinstance(record.get("output"), list) or not all(isinstance(l, str) for l in record["output"]):
        raise bad("`output` is not a list of lines")
    machine = record.get("machine")
    if not isinstance(machine, dict) or not isinstance(machine.get("cpu"), str) or not isinstance(machine.get("cores"), int):
        raise bad("`machine` lacks `cpu` or `cores`")
    for key in ("load_average_before", "load_average_after"):
        if not isinstance(machine.get(key), list) or not all(isinstance(x, (int, float)) for x in machine[key]):
            raise bad(f"`machine.{key}` is not a list of numbers")
    if not isinstance(record.get("seconds"), (int, float)):
        raise bad("`seconds` is not a number")
    for key in ("command", "commit", "recorded_at"):
        value = record.get(key)
        if not isinstance(value, str) or "\n" in value or "<!--" in value or "`" in value:
            raise bad(f"`{key}` is not one line of plain text")
    if "<!--" in machine["cpu"] or "\n" in machine["cpu"]:
        raise bad("`machine.cpu` is not one line of plain text")


def render(root, name, start, end, keep=None):
    path = root / "docs" / "data" / f"{name}.json"
    if not path.is_file():
        raise Failure(f"no docs/data/{name}.json (record it: scripts/bench_record.sh {name} COMMAND...)")
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:
        raise Failure(f"docs/data/{name}.json is not JSON: {e}")
    check_record(name, record)
    lines = excerpt(record, name, start, end)
    if keep:
        regex = compile_regex(keep, "KEEP")
        lines = [l for l in lines if regex.search(l)]
        if not lines:
            raise Failure(f"docs/data/{name}.json: no line of the part matches KEEP {keep!r}")
    if any(CLOSE in l or "<!-- figures:" in l for l in lines):
        raise Failure(f"docs/data/{name}.json: the part holds a figures marker, which would break the page")
    if lines and all(l.startswith("|") for l in lines):  # printed as a Markdown table already
        body = lines
    else:
        # A fence longer than any run of backticks in the output.
        fence = "`" * max([3] + [len(run) + 1 for l in lines for run in re.findall(r"`{3,}", l)])
        body = as_table(lines) or [f"<!-- example: output {path.relative_to(root)} -->", fence, *lines, fence]
    return "\n" + "\n".join(body) + "\n\n" + provenance(name, record) + "\n"


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    root = pathlib.Path(sys.argv[1]).resolve()
    unknown = [a for a in sys.argv[2:] if a != "--check"]
    if unknown:
        sys.exit(f"figures.py: unknown argument {unknown[0]!r} (--check, or nothing)\n" + __doc__)
    check = "--check" in sys.argv[2:]
    if not (root / "docs").is_dir():
        sys.exit(f"figures.py: {root} has no docs/ folder (give the repository's root)")
    failures, count = [], 0
    for guide in sorted((root / "docs").glob("*.md")):
        rel = guide.relative_to(root)
        text = guide.read_text(encoding="utf-8")
        try:
            found = markers(text, rel)
        except Failure as e:
            failures.append(str(e))
            continue
        out, at = [], 0
        for line, name, start, end, keep, begin, finish in found:
            where = f"{rel}:{line}: figures {name} {start!r}"
            current = text[begin:finish]
            try:
                wanted = render(root, name, start, end, keep)
            except Failure as e:
                failures.append(f"{where}: {e}")
                wanted = current
            else:
                if check and current != wanted:
                    failures.append(f"{where}: not what docs/data/{name}.json gives (edited by hand, or recorded "
                                    f"again without remaking it): run python3 bench/figures.py .")
            out.append(text[at:begin] + wanted)
            at = finish
            count += 1
        out.append(text[at:])
        if not check:
            new = "".join(out)
            if new != text:
                guide.write_text(new, encoding="utf-8")
                print(f"figures: remade {rel}")
    for f in failures:
        print(f"FAIL {f}", file=sys.stderr)
    print(f"figures: {count} marked in docs/*.md" + (f", {len(failures)} failed" if failures else ""))
    if failures:
        sys.exit(1)


if __name__ == "__main__":
    main()
