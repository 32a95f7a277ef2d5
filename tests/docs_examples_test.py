#!/usr/bin/env python3
"""The README's C++ start is examples/quickstart.cpp, which ctest builds and runs (install.consumer):
the lines between the file's two `// [readme]` marks must be the README's C++ block, after its
#include and namespace lines, unindented by two spaces. Fails naming the first line that differs.

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


if __name__ == "__main__":
    main()
