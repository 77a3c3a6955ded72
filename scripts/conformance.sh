#!/usr/bin/env bash
# The official MCP conformance suite (@modelcontextprotocol/conformance) against the real server:
#
#   npm run conformance                 # or: bash scripts/conformance.sh
#
# Starts `node --import tsx src/server.ts` on a free loopback port with the built-in tools, the
# suite's test tools (test/fixtures/conformance-plugin.ts) and two upstream MCP servers over stdio
# (the reference everything and memory servers, devDependencies), so that every run also shows
# upstream tools changing nothing a client sees of the protocol; then runs every server scenario that
# applies to a tools-only server, for each protocol revision it applies to, with two pinned
# releases of the suite: the current 0.1.x release and the 2026-07-28 line (0.2.0 pre-releases).
# Prints one row per run and `conformance: N passed, M failed`; exits 1 when a run fails.
#
# The suite needs Node.js 22 or later; on an older node the script runs itself again through
# scripts/with-node.sh 22. Each suite version is installed once, with the MCP SDK its client runs
# on pinned too, into $TOOLPORT_CONFORMANCE_CACHE (default ~/.cache/toolport/conformance/);
# the npm registry is all it needs. Each run's checks.json and output stay in a temp directory,
# kept and named when something fails.
#
# Scenarios not run, because a tools-only server has nothing for them to test (docs/mcp.md, "Conformance"):
#   resources-*, prompts-*, completion-complete, sep-2164-resource-not-found: no resources or prompts.
#   logging-set-level, tools-call-with-logging: no `logging` capability; a tool's log goes to the
#     server's log, never to the client.
#   tools-call-sampling, tools-call-elicitation, elicitation-sep1034-defaults, elicitation-sep1330-enums,
#     input-required-result-* (but unsupported-methods): a tool cannot ask the client for anything.
#   server-sse-polling: needs a tool that drops its SSE stream and a resumable event store; the
#     stateless server keeps no event store, so no stream can be resumed.
#   http-custom-header-server-validation: no tool declares `x-mcp-header` parameters.
#   tasks-mrtr-input, tasks-mrtr-composition, tasks-required-task-error: a task that waits for the
#     client's input, or a tool that must run as a task; no toolport tool asks for input or needs one.
#   tasks-status-notifications: the suite skips it itself (pending its subscriptions/listen rewrite).
#   sep-2640-skills-*: an extension toolport does not offer.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if (($(node -p 'process.versions.node.split(".")[0]') < 22)); then
  exec scripts/with-node.sh 22 bash scripts/conformance.sh "$@"
fi

# Pinned: the suite, and the SDK whose Client drives the wire in its stateful (pre-2026) runs.
SUITE_VERSIONS=(0.1.16 0.2.0-alpha.12)
SDK_VERSION=1.32.2

# suite version | revision | scenarios. The 0.1.x suite always speaks 2025-11-25 (its SDK client's
# newest revision; --spec-version only filters its list), so it runs once. The 0.2.0 suite runs each
# scenario at each revision it applies to; its stateful runs negotiate 2025-11-25 as well (the same
# SDK client), the revision choosing the scenarios and the JSON schema every message is checked by.
LEGACY_TOOLS="tools-list tools-call-simple-text tools-call-image tools-call-error tools-call-with-progress"
# Audio, embedded resources and mixed content: in the suite since revision 2025-06-18.
CONTENT_TOOLS="tools-call-audio tools-call-embedded-resource tools-call-mixed-content"
MATRIX=(
  "0.1.16|2025-11-25|server-initialize ping $LEGACY_TOOLS $CONTENT_TOOLS json-schema-2020-12 server-sse-multiple-streams dns-rebinding-protection"
  "0.2.0-alpha.12|2025-03-26|server-session-lifecycle"
  "0.2.0-alpha.12|2025-06-18|server-initialize server-session-lifecycle ping $LEGACY_TOOLS $CONTENT_TOOLS"
  "0.2.0-alpha.12|2025-11-25|server-initialize server-session-lifecycle ping $LEGACY_TOOLS $CONTENT_TOOLS json-schema-2020-12 server-sse-multiple-streams dns-rebinding-protection"
  "0.2.0-alpha.12|2026-07-28|server-stateless $LEGACY_TOOLS $CONTENT_TOOLS json-schema-2020-12 server-sse-multiple-streams dns-rebinding-protection caching http-header-validation input-required-result-unsupported-methods"
  # The tasks extension (io.modelcontextprotocol/tasks): extension scenarios, run with --force.
  "0.2.0-alpha.12|2026-07-28|tasks-lifecycle tasks-capability-negotiation tasks-wire-fields tasks-request-state-removal tasks-request-headers tasks-dispatch-and-envelope"
)

