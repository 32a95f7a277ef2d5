#!/usr/bin/env python3
"""Classifies the failures of Nx's own suite run with Plugboard.Nx (test/nx_suite/run.sh's output).

Two kinds of failure are the suite comparing tensor structs rather than values, and are counted
apart ("backend identity"): `assert left == right` whose two sides print the same values (the
results are Plugboard.Nx.Backend tensors, the expectations Nx.BinaryBackend ones), and the helper
`assert_all_close` ("expected A to be within tolerance of B") whose A and B agree within its
tolerance (rtol 1e-4, atol 1e-6 here): it compares the `Nx.all_close` result, a Plugboard.Nx.Backend
u8 tensor 1, with `Nx.tensor(1, type: :u8)` by struct. Doctests and `==` assertions whose values
agree within that tolerance are counted apart too ("last digits": XLA's float kernels against
Erlang's :math, and -0.0 against 0.0).
Every other failure is listed.

    classify.py LOG
"""
import re
import sys
from collections import Counter

text = open(sys.argv[1], encoding="utf-8", errors="replace").read()
summary = re.search(r"(\d+) doctests?, (\d+) tests?, (\d+) failures?(?:, (\d+) excluded)?", text)
blocks = re.split(r"\n\s*(?=\d+\) (?:test|doctest) )", text)
identity, printed, other = 0, 0, Counter()


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
        norm = lambda s: re.sub(r"\s+", "", s)
        if norm(m.group(1)) == norm(m.group(2)):
            identity += 1
            continue
        if "Nx.Tensor<" in m.group(1) and close(m.group(1), m.group(2)):
            printed += 1
            continue
    d = re.search(r'\n\s*left:\s+"(.*?)"\n\s*right:\s+"(.*?)"\n', b, re.S)
    if "Doctest failed" in b and d and close(d.group(1).replace("\\n", "\n"), d.group(2).replace("\\n", "\n")):
        printed += 1
        continue
    t = re.search(r"\n\s*expected\s*\n(.*?)\n\s*to be within tolerance of\s*\n(.*?)\n\s*(?:for input|code:)", b, re.S)
    if t and close(t.group(1), t.group(2)):
        identity += 1
        continue
    reason = next((l.strip() for l in b.split("\n")[1:] if l.strip() and not re.match(r"test/|\(", l.strip())), "?")
    reason = re.sub(r"#(Reference|PID)<[^>]*>", "", reason)[:140]
    other[reason] += 1
    names.append((re.sub(r"^\d+\) ", "", head), reason))
if summary:
    d, t, f, x = summary.groups()
    print(f"{d} doctests, {t} tests, {f} failures, {x or 0} excluded")
print(f"{identity} failures are struct comparisons of equal values (results on Plugboard.Nx.Backend)")
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
