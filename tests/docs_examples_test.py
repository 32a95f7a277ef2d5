#!/usr/bin/env python3
"""Every code block of the README and the guides (docs/*.md) is checked against what runs. Each block
carries, on the line before its fence, a comment saying how (invisible on the rendered page):

  <!-- example: run -->           a shell block, run here from the repository's root: `$ CMD` lines
                                  run one by one, and the lines after each are its expected output
                                  (`...` skips lines; times such as `21.7 ms` and this machine's
                                  plugin folder are not compared); a block without `$` lines must
                                  exit 0.
  <!-- example: excerpt PATH -->  the block is the part of PATH between two `[guide]` marks (or
  <!-- example: excerpt PATH#N -->  `[guide:N]`), less their common indent; PATH is a program or a
                                  test that the test command builds and runs.
  <!-- example: command -->       commands too long or too costly for a test (benchmarks, the whole
                                  set-up): each script named must exist and be executable or a
                                  Python file, and each --flag given to it must be in its usage (the
                                  script's header comment); each `plugboard SUB` must take every
                                  --flag given (`plugboard SUB --help`); each file named must exist.
  <!-- example: fragment PATH --> a piece of configuration or code shown for its shape (a dependency
                                  line, a child spec, a tour of calls with `...`): PATH is the test or
                                  program that does the same for real, and every name the block uses
                                  (`Module.function`, `ns::name`, `.method(`, `key:`) must occur in it.
  <!-- example: output PATH -->   what PATH prints: a recorded run (docs/data/NAME.json, the block made
                                  from it by bench/figures.py, which ctest docs.bench_figures checks),
                                  or the test that prints it (which must exist).
  <!-- example: readme-start -->  the README's C++ and Elixir starts (checked below).

A block without a comment, or with a kind not listed, fails the test, naming its file and line.

    tests/docs_examples_test.py REPO_ROOT [--cli PATH_TO_PLUGBOARD]

Without --cli (no build), the `run` blocks and the CLI's flags are not checked and the test says so.
The plugins' folder is PLUGBOARD_DEPS_DIR (default ~/.cache/plugboard/deps), as scripts/setup.sh's.
"""
import argparse
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

