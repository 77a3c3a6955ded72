#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages the tools and their tests need, when they are missing:
#   ripgrep     `rg`, behind the Grep tool
#   bubblewrap  `bwrap`, the sandbox of the Bash tool (TOOLPORT_BASH_SANDBOX=auto uses it when it works)
#   perl-base   `perl`, which runs the subreaper of Bash without the sandbox (essential on Debian)
#   python3     runs the race tests' swapper (renameat2 through ctypes)
#   libatomic1  needed by Node.js 26's official binary (scripts/with-node.sh 26 ...)
#   wrk         the load generator of the benchmark (npm run bench)
#   redis-server, redis-tools  Redis, the shared rate-limit store (TOOLPORT_REDIS_URL), for its tests and npm run test:replicas
#   haproxy     the load balancer in front of the replicas in npm run test:replicas
#   strace      traces the programs bash runs, for the Bash rules' oracle (test/permissions/bash/oracle.test.ts)
#   golang-github-docker-docker-dev  Docker's default seccomp profile (profiles/seccomp/default.json),
#               which npm run test:container runs the image under
# Idempotent: installs nothing and touches no package index when everything is present.
# Needs root, or sudo for a normal user.
set -euo pipefail

declare -A command_of=([ripgrep]=rg [bubblewrap]=bwrap [perl-base]=perl [python3]=python3 [wrk]=wrk [redis-server]=redis-server [redis-tools]=redis-cli [haproxy]=haproxy [strace]=strace)
missing=()
for package in ripgrep bubblewrap perl-base python3 wrk redis-server redis-tools haproxy strace; do
  if ! command -v "${command_of[$package]}" >/dev/null 2>&1; then missing+=("$package"); fi
done
if ! { ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null; } | grep -q 'libatomic\.so\.1'; then missing+=(libatomic1); fi
if [ ! -f /usr/share/gocode/src/github.com/docker/docker/profiles/seccomp/default.json ]; then missing+=(golang-github-docker-docker-dev); fi

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-system-deps: ripgrep, bubblewrap, perl, python3, libatomic1, wrk, redis-server, redis-tools, haproxy, strace and Docker's seccomp profile are already installed"
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
"${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 update -qq
"${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}"
