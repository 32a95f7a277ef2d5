#!/usr/bin/env python3
"""Classifies the failures of Nx's own suite run with Plugboard.Nx (test/nx_suite/run.sh's output).

run.sh sets `output_backend: Nx.BinaryBackend`, so the suite's own assertions (`==` on tensor
structs, `assert_all_close`) judge every value Plugboard.Nx computed. One kind of failure is
counted apart ("last digits"): doctests and `==` assertions whose values agree within rtol 1e-4
(XLA's float kernels against Erlang's :math, -0.0 against 0.0). Every other failure is listed, and
with --expected FILE the run fails on any failure not named in FILE.

    classify.py LOG [--names] [--expected FILE]
"""
import re
import sys
from collections import Counter

text = open(sys.argv[1], encoding="utf-8", errors="replace").read()
summary = re.search(r"(\d+) doctests?, (\d+) tests?, (\d+) failures?(?:, (\d+) excluded)?", text)
blocks = re.split(r"\n\s*(?=\d+\) (?:test|doctest) )", text)
printed, other = 0, Counter()


NUM = r"(?:\d+\.\d+(?:e[-+]?\d+)?|\d+(?:e[-+]?\d+)?|Inf)"


def numbers(s):
    """The values printed in a tensor's text, as complex numbers (a real one has no imaginary part)."""
    body = s.replace("#Nx.Tensor<", "")
    body = re.sub(r"\b[a-z]+\d+(\[[^\]]*\])*", "", body)  # the type line: f32[x: 3][2]
    out = []
    for re_, im in re.findall(rf"(-?{NUM})(?:([+-]{NUM})i)?", body):
        out.append(complex(float(re_.replace("Inf", "inf")), float(im.replace("Inf", "inf")) if im else 0.0))
    return out


def close(a, b):
    x, y = numbers(a), numbers(b)
    return len(x) == len(y) and len(x) > 0 and all(p == q or abs(p - q) <= 1e-6 + 1e-4 * abs(q) for p, q in zip(x, y))


names = []
for b in blocks[1:]:
    head = b.split("\n", 1)[0].strip()
    m = re.search(r"\n\s*left:\s+(.*?)\n\s*right:\s+(.*?)\n\s*(?:stacktrace:|\n)", b, re.S)
    if "Assertion with == failed" in b and m:
        if "Nx.Tensor<" in m.group(1) and close(m.group(1), m.group(2)):
            printed += 1
            continue
    d = re.search(r'\n\s*left:\s+"(.*?)"\n\s*right:\s+"(.*?)"\n', b, re.S)
    if "Doctest failed" in b and d and close(d.group(1).replace("\\n", "\n"), d.group(2).replace("\\n", "\n")):
        printed += 1
        continue
    reason = next((l.strip() for l in b.split("\n")[1:] if l.strip() and not re.match(r"test/|\(", l.strip())), "?")
    reason = re.sub(r"#(Reference|PID)<[^>]*>", "", reason)[:140]
    other[reason] += 1
    names.append((re.sub(r"^\d+\) ", "", head), reason))
if summary:
    d, t, f, x = summary.groups()
    print(f"{d} doctests, {t} tests, {f} failures, {x or 0} excluded")
print(f"{printed} compare values that differ from Nx.BinaryBackend's in the last digits (within rtol 1e-4): doctests and == assertions")
print(f"{sum(other.values())} other failures:")
for reason, n in other.most_common():
    print(f"  {n:4d}  {reason}")
if "--names" in sys.argv:
    print("\n".join(f"{n}: {r}" for n, r in names))
if "--expected" in sys.argv:
    listed = {}
    for line in open(sys.argv[sys.argv.index("--expected") + 1], encoding="utf-8"):
        if line.strip() and not line.startswith("#"):
            name, _, why = line.rstrip("\n").partition("  # ")
            listed[name.strip()] = why
    unexpected = [(n, r) for n, r in names if n not in listed]
    fixed = sorted(set(listed) - {n for n, _ in names})
    for n in fixed:
        print(f"now passing (remove from the list): {n}")
    for n, r in unexpected:
        print(f"UNEXPECTED: {n}: {r}")
    sys.exit(1 if unexpected else 0)
