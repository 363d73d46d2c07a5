#!/usr/bin/env bash
# Compares two revisions with ffbench, alternating their runs so that the
# machine's other load hits both alike, and prints every figure and the
# mean of each. On a shared machine a comparison needs many rounds: two
# rounds have pointed the wrong way here more than once.
#
#   scripts/bench-ab.sh REV_A REV_B [ROUNDS] [-- FFBENCH FLAGS...]
#   scripts/bench-ab.sh HEAD~1 HEAD 8 -- -scenario chain -runs 2000
#
# REV_A and REV_B are anything git rev-parse accepts ("." is the working
# tree). The figure compared is the first "<n> runs/s", "tasks/s=<n>" or
# "<n> tasks/s" of each run's last line, and its Valkey CPU per unit ("?"
# when the line has none, as for the caps scenario).
set -euo pipefail

if [ $# -lt 2 ]; then
  sed -n '2,/^[^#]/{/^#/p;}' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
a=$1 b=$2
shift 2
rounds=8
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
  rounds=$1
  shift
fi
[ "${1:-}" = "--" ] && shift
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(-scenario chain -runs 2000)

top=$(git rev-parse --show-toplevel)
work=$(mktemp -d)
trap 'git -C "$top" worktree prune; rm -rf "$work"' EXIT

build() { # rev out
  if [ "$1" = "." ]; then
    (cd "$top" && go build -o "$2" ./cmd/ffbench)
    return
  fi
  git -C "$top" worktree add -q --detach "$work/src" "$1"
  (cd "$work/src" && go build -o "$2" ./cmd/ffbench)
  git -C "$top" worktree remove --force "$work/src"
}
build "$a" "$work/a"
build "$b" "$work/b"

for i in $(seq 1 "$rounds"); do
  for side in a b; do
    line=$("$work/$side" "${args[@]}" 2>&1 | tail -1)
    rate=$(printf '%s\n' "$line" | grep -oE '[0-9]+ (runs|tasks)/s|tasks/s=[0-9]+' | head -1 | grep -oE '[0-9]+')
    cpu=$(printf '%s\n' "$line" | grep -oE '(Valkey CPU |\()[0-9.]+ µs/(exec|task)' | head -1 | grep -oE '[0-9.]+')
    printf 'round %d %s %s/s valkey %s µs\n' "$i" "$side" "${rate:-?}" "${cpu:-?}"
  done
done | tee "$work/log"
awk -v a="$a" -v b="$b" '
  { n[$3]++; r[$3] += $4; if ($6 != "?") { nc[$3]++; c[$3] += $6 } }
  function cpu(s) { return nc[s] ? sprintf("%.1f", c[s]/nc[s]) : "?" }
  END {
    printf "A %s: mean %.0f/s, Valkey %s µs over %d runs\n", a, r["a"]/n["a"], cpu("a"), n["a"]
    printf "B %s: mean %.0f/s, Valkey %s µs over %d runs\n", b, r["b"]/n["b"], cpu("b"), n["b"]
  }' "$work/log"
