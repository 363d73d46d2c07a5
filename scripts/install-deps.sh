#!/usr/bin/env bash
# Installs what the tests and the demo need on a fresh Debian machine: a
# Valkey or Redis server (7.0+, for Functions), and patch(1) (a test
# applies ffc fmt -d's diffs with it). Does nothing when they are already
# on PATH.
set -euo pipefail

have_server() {
  local bin
  for bin in valkey-server redis-server; do
    if command -v "$bin" >/dev/null 2>&1; then
      echo "using $(command -v "$bin"): $("$bin" --version)"
      return 0
    fi
  done
  return 1
}

server=yes
have_server && server=""
patch=yes
command -v patch >/dev/null 2>&1 && patch=""
if [ -z "$server" ] && [ -z "$patch" ]; then
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo="sudo"
fi
$sudo apt-get update -qq
pkgs=()
if [ -n "$patch" ]; then
  pkgs+=(patch)
fi
if [ -n "$server" ]; then
  # Prefer valkey when the distribution has it; fall back to redis.
  pkg=redis-server
  if apt-cache show valkey-server >/dev/null 2>&1; then
    pkg=valkey-server
  fi
  echo "no valkey-server or redis-server on PATH: installing Debian's $pkg"
  pkgs+=("$pkg")
fi
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" >/dev/null
if [ -n "$server" ]; then
  # The packaged service is not needed: tests and ffrun dev start their own.
  $sudo systemctl disable --now "$pkg" >/dev/null 2>&1 || true
  have_server
fi