# Checks excused, each for a reason named here: kind | scenario | check id | revisions (* for all) | why.
# `n/a`: the check asks for what a tools-only server does not have. `limit`: a limit of toolport
# that a change to src/ could lift. An excused check that passes fails the run ("stale": remove it).
EXCUSED=(
  'limit|json-schema-2020-12|sep-2106-composition-keywords-preserved|2026-07-28|the registry refuses allOf/anyOf/oneOf at the root of an input schema (the Anthropic and OpenAI APIs reject them there); the test tool goes without its root allOf'
  'n/a|server-stateless|sep-2575-server-rejects-undeclared-capability|*|no toolport tool needs a client capability (sampling, elicitation, roots), so there is no test_missing_capability to make the server answer -32021'
  'n/a|server-stateless|sep-2575-missing-capability-http-400|*|as above: no call can need a capability the client did not declare'
  'n/a|tasks-dispatch-and-envelope|tasks-result-type-complete-on-non-task-responses|*|its last step calls confirm_delete, a tool that asks the client for input (a task in input_required); no toolport tool asks for input'
  'n/a|caching|sep-2549-prompts-list-caching-hints|*|no prompts: prompts/list is -32601, as for any server without the capability'
  'n/a|caching|sep-2549-resources-list-caching-hints|*|no resources: resources/list is -32601'
  'n/a|caching|sep-2549-resources-templates-list-caching-hints|*|no resources: resources/templates/list is -32601'
)

