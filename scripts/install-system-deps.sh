#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages the tools and their tests need, when they are missing:
#   ripgrep     `rg`, behind the Grep tool
#   bubblewrap  `bwrap`, the sandbox of the Bash tool (TOOLPORT_BASH_SANDBOX=auto uses it when it works)
#   perl-base   `perl`, which runs the subreaper of Bash without the sandbox (essential on Debian)
# Idempotent: installs nothing and touches no package index when everything is present.
# Needs root, or sudo for a normal user.
set -euo pipefail

declare -A command_of=([ripgrep]=rg [bubblewrap]=bwrap [perl-base]=perl)
missing=()
for package in ripgrep bubblewrap perl-base; do
  if ! command -v "${command_of[$package]}" >/dev/null 2>&1; then missing+=("$package"); fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-system-deps: ripgrep, bubblewrap and perl are already installed"
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-system-deps: apt-get not found; install these packages by hand: ${missing[*]}" >&2
  exit 1
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "install-system-deps: run as root (or install sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
  sudo=(sudo)
fi

echo "install-system-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