MARK = re.compile(r"^<!--\s*example:\s*(\S+)\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
TIME = re.compile(r"\d+(\.\d+)?\s*(ms|µs|us|s)\b")
# This machine's plugin folder, wherever it is: ~/.cache/plugboard/deps, /root/..., PLUGBOARD_DEPS_DIR.
DEPS = re.compile(r"(~|/[^\s'\"]*)?/\.cache/plugboard/deps")


class Failure(Exception):
    pass


def blocks(path):
    """(line number of the fence, language, marker kind, marker argument, block lines) for each block:
    fenced with backticks or tildes, indented too (inside a list item; the lines lose that indent)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out, i, in_figures = [], 0, False
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            if lines[i].strip().startswith("<!-- figures:"):
                in_figures = True
            elif lines[i].strip() == "<!-- /figures -->":
                in_figures = False
            i += 1
            continue
        start, indent, fence, lang = i, len(m.group(1)), m.group(2), m.group(3)
        j = i + 1
        while j < len(lines) and not re.fullmatch(r"\s*" + re.escape(fence[0]) + "{%d,}\\s*" % len(fence), lines[j]):
            j += 1
        if j == len(lines):
            raise Failure(f"{path}:{start + 1}: a code block that never closes")
        mark = MARK.match(lines[start - 1].strip()) if start > 0 else None
        body = [l[indent:] if l[:indent].strip() == "" else l for l in lines[start + 1:j]]
        out.append((start + 1, lang, mark.group(1) if mark else None, mark.group(2) if mark else "", body, in_figures))
        i = j + 1
    return out


def excerpt(root, spec):
    """The lines of `spec` (PATH or PATH#NAME) between its two [guide] (or [guide:NAME]) marks, dedented."""
    rel, _, name = spec.partition("#")
    path = root / rel
    if not path.is_file():
        raise Failure(f"excerpt {spec}: no file {rel}")
    tag = f"[guide:{name}]" if name else "[guide]"
    lines = path.read_text().splitlines()
    marks = [i for i, line in enumerate(lines) if line.strip().endswith(tag) and line.strip()[:1] in "/#%-<"]
    if len(marks) != 2:
        raise Failure(f"excerpt {spec}: {rel} has {len(marks)} `{tag}` marks, expected two")
    body = lines[marks[0] + 1:marks[1]]
    indent = min((len(l) - len(l.lstrip()) for l in body if l.strip()), default=0)
    return [l[indent:] for l in body]


def check_excerpt(root, where, spec, block):
    try:
        want = excerpt(root, spec)
    except Failure as e:
        raise Failure(f"{where}: {e}")
    for n, (w, g) in enumerate(zip(want, block), start=1):
        if w != g:
            raise Failure(f"{where}: line {n} differs from {spec}:\n  {spec}: {w}\n  guide: {g}")
    if len(want) != len(block):
        raise Failure(f"{where}: {len(block)} lines, {spec}'s excerpt {len(want)}")


def normalize(line, deps):
    line = line.replace(str(deps), "DEPS")
    return TIME.sub("TIME", DEPS.sub("DEPS", line)).rstrip()


def run_block(root, where, block, env, deps):
    """`$ CMD` lines run in turn, each one's output compared with the lines after it."""
    if not any(l.startswith("$ ") for l in block):
        result = subprocess.run(["bash", "-euo", "pipefail", "-c", "\n".join(block)], cwd=root, env=env,
                                capture_output=True, text=True, timeout=300)
        if result.returncode != 0:
            raise Failure(f"{where}: exited {result.returncode}\n{result.stdout}{result.stderr}")
        return
    steps, i = [], 0
    while i < len(block):
        if not block[i].startswith("$ "):
            raise Failure(f"{where}: line {i + 1} is neither a `$ ` command nor the output of one")
        command = block[i][2:]
        while command.endswith("\\"):
            i += 1
            if i == len(block):
                raise Failure(f"{where}: the block ends inside a continued `$ ` command")
            command = command[:-1].rstrip() + " " + block[i].strip()
        i += 1
        expected = []
        while i < len(block) and not block[i].startswith("$ "):
            expected.append(block[i])
            i += 1
        steps.append((command, expected))
    for command, expected in steps:
        command = command.replace("~/.cache/plugboard/deps", shlex.quote(str(deps)))
        result = subprocess.run(["bash", "-euo", "pipefail", "-c", command], cwd=root, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
        if result.returncode != 0:
            raise Failure(f"{where}: `{command}` exited {result.returncode}:\n{result.stdout}")
        compare_output(where, command, expected, result.stdout.splitlines(), deps)


def compare_output(where, command, expected, actual, deps):
    """Every expected line in order in the actual output; `...` lets any lines pass between."""
    got = [normalize(l, deps) for l in actual]
    pos, skipping = 0, False
    for line in expected:
        if line.strip() == "...":
            skipping = True
            continue
        want = normalize(line, deps)
        while pos < len(got) and got[pos] != want and skipping:
            pos += 1
        if pos >= len(got) or got[pos] != want:
            shown = got[pos] if pos < len(got) else "(no more output)"
            raise Failure(f"{where}: `{command}` printed something else.\n  expected: {want}\n  got:      {shown}\n"
                          f"whole output:\n" + "\n".join(actual))
        pos, skipping = pos + 1, False
    if pos != len(got) and not skipping:
        raise Failure(f"{where}: `{command}` printed more than the guide shows, from: {got[pos]}")


def usage_of_script(path):
    """A script's usage: its header comment (the `#` lines at its top)."""
    text = []
    for line in path.read_text().splitlines()[1:]:
        if not line.startswith("#"):
            break
        text.append(line)
    return "\n".join(text)


def flag_in(flag, text):
    """`--run` in a usage text, not as the start of `--run-all`."""
    return re.search(re.escape(flag) + r"(?![\w-])", text) is not None


def check_command_block(root, where, block, cli, cli_help):
    logical, pending = [], ""
    for line in block:
        line = re.sub(r"(^|\s)#.*$", "", line).rstrip()  # comments after the command
        pending += line
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        if pending.strip():
            logical.append(pending.strip())
        pending = ""
    if pending.strip():
        logical.append(pending.strip())
    checked = 0
    for line in logical:
        cwd = root
        # Each command of the line in turn (`cd X && mix test test/y.exs`: y is looked for in X).
        for command in re.split(r"&&|;|\|\|", line):
            checked += check_command(root, cwd, where, command, cli, cli_help)
            words = words_of(command)
            if words[:1] == ["cd"]:
                if len(words) < 2 or not (cwd / words[1]).is_dir():
                    raise Failure(f"{where}: no folder {words[1] if len(words) > 1 else '(none given)'}")
                cwd = cwd / words[1]
    if checked == 0:
        raise Failure(f"{where}: a `command` block that names no script and no `plugboard` command")


def words_of(command):
    """A command's words: brackets, pipes and substitutions of a usage line are not part of them."""
    return re.sub(r"[\[\]|()$]", " ", command).split()


def check_command(root, cwd, where, command, cli, cli_help):
    """Checks one command; 1 when it named something checkable (a script, the CLI, cmake, cd)."""
    tokens = words_of(command)
    if not tokens:
        return 0
    is_flag = lambda t: re.fullmatch(r"--[a-z][a-z0-9-]*(=.*)?", t)
    flags_after = lambda k: [t.split("=")[0] for t in tokens[k + 1:] if is_flag(t)]
    for token in tokens:  # files the command names, where it runs
        if re.fullmatch(r"[\w.-]+(/[\w.-]+)+\.\w+", token) and not token.startswith(("build/", "_build/")):
            if not (cwd / token).exists() and not (root / token).exists():
                raise Failure(f"{where}: no file {token} (from {cwd.relative_to(root) if cwd != root else 'the repository'})")
    if tokens[0] == "cd":
        return 1
    if tokens[0] == "cmake":
        # `cmake --install` with no folder prints its own options.
        mode = ["--install"] if "--install" in tokens else ["--help"]
        r = subprocess.run(["cmake"] + mode, capture_output=True, text=True)
        for flag in flags_after(0):
            if flag not in mode and not flag_in(flag, r.stdout + r.stderr):
                raise Failure(f"{where}: cmake {' '.join(mode)} takes no {flag}")
        return 1
    cli_at = [k for k, t in enumerate(tokens) if t == "plugboard" or t.endswith("/plugboard/plugboard")]
    if cli_at and cli_at[0] + 1 < len(tokens):
        sub = tokens[cli_at[0] + 1]
        if cli is not None:
            help_text = cli_help(sub)
            for flag in flags_after(cli_at[0] + 1):
                if not flag_in(flag, help_text):
                    raise Failure(f"{where}: `plugboard {sub}` takes no {flag} (`plugboard {sub} --help`)")
        return 1
    scripts = [k for k, t in enumerate(tokens) if re.fullmatch(r"[\w./-]+\.(sh|py)", t) and "/" in t]
    for n, k in enumerate(scripts):
        script = tokens[k]
        path = cwd / script if (cwd / script).exists() else root / script
        if not path.is_file():
            raise Failure(f"{where}: no script {script}")
        if script.endswith(".sh"):
            if not os.access(path, os.X_OK):
                raise Failure(f"{where}: {script} is not executable")
            parse = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
            if parse.returncode != 0:
                raise Failure(f"{where}: {script} does not parse: {parse.stderr}")
            usage = usage_of_script(path)
        else:
            usage = path.read_text(encoding="utf-8")
        # The flags up to the next script on the line are this script's.
        upto = scripts[n + 1] if n + 1 < len(scripts) else len(tokens)
        for flag in [tokens[j].split("=")[0] for j in range(k + 1, upto) if is_flag(tokens[j])]:
            if not flag_in(flag, usage):
                raise Failure(f"{where}: {script}'s usage has no {flag}")
    return 1 if scripts else 0


def names_in(block, lang):
    text = "\n".join(re.sub(r"(//|#).*$", "", l) for l in block)  # not the comments
    names = set(re.findall(r"\b[A-Z]\w*(?:\.[A-Za-z_]\w*[?!]?)+", text))          # Module.function
    names |= {n for n in re.findall(r"\b[a-z_]\w*(?:::[A-Za-z_]\w*)+", text) if not n.startswith("std::")}  # ns::name
    names |= {m for m in re.findall(r"(?:\.|->)([a-z_]\w*)\(", text)}               # .method(
    names |= {m for m in re.findall(r"(?<![:\w])([a-z_]\w*): ", text)}             # key:
    names |= {m for m in re.findall(r"(?<![:\w])(:[a-z_]\w*)", text)}              # :atom
    return names


def check_fragment(root, where, spec, block, lang):
    path = root / spec
    if not spec or not path.exists():
        raise Failure(f"{where}: fragment: no file {spec!r} (the test or program that does the same)")
    files = sorted(path.rglob("*")) if path.is_dir() else [path]
    text = "\n".join(f.read_text() for f in files if f.is_file())
    names = names_in(block, lang)
    if not names:
        raise Failure(f"{where}: a fragment that names nothing to check")
    # A module may be aliased where it is used: `Plugboard.Trace.start` is found as `Trace.start`. A
    # name counts only whole (`exec` is not found in `execute`).
    whole = lambda n: re.search(r"(?<![\w])" + re.escape(n) + r"(?![\w])", text) is not None
    found = lambda n: whole(n) or whole(n.split("::")[-1]) or whole(".".join(n.split(".")[-2:]))
    missing = sorted(n for n in names if not found(n))
    if missing:
        raise Failure(f"{where}: names that {spec} never uses: {', '.join(missing)}")


def check_readme_starts(root):
    """The README's C++ start is examples/quickstart.cpp's excerpt (after the block's #include and
    namespace lines); its Elixir start declares the sample's release (same targets, same step)."""
    source = (root / "examples/quickstart.cpp").read_text().splitlines()
    marks = [i for i, line in enumerate(source) if line.strip() == "// [readme]"]
    if len(marks) != 2:
        raise Failure(f"examples/quickstart.cpp: expected two `// [readme]` marks, found {len(marks)}")
    excerpt_lines = [line[2:] if line.startswith("  ") else line for line in source[marks[0] + 1:marks[1]]]
    readme = (root / "README.md").read_text()
    block = re.findall(r"```cpp\n(.*?)```", readme, re.S)[0].splitlines()
    body = block[block.index("") + 1:] if "" in block else block
    for n, (want, got) in enumerate(zip(excerpt_lines, body), start=1):
        if want != got:
            raise Failure(f"README.md's C++ start differs from examples/quickstart.cpp at line {n} of the excerpt:\n"
                          f"  quickstart.cpp: {want}\n  README.md:      {got}")
    if len(excerpt_lines) != len(body):
        raise Failure(f"README.md's C++ start has {len(body)} lines after its header, examples/quickstart.cpp's excerpt {len(excerpt_lines)}")
    elixir = re.findall(r"```elixir\n(.*?)```", readme, re.S)[0]
    sample = (root / "bindings/elixir/sample/mix.exs").read_text()
    targets = lambda text: dict(re.findall(r'(\w+): "([\w.-]+==[\w.]+)"', re.search(r"targets: \[(.*?)\]", text, re.S).group(1)))
    step = "steps: [:assemble, &Plugboard.Release.embed/1]"
    if targets(elixir) != targets(sample):
        raise Failure(f"README.md's Elixir start declares {targets(elixir)}; the sample's release (bindings/elixir/sample/mix.exs) {targets(sample)}")
    if step not in elixir or step not in sample:
        raise Failure(f"README.md's Elixir start and the sample's release must both have `{step}`")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("root", nargs="?", default=".")
    parser.add_argument("--cli")
    args = parser.parse_args()
    root = pathlib.Path(args.root).resolve()
    deps = pathlib.Path(os.environ.get("PLUGBOARD_DEPS_DIR") or os.path.expanduser("~/.cache/plugboard/deps"))
    cli = pathlib.Path(args.cli).resolve() if args.cli else None
    helps = {}

    def cli_help(sub):
        if sub not in helps:
            r = subprocess.run([str(cli), sub, "--help"], capture_output=True, text=True)
            if r.returncode != 0:
                raise Failure(f"`plugboard {sub} --help` exited {r.returncode}: {r.stdout}{r.stderr}")
            helps[sub] = r.stdout
        return helps[sub]

    scratch = tempfile.mkdtemp(prefix="docs-examples-")
    env = dict(os.environ, PLUGBOARD_COMPILE_CACHE="off", PLUGBOARD_DEPS_DIR=str(deps), SCRATCH=scratch)
    if cli:
        env["PATH"] = f"{cli.parent}:{env['PATH']}"

    counts, failures, skipped = {}, [], 0
    for path in [root / "README.md"] + sorted((root / "docs").glob("*.md")):
        rel = path.relative_to(root)
        try:
            found = blocks(path)
        except Failure as e:
            failures.append(str(e))
            continue
        for line, lang, kind, arg, block, in_figures in found:
            where = f"{rel}:{line}"
            try:
                if kind is None:
                    raise Failure(f"{where}: a ```{lang} block with no `<!-- example: ... -->` line before it saying how it is checked")
                if kind == "run":
                    if cli is None:
                        skipped += 1
                        continue
                    run_block(root, where, block, env, deps)
                elif kind == "excerpt":
                    check_excerpt(root, where, arg, block)
                elif kind == "command":
                    check_command_block(root, where, block, cli, cli_help)
                elif kind == "fragment":
                    check_fragment(root, where, arg, block, lang)
                elif kind == "output":
                    if not arg:
                        raise Failure(f"{where}: an `output` block names what prints it: a recorded run (docs/data/NAME.json) or a test")
                    target = arg.split()[0]
                    if target.startswith("/") or ".." in pathlib.PurePosixPath(target).parts or not (root / target).is_file():
                        raise Failure(f"{where}: output of {arg}: no such file in the repository")
                    if target.startswith("docs/data/") and not in_figures:
                        raise Failure(f"{where}: a block shown as {target}'s output must be made from it "
                                      f"(inside a <!-- figures: ... --> marker, which bench/figures.py fills)")
                elif kind == "readme-start":
                    if rel != pathlib.Path("README.md") or lang not in ("cpp", "elixir"):
                        raise Failure(f"{where}: `readme-start` is for the README's C++ and Elixir starts")
                else:
                    raise Failure(f"{where}: unknown kind `{kind}` (run, excerpt, command, fragment, output, readme-start)")
                counts[kind] = counts.get(kind, 0) + 1
            except Failure as e:
                failures.append(str(e))
            except subprocess.TimeoutExpired as e:
                failures.append(f"{where}: `{e.cmd[-1] if isinstance(e.cmd, list) else e.cmd}` ran past {e.timeout:.0f} s")
    try:
        check_readme_starts(root)
    except (Failure, IndexError) as e:
        failures.append(f"README.md's starts: {e}")
    shutil.rmtree(scratch, ignore_errors=True)
    for f in failures:
        print(f"FAIL {f}\n", file=sys.stderr)
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    print(f"docs examples: {summary}" + (f"; {skipped} run blocks not run (no --cli)" if skipped else ""))
    if failures:
        sys.exit(f"{len(failures)} block(s) failed")


if __name__ == "__main__":
    main()
