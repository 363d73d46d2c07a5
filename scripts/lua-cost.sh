#!/usr/bin/env bash
# Counts the server instructions the Valkey Functions library spends per
# execution in each phase of BenchmarkFlowPhases (runtime/store): staging
# chains, claiming and finishing their members one at a time, plain
# executions, and chains walked by hand-offs.
#
#   scripts/lua-cost.sh [EXECS]        (default 2000; a multiple of 10)
#
# The server runs under valgrind's callgrind, which counts instructions
# inside FCALL only (Lua, the commands it calls, the reply). Unlike time,
# the count does not move with the machine's other load: the same build
# gives the same figures to a fraction of a percent, so one run of each
# build compares two versions of lua/. Runs may overlap: each asks only
# its own server for its dumps (a vgdb prefix of its own). Instructions
# are not time (cache misses and system calls are not in them), so
# confirm a large change with ffbench too. Needs valgrind (Debian:
# apt-get install valgrind).
set -euo pipefail

execs=${1:-2000}
command -v valgrind >/dev/null || { echo "lua-cost: valgrind is not installed" >&2; exit 2; }
server=$(command -v valkey-server || command -v redis-server || true)
[ -n "$server" ] || { echo "lua-cost: no valkey-server or redis-server on PATH" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The test harness starts the first valkey-server on PATH: this one.
cat >"$work/valkey-server" <<EOF
#!/bin/sh
exec valgrind --tool=callgrind --callgrind-out-file=$work/cg.%p --toggle-collect=fcallCommand --vgdb-prefix=$work/vgdb \
  --compress-strings=no --compress-pos=no "$server" "\$@"
EOF
chmod +x "$work/valkey-server"

top=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
if ! (cd "$top" && FF_CALLGRIND="$work/vgdb" PATH="$work:$PATH" go test -count=1 -run '^$' -bench FlowPhases \
  -benchtime "${execs}x" ./runtime/store/ >"$work/bench.log" 2>&1); then
  cat "$work/bench.log" >&2
  exit 1
fi

# go test runs a benchmark once with b.N = 1 before the real run, each
# with a server of its own: only the last server's counts are read. Each
# phase ends with a dump named after it ("dump <phase>"); phases measured
# in several rounds are summed.
pid=$(ls -tr "$work"/cg.* | tail -1 | sed 's/.*cg\.\([0-9]*\).*/\1/')
for f in $(ls "$work"/cg."$pid".* | awk -F. '{ print $NF, $0 }' | sort -n | cut -d' ' -f2); do
  phase=$(sed -n 's/^desc: Trigger: dump //p' "$f")
  total=$(sed -n 's/^summary: //p' "$f")
  [ -n "$phase" ] && echo "$phase $total"
done | awk -v n="$execs" '
  { sum[$1] += $2; if (!($1 in seen)) { seen[$1] = 1; order[++k] = $1 } }
  END {
    printf "%-22s %14s %12s\n", "phase", "instructions", "per exec"
    for (i = 1; i <= k; i++) {
      p = order[i]
      if (p == "setup") continue
      printf "%-22s %14d %12.0f\n", p, sum[p], sum[p] / n
    }
  }'
