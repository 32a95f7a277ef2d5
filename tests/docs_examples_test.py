#!/usr/bin/env python3
"""The README's starts are code that runs elsewhere in the tests:
- its C++ start is examples/quickstart.cpp, which ctest builds and runs (install.consumer): the lines
  between the file's two `// [readme]` marks must be the README's C++ block, after its #include and
  namespace lines, unindented by two spaces;
- its Elixir start declares the release the sample umbrella builds (bindings/elixir/sample/mix.exs,
  built and booted by tests/elixir_release_test.sh): the same targets, the same packages, the same
  release step.
Fails naming what differs.

    tests/docs_examples_test.py REPO_ROOT
"""
import pathlib
import re
import sys


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    source = (root / "examples/quickstart.cpp").read_text().splitlines()
    marks = [i for i, line in enumerate(source) if line.strip() == "// [readme]"]
    if len(marks) != 2:
        sys.exit(f"examples/quickstart.cpp: expected two `// [readme]` marks, found {len(marks)}")
    excerpt = [line[2:] if line.startswith("  ") else line for line in source[marks[0] + 1:marks[1]]]

    readme = (root / "README.md").read_text()
    blocks = re.findall(r"```cpp\n(.*?)```", readme, re.S)
    if len(blocks) != 1:
        sys.exit(f"README.md: expected one ```cpp block (the C++ start), found {len(blocks)}")
    block = blocks[0].splitlines()
    body = block[block.index("") + 1:] if "" in block else block  # after the #include and namespace lines
    for n, (want, got) in enumerate(zip(excerpt, body), start=1):
        if want != got:
            sys.exit(f"README.md's C++ start differs from examples/quickstart.cpp at line {n} of the excerpt:\n"
                     f"  quickstart.cpp: {want}\n  README.md:      {got}")
    if len(excerpt) != len(body):
        sys.exit(f"README.md's C++ start has {len(body)} lines after its header, examples/quickstart.cpp's excerpt {len(excerpt)}")
    print(f"README.md's C++ start is examples/quickstart.cpp's excerpt ({len(excerpt)} lines)")

    elixir = re.findall(r"```elixir\n(.*?)```", readme, re.S)
    if len(elixir) != 1:
        sys.exit(f"README.md: expected one ```elixir block (the Elixir start), found {len(elixir)}")
    sample = (root / "bindings/elixir/sample/mix.exs").read_text()
    targets = lambda text: dict(re.findall(r'(\w+): "([\w.-]+==[\w.]+)"', re.search(r"targets: \[(.*?)\]", text, re.S).group(1)))
    step = "steps: [:assemble, &Plugboard.Release.embed/1]"
    if targets(elixir[0]) != targets(sample):
        sys.exit(f"README.md's Elixir start declares {targets(elixir[0])}; the sample's release (bindings/elixir/sample/mix.exs) {targets(sample)}")
    if step not in elixir[0] or step not in sample:
        sys.exit(f"README.md's Elixir start and the sample's release must both have `{step}`")
    print(f"README.md's Elixir start declares the sample's release: {', '.join(targets(sample))}")


if __name__ == "__main__":
    main()
