#!/usr/bin/env python3
"""Classifies the failures of an ExUnit run of a library's own suite on plugboard (Nx's: nx_suite/run.sh;
Axon's: axon_suite/run.sh).

nx_suite/run.sh sets `output_backend: Nx.BinaryBackend`, so the suite's own assertions (`==` on tensor
structs, `assert_all_close`) judge every value Plugboard.Nx computed. One kind of failure is
counted apart ("last digits"): doctests and `==` assertions whose values agree within rtol 1e-4
(XLA's float kernels against Erlang's :math, -0.0 against 0.0). Every other failure is listed, and
with --expected FILE the run fails on any failure not named in FILE (one per line: the test's name,
then optionally "  # " and the reason; lines starting with # are comments). With --strict nothing is
counted apart: every failure must be named in FILE. --expected may be given more than once (the
failures named in any of the files). --list prints the failing tests' names only.

    classify.py LOG [--names] [--list] [--strict] [--expected FILE]...
"""
import re
import sys
from collections import Counter

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


def last_digits(block):
    """Whether a failure is a doctest or an == assertion on tensors whose values agree within rtol 1e-4."""
    m = re.search(r"\n\s*left:\s+(.*?)\n\s*right:\s+(.*?)\n\s*(?:stacktrace:|\n)", block, re.S)
    if "Assertion with == failed" in block and m and "Nx.Tensor<" in m.group(1) and close(m.group(1), m.group(2)):
        return True
    d = re.search(r'\n\s*left:\s+"(.*?)"\n\s*right:\s+"(.*?)"\n', block, re.S)
    return bool("Doctest failed" in block and d and close(d.group(1).replace("\\n", "\n"), d.group(2).replace("\\n", "\n")))


def failures(text):
    """Each failure of the log as (test name, first line of its reason, whether it differs in the last digits only)."""
    out = []
    for b in re.split(r"\n\s*(?=\d+\) (?:test|doctest) )", text)[1:]:
        head = b.split("\n", 1)[0].strip()
        reason = next((l.strip() for l in b.split("\n")[1:] if l.strip() and not re.match(r"test/|\(", l.strip())), "?")
        reason = re.sub(r"#(Reference|PID)<[^>]*>", "", reason)[:140]
        out.append((re.sub(r"^\d+\) ", "", head), reason, last_digits(b)))
    return out


def expected(path):
    listed = {}
    for line in open(path, encoding="utf-8"):
        if line.strip() and not line.startswith("#"):
            name, _, why = line.rstrip("\n").partition("  # ")
            listed[name.strip()] = why
    return listed


def main(argv):
    text = open(argv[1], encoding="utf-8", errors="replace").read()
    strict = "--strict" in argv
    found = failures(text)
    if "--list" in argv:
        print("\n".join(n for n, _, _ in found))
        return 0
    apart = 0 if strict else sum(1 for _, _, digits in found if digits)
    names = [(n, r) for n, r, digits in found if strict or not digits]
    summary = re.search(r"(\d+) doctests?, (\d+) tests?, (\d+) failures?(?:, (\d+) excluded)?", text)
    if summary:
        d, t, f, x = summary.groups()
        print(f"{d} doctests, {t} tests, {f} failures, {x or 0} excluded")
    if not strict:
        print(f"{apart} compare values that differ from Nx.BinaryBackend's in the last digits (within rtol 1e-4): doctests and == assertions")
    other = Counter(r for _, r in names)
    print(f"{sum(other.values())} {'failures' if strict else 'other failures'}:")
    for reason, n in other.most_common():
        print(f"  {n:4d}  {reason}")
    if "--names" in argv:
        print("\n".join(f"{n}: {r}" for n, r in names))
    files = [argv[i + 1] for i, a in enumerate(argv) if a == "--expected"]
    if files:
        listed = {n: why for f in files for n, why in expected(f).items()}
        unexpected = [(n, r) for n, r in names if n not in listed]
        for n in sorted(set(listed) - {n for n, _ in names}):
            print(f"now passing (remove from the list): {n}")
        for n, r in unexpected:
            print(f"UNEXPECTED: {n}: {r}")
        return 1 if unexpected else 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
