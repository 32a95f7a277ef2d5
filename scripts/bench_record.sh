#!/usr/bin/env bash
# Runs one benchmark command and records what it printed as data the guides are made from:
# docs/data/NAME.json holds the output (every line, as printed, with the repository's path left out
# and the home folder written ~) with what measured it: the command, the machine (processor, cores,
# load averages before and after), the software (the plugin wheels set-up fetched; the Elixir and OTP
# a benchmark's environment says it ran on, through PLUGBOARD_RECORD_INFO; the JAX its output names),
# the commit, the date and how long it took. bench/figures.py then
# remakes the guides' figure tables from the recorded files.
#
#   scripts/bench_record.sh NAME COMMAND [ARG]...
#   scripts/bench_record.sh compile_cache scripts/bench_compile_cache.sh
#
# The command's output is shown as it runs; its standard output is recorded (what it says on standard
# error, such as a plugin's log lines, is shown only). A command that fails, or prints nothing on
# standard output, records nothing (its exit status is kept).
# Benchmarks are never run by the tests: this is for a person, on a machine kept quiet meanwhile.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -lt 2 ] || [ "${1:-}" = "--help" ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
  [ "${1:-}" = "--help" ] && exit 0 || exit 2
fi
name=$1; shift
case "$name" in *[!a-z0-9_-]*|'') echo "bench_record.sh: NAME must be lowercase letters, digits, _ or - (got '$name')" >&2; exit 2 ;; esac
deps=${PLUGBOARD_DEPS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/plugboard/deps}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date +%s.%N)
status=0
(cd "$root" && PLUGBOARD_RECORD_INFO="$work/info.txt" "$@") | tee "$work/output.txt" || status=$?
if [ "$status" -ne 0 ]; then
  echo "bench_record.sh: '$*' exited $status: nothing recorded" >&2
  exit "$status"
fi
ended=$(date +%s.%N)
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

mkdir -p "$root/docs/data"
python3 - "$root" "$deps" "$name" "$work/output.txt" "$work/info.txt" "$started" "$ended" "$load_before" "$load_after" "$@" <<'PY'
import datetime, glob, json, os, platform, re, subprocess, sys
root, deps, name, output, info, started, ended, load_before, load_after, *command = sys.argv[1:]

def run(*args):
    try:
        r = subprocess.run(args, capture_output=True, text=True, timeout=30)
        return r.stdout.strip() if r.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired):
        return None

cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
wheels = sorted({open(f).read().split(":", 1)[0] for f in glob.glob(os.path.join(deps, "files", "*", "*.from"))})
software = {"plugin_wheels": wheels, "kernel": platform.release()}
text = open(output, encoding="utf-8", errors="replace").read()
# Paths as a reader's clone has them: the repository's relative, the home folder as ~.
text = text.replace(root + "/", "").replace(os.path.expanduser("~") + "/", "~/")
lines = text.split("\n")
if lines and lines[-1] == "":
    lines.pop()
if not any(l.strip() for l in lines):
    sys.exit(f"bench_record.sh: '{' '.join(command)}' printed nothing on standard output: nothing recorded")
# What the benchmark's own environment reported it ran on (bench/env.sh of either Elixir package);
# nothing is guessed from this shell's PATH, which need not be the benchmark's.
toolchain = re.search(r"^elixir (\S+) (\S+)$", open(info).read(), re.M) if os.path.exists(info) else None
if toolchain:
    software["elixir"], software["otp"] = toolchain.groups()
jax = re.search(r"\bJAX[ =]+(\d+\.\d+\.\d+)\b", text, re.I)
if jax:
    software["jax"] = jax.group(1)
commit = run("git", "-C", root, "rev-parse", "--short=12", "HEAD") or "unknown"
# Changes to anything but the recorded data itself (a new benchmark script not yet committed included).
if run("git", "-C", root, "status", "--porcelain", "--", ".", ":!docs/data"):
    commit += " (with uncommitted changes)"
record = {
    "benchmark": name,
    "command": " ".join(command),
    "machine": {"cpu": cpu, "cores": os.cpu_count(),
                "load_average_before": [float(x) for x in load_before.split()],
                "load_average_after": [float(x) for x in load_after.split()]},
    "software": software,
    "commit": commit,
    "recorded_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    "seconds": round(float(ended) - float(started), 1),
    "output": lines,
}
path = os.path.join(root, "docs", "data", name + ".json")
with open(path + ".tmp", "w") as f:
    json.dump(record, f, indent=1, ensure_ascii=False)
    f.write("\n")
os.replace(path + ".tmp", path)
print(f"bench_record.sh: recorded {len(record['output'])} lines in docs/data/{name}.json; remake the guides' figures with "
      f"python3 bench/figures.py {root}")
PY