cache=${TOOLPORT_CONFORMANCE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/toolport/conformance}
run_dir=$(mktemp -d "${TMPDIR:-/tmp}/toolport-conformance-run-XXXXXX")
workspace=$run_dir/workspace
mkdir -p "$workspace"
server_pid=""
keep_run_dir=0
cleanup() {
  if [[ -n $server_pid ]]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  if ((keep_run_dir)); then echo "conformance: results and logs kept in $run_dir" >&2; else rm -rf "$run_dir"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Installs a suite version once; a half-done install never counts (it is moved into place whole).
install_suite() {
  local version=$1 dir=$cache/$1-sdk-$SDK_VERSION
  if [[ -x $dir/node_modules/.bin/conformance ]]; then return; fi
  echo "conformance: installing @modelcontextprotocol/conformance@$version (SDK $SDK_VERSION)" >&2
  mkdir -p "$cache"
  local work
  work=$(mktemp -d "$cache/.install-XXXXXX")
  npm install --prefix "$work" --no-audit --no-fund --loglevel=error \
    "@modelcontextprotocol/conformance@$version" "@modelcontextprotocol/sdk@$SDK_VERSION" >&2
  mv -T "$work" "$dir" 2>/dev/null || rm -rf "$work"
}
for version in "${SUITE_VERSIONS[@]}"; do install_suite "$version"; done

# The upstreams, in the `mcpServers` shape of a Claude Desktop config; their tools are served as
# everything__* and memory__*. No lock file beside it: every upstream tool is served as listed.
node - "$run_dir/upstreams.json" "$PWD/node_modules/@modelcontextprotocol" "$run_dir/memory.jsonl" <<'EOF'
const [file, modules, memoryFile] = process.argv.slice(2);
const mcpServers = {
  everything: { command: 'node', args: [`${modules}/server-everything/dist/index.js`, 'stdio'] },
  memory: { command: 'node', args: [`${modules}/server-memory/dist/index.js`], env: { MEMORY_FILE_PATH: memoryFile } },
};
require('node:fs').writeFileSync(file, JSON.stringify({ mcpServers }, null, 2));
EOF

# The server: loopback only, no keys, a temp workspace, the built-in tools, the test tools and the
# upstreams' tools. No rate limit: the suite sends a few hundred requests in a burst from one address.
: >"$run_dir/server.log"
env -i PATH="$PATH" HOME="$HOME" \
  HOST=127.0.0.1 PORT=0 LOG_LEVEL=info \
  TOOLPORT_WORKSPACE="$workspace" TOOLPORT_BASH_SANDBOX=false TOOLPORT_RATE_LIMIT=0 \
  TOOLPORT_PLUGINS=./test/fixtures/conformance-plugin.ts TOOLPORT_UPSTREAMS="$run_dir/upstreams.json" \
  node --import tsx src/server.ts >"$run_dir/server.log" 2>&1 &
server_pid=$!

server_failed() {
  keep_run_dir=1
  echo "conformance: $1; the server's last lines:" >&2
  tail -n 20 "$run_dir/server.log" >&2
  exit 1
}
url=""
for _ in $(seq 1 600); do # 60 s for tsx to compile and the server to listen
  kill -0 "$server_pid" 2>/dev/null || server_failed "the server exited before it listened"
  url=$(grep -o '"Server listening at http://127\.0\.0\.1:[0-9]*"' "$run_dir/server.log" | head -n1 | grep -o 'http://[^"]*' || true)
  [[ -n $url ]] && break
  sleep 0.1
done
[[ -n $url ]] || server_failed "the server did not listen within 60 s"
node -e 'fetch(process.argv[1], { signal: AbortSignal.timeout(10000) }).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))' "$url/healthz" ||
  server_failed "GET /healthz did not answer 200"
# The server waits for each upstream's first connection before it listens, so each has said by now
# whether it connected; without them the runs below would prove nothing about upstreams.
connected=$(node - "$run_dir/upstreams.json" "$run_dir/server.log" <<'EOF'
const fs = require('node:fs');
const [config, log] = process.argv.slice(2);
const names = Object.keys(JSON.parse(fs.readFileSync(config, 'utf8')).mcpServers);
const lines = fs.readFileSync(log, 'utf8').split('\n').flatMap((line) => {
  try {
    return [JSON.parse(line)];
  } catch {
    return [];
  }
});
const tools = names.map((name) => lines.find((l) => l.upstream === name && l.msg === 'upstream connected')?.tools);
// Why each one that did not connect failed, when the server said ("upstream could not be reached").
const missing = names.flatMap((name, i) => {
  if (tools[i] !== undefined) return [];
  const reason = lines.findLast((l) => l.upstream === name && l.reason !== undefined)?.reason;
  return [`upstream "${name}" did not connect (${reason ?? 'no "upstream connected" line in the server\'s log'})`];
});
console.log(missing.length === 0 ? names.map((name, i) => `${name} (${tools[i]} tools)`).join(', ') : missing.join('; '));
process.exit(missing.length === 0 ? 0 : 1);
EOF
) || server_failed "$connected"
echo "conformance: server at $url (node $(node --version)), upstreams connected: $connected" >&2

# One scenario at one revision with one suite version; its checks.json lands in its own directory.
run_one() {
  local version=$1 revision=$2 scenario=$3 out=$run_dir/$1/$2/$3
  local args=(server --url "$url/mcp" --scenario "$scenario" -o "$out")
  [[ $version == 0.1.* ]] || args+=(--spec-version "$revision")
  # Extension scenarios are on no revision's timeline; the suite runs them only when told to.
  [[ $scenario != tasks-* ]] || args+=(--force)
  mkdir -p "$out"
  (cd "$out" && timeout 120 "$cache/$version-sdk-$SDK_VERSION/node_modules/.bin/conformance" "${args[@]}") >"$out/output.txt" 2>&1 || true
}

started=$SECONDS
for row in "${MATRIX[@]}"; do
  IFS='|' read -r version revision scenarios <<<"$row"
  for scenario in $scenarios; do
    begun=$(date +%s%N)
    run_one "$version" "$revision" "$scenario"
    echo $((($(date +%s%N) - begun) / 1000000)) >"$run_dir/$version/$revision/$scenario/ms"
  done
done

# The table, from each run's checks.json (a run without one failed to run at all).
excused_file=$run_dir/excused.txt
printf '%s\n' "${EXCUSED[@]}" >"$excused_file"
set +e
node - "$run_dir" "$excused_file" "${MATRIX[@]}" <<'EOF'
const fs = require('node:fs');
const path = require('node:path');
const [runDir, excusedFile, ...matrix] = process.argv.slice(2);
const excused = fs.readFileSync(excusedFile, 'utf8').split('\n').filter(Boolean).map((line) => {
  const [kind, scenario, check, revisions, why] = line.split('|');
  return { kind, scenario, check, revisions, why };
});
const excuseFor = (scenario, check, revision) =>
  excused.find((e) => e.scenario === scenario && e.check === check && (e.revisions === '*' || e.revisions.split(',').includes(revision)));
// The suite writes <dir>/server-<scenario>-<time>/checks.json.
const checksIn = (dir) => {
  const sub = fs.readdirSync(dir).find((name) => fs.existsSync(path.join(dir, name, 'checks.json')));
  return sub === undefined ? undefined : JSON.parse(fs.readFileSync(path.join(dir, sub, 'checks.json'), 'utf8'));
};
const rows = [];
const notes = [];
const tally = { passed: 0, failed: 0, idle: 0, excused: 0, stale: 0 };
for (const line of matrix) {
  const [version, revision, scenarios] = line.split('|');
  for (const scenario of scenarios.split(' ').filter(Boolean)) {
    const dir = path.join(runDir, version, revision, scenario);
    const where = `${version} ${revision} ${scenario}`;
    const seconds = (Number(fs.readFileSync(path.join(dir, 'ms'), 'utf8')) / 1000).toFixed(1);
    const checks = checksIn(dir);
    if (checks === undefined) {
      const lines = fs.readFileSync(path.join(dir, 'output.txt'), 'utf8').trim().split('\n');
      const output = lines.length > 1 ? `${lines[0]} ... ${lines.at(-1)}` : lines[0];
      rows.push([version, revision, scenario, 'FAILED', 'no results', `${seconds} s`]);
      notes.push(`${where}: the suite wrote no checks.json: ${output}`);
      tally.failed++;
      continue;
    }
    const count = { SUCCESS: 0, FAILURE: 0, WARNING: 0, SKIPPED: 0, INFO: 0 };
    const kinds = {};
    let bad = 0;
    for (const c of checks) {
      count[c.status] = (count[c.status] ?? 0) + 1;
      const excuse = excuseFor(scenario, c.id, revision);
      if (c.status === 'FAILURE' && excuse) {
        kinds[excuse.kind] = (kinds[excuse.kind] ?? 0) + 1;
        tally.excused++;
        notes.push(`${where}: ${c.id}: excused (${excuse.kind}): ${excuse.why}`);
      } else if (c.status === 'FAILURE') {
        bad++;
        notes.push(`${where}: ${c.id}: FAILED: ${c.errorMessage ?? c.description}`);
      } else if (c.status === 'SUCCESS' && excuse) {
        bad++;
        tally.stale++;
        notes.push(`${where}: ${c.id}: passes but is excused (stale: remove it from EXCUSED in scripts/conformance.sh)`);
      }
      if (c.status === 'WARNING') notes.push(`${where}: ${c.id}: warning: ${c.errorMessage ?? c.details?.message ?? c.description}`);
    }
    // A scenario may find nothing to check (stateful checks need a session, which a stateless server never issues).
    const idle = !bad && count.SUCCESS === 0;
    if (idle && count.WARNING === 0) notes.push(`${where}: nothing to check: ${checks.map((c) => c.errorMessage ?? c.description).join('; ') || 'no checks'}`);
    bad ? tally.failed++ : idle ? tally.idle++ : tally.passed++;
    const excusedText = Object.entries(kinds).map(([kind, n]) => `${n} ${kind}`).join(', ');
    const result = bad ? 'FAILED' : idle ? 'nothing to check' : excusedText ? `passed (${excusedText})` : 'passed';
    const checkText = `${count.SUCCESS} ok, ${count.FAILURE} failed, ${count.WARNING} warning, ${count.SKIPPED} skipped`;
    rows.push([version, revision, scenario, result, checkText, `${seconds} s`]);
  }
}
const head = ['suite', 'revision', 'scenario', 'result', 'checks', 'time'];
const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
const format = (r) => r.map((cell, i) => cell.padEnd(widths[i])).join('  ').trimEnd();
console.log([format(head), format(widths.map((w) => '-'.repeat(w))), ...rows.map(format)].join('\n'));
if (notes.length) console.log('\n' + notes.join('\n'));
const extra = [`${tally.idle} with nothing to check`, `${tally.excused} excused checks`, ...(tally.stale ? [`${tally.stale} stale excuses`] : [])].join(', ');
console.log(`\nconformance: ${tally.passed} passed, ${tally.failed} failed (${extra})`);
process.exit(tally.failed ? 1 : 0);
EOF
status=$?
set -e
echo "conformance: $((SECONDS - started)) s of scenarios" >&2
if ((status != 0)); then keep_run_dir=1; fi
exit "$status"
