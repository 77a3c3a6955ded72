#!/usr/bin/env bash
# Builds the image and checks the running container from outside: health, the tool list, an
# Echo call, the non-root user, the image's HEALTHCHECK, and a graceful stop (exit code 0); which
# mode Bash runs in (the start-up log), that nothing a Bash call starts outlives it, and, in a
# second container run with the flags that let bubblewrap work, that sandboxed Bash sees no key;
# then the Deployment of deploy/kubernetes, played with `podman kube play`.
#
#   npm run test:container
#
# PODMAN     the podman to use; default <repo>/../shared/container/podman.sh (as in CI, where
#            shared/ is a sibling of the clone)
# BASE_IMAGE the base image; default what `podman.sh --base-image` prints, built with the Node.js
#            line PODMAN_NODE_MAJOR (default 26, the Active LTS)
# IMAGE      the tag to build; default toolport:test
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
P=${PODMAN:-$ROOT/../shared/container/podman.sh}
if [[ $P == */* ]]; then
  if [[ ! -f $P ]]; then
    echo "test-container: no podman at $P; put shared/ beside the repository or set PODMAN" >&2
    exit 2
  fi
  P=$(cd "$(dirname "$P")" && pwd)/$(basename "$P")
elif ! command -v "$P" >/dev/null; then
  echo "test-container: PODMAN=$P is not on PATH" >&2
  exit 2
fi
# podman.sh may be checked out without its executable bit.
podman() { if [[ -f $P && ! -x $P ]]; then bash "$P" "$@"; else "$P" "$@"; fi; }

IMAGE=${IMAGE:-toolport:test}
NAME=toolport-test-$$
SANDBOXED=$NAME-sandbox
HEALTH_DEADLINE_S=60
passed=0
failed=0
WORK=$(mktemp -d)

cleanup() {
  local status=$? container
  trap - EXIT INT TERM
  for container in "$NAME" "$SANDBOXED"; do
    if podman container exists "$container" 2>/dev/null; then
      if [[ $status -ne 0 || $failed -ne 0 ]]; then
        echo "--- container logs ($container) ---" >&2
        podman logs "$container" >&2 || true
        echo "--- end of container logs ---" >&2
      fi
      podman rm -f -t 0 "$container" >/dev/null 2>&1 || true
    fi
  done
  rm -rf "$WORK"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }

# check DESCRIPTION COMMAND...: runs the command; its output is shown only when it fails.
check() {
  local what=$1; shift
  if "$@" >"$WORK/out" 2>&1; then
    passed=$((passed + 1)); echo "ok   - $what"
  else
    failed=$((failed + 1)); echo "FAIL - $what"; sed 's/^/       /' "$WORK/out"
  fi
}

# http METHOD PATH [JSON_BODY]: prints the response body; fails on a non-2xx status.
# shellcheck disable=SC2016 # the single-quoted scripts are JavaScript, expanded by no shell
http() {
  node -e '
    const [method, url, body] = process.argv.slice(1);
    const headers = { authorization: `Bearer ${process.env.API_KEY}` };
    const init = { method, headers, signal: AbortSignal.timeout(5000) };
    if (body !== undefined) Object.assign(init, { body, headers: { ...headers, "content-type": "application/json" } });
    fetch(url, init).then(async (r) => {
      const text = await r.text();
      process.stdout.write(text);
      if (!r.ok) { console.error(`\nHTTP ${r.status} from ${method} ${url}`); process.exit(1); }
    }, (err) => { console.error(`${method} ${url}: ${err.cause?.code ?? err.message}`); process.exit(1); });
  ' "$1" "$BASE_URL$2" ${3+"$3"}
}

# expect_json JS_PREDICATE: reads JSON on stdin; fails, showing it, unless the predicate (over `b`) holds.
# shellcheck disable=SC2016
expect_json() {
  node -e '
    let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => {
      let b; try { b = JSON.parse(s); } catch { console.error("not JSON: " + s); process.exit(1); }
      if (!new Function("b", "return (" + process.argv[1] + ");")(b)) { console.error("unexpected: " + s); process.exit(1); }
    });
  ' "$1"
}

check_node_line() {
  local version
  version=$(podman exec "$NAME" node --version)
  echo "node in the image: $version (expected v$NODE_LINE.x)"
  [[ $version == v$NODE_LINE.* ]]
}
check_healthz() { http GET /healthz | expect_json 'b.status === "ok"'; }
check_tools() { http GET /tools | expect_json 'Array.isArray(b) && b.some((t) => t.name === "Echo")'; }
check_echo() {
  http POST /tools/Echo '{"text":"hello"}' |
    expect_json 'b.isError === false && b.content.length === 1 && b.content[0].type === "text" && b.content[0].text === "hello"'
}
check_file_tools() {
  http POST /tools/Write '{"file_path":"notes/hello.txt","content":"hello from the container\n"}' |
    expect_json 'b.isError === false' &&
    http POST /tools/Read '{"file_path":"/workspace/notes/hello.txt"}' |
    expect_json 'b.isError === false && b.content[0].text.includes("hello from the container")' &&
    http POST /tools/Grep '{"pattern":"from the c[o]ntainer"}' |
    expect_json 'b.isError === false && b.content[0].text.includes("notes/hello.txt")'
}
check_bash() {
  http POST /tools/Bash '{"command":"id -u && pwd"}' | expect_json 'b.isError === false && /^1000\n\/workspace/.test(b.content[0].text)'
}
check_refuses_escape() {
  http POST /tools/Read '{"file_path":"/etc/passwd"}' |
    expect_json 'b.isError === true && b.content[0].text.includes("outside the workspace")'
}
check_unauthenticated_refused() {
  ! API_KEY=wrong-key http GET /tools
}
check_no_keys_refuses_to_start() {
  local out
  out=$(podman run --rm "$IMAGE" 2>&1) && { echo "started without keys: $out"; return 1; }
  echo "$out"
  grep -q 'TOOLPORT_API_KEYS' <<<"$out"
}
check_uid() {
  local uid; uid=$(podman exec "$NAME" id -u); echo "uid $uid"
  [[ $uid =~ ^[0-9]+$ && $uid -ne 0 ]]
}
check_no_root_process() {
  podman top "$NAME" user pid args | tee /dev/stderr | awk 'NR > 1 && $1 == "root" { bad = 1 } END { exit bad }'
}
check_stop() {
  local code
  podman stop -t 10 "$NAME"
  code=$(podman inspect "$NAME" --format '{{.State.ExitCode}}'); echo "exit code $code"
  [[ $code == 0 ]]
}
# bash_mode CONTAINER JS_PREDICATE: the start-up log line on Bash's mode, which must satisfy the predicate.
bash_mode() {
  podman logs "$1" 2>&1 | grep '"bashSandbox"' | tee /dev/stderr | head -n1 | expect_json "$2"
}
check_bash_mode_default() {
  # Under podman's defaults bubblewrap cannot mount a /proc of its own: unconfined, under the subreaper.
  bash_mode "$NAME" 'b.bashSandbox === "off" && b.reaping === "subreaper" && /^TOOLPORT_BASH_SANDBOX=auto and bubblewrap does not work here: /.test(b.reason)'
}
# bash_body COMMAND: the JSON body of a Bash call that runs COMMAND.
# shellcheck disable=SC2016
bash_body() { node -e 'process.stdout.write(JSON.stringify({ command: process.argv[1] }))' "$1"; }
# processes_with TEXT: how many processes in the container have TEXT in their command line.
processes_with() {
  podman exec "$NAME" sh -c 'for f in /proc/[0-9]*/cmdline; do tr "\0" " " < "$f" 2>/dev/null; echo; done' | grep -c -F "$1"
}
check_no_escapees() {
  local marker=1000.$RANDOM$RANDOM command
  # A process that calls setsid and one orphaned by a double fork; the call returns once both are in place.
  # shellcheck disable=SC2016 # expanded by the container's bash
  command='setsid sleep MARK > /dev/null 2>&1 & s=$!; (sleep MARK > /dev/null 2>&1 &); until [ "$(cut -d" " -f6 /proc/$s/stat)" = "$s" ]; do :; done; echo left behind'
  http POST /tools/Bash "$(bash_body "${command//MARK/$marker}")" |
    expect_json 'b.isError === false && b.content[0].text === "left behind"' &&
    [[ $(processes_with "$marker") == 0 ]]
}
check_sandboxed_bash_sees_no_key() {
  bash_mode "$SANDBOXED" 'b.bashSandbox === "on" && b.reason === "TOOLPORT_BASH_SANDBOX=true and a trial run of bubblewrap succeeded"' &&
    http POST /tools/Bash "$(bash_body "cat /run/secrets/toolport-keys.json; grep -l -a -s -e $API_KEY -e $FILE_KEY /proc/[0-9]*/environ; echo searched")" |
    expect_json "b.content[0].text.includes('searched') && !b.content[0].text.includes('$API_KEY') && !b.content[0].text.includes('$FILE_KEY') && b.content[0].text.includes('No such file or directory')" &&
    API_KEY=$FILE_KEY http GET /tools >/dev/null
}
# wait_healthy CONTAINER: polls until /healthz answers, the container dies, or the deadline passes.
wait_healthy() {
  local deadline=$((SECONDS + HEALTH_DEADLINE_S))
  until http GET /healthz >/dev/null 2>&1; do
    if [[ $(podman inspect "$1" --format '{{.State.Running}}') != true ]]; then
      failed=$((failed + 1)); echo "FAIL - $1 exited before it answered /healthz"; return 1
    fi
    if ((SECONDS >= deadline)); then
      failed=$((failed + 1)); echo "FAIL - $1: /healthz did not answer within ${HEALTH_DEADLINE_S} s"; return 1
    fi
    sleep 0.2
  done
}

started=$(now)
echo "== image: build $IMAGE (podman: $P)"
NODE_LINE=${PODMAN_NODE_MAJOR:-26}
base=${BASE_IMAGE:-$(PODMAN_NODE_MAJOR=$NODE_LINE podman --base-image)}
podman build --format docker --build-arg BASE_IMAGE="$base" -t "$IMAGE" -f "$ROOT/Dockerfile" "$ROOT"
echo "== image: built in $(since "$started"), $(podman image inspect "$IMAGE" --format '{{.Size}}' |
  awk '{ printf "%.0f MB", $1 / 1e6 }')"

checks_started=$(now)
echo "== container: run $NAME"
# The image listens on 0.0.0.0 and serves Bash, so it refuses to start without API keys.
API_KEY=$(node -e 'console.log(require("node:crypto").randomBytes(24).toString("base64url"))')
export API_KEY
podman run -d --name "$NAME" -p 127.0.0.1::8080 -e TOOLPORT_API_KEYS="$API_KEY" "$IMAGE" >/dev/null
host_port=$(podman port "$NAME" 8080/tcp | head -n1)
BASE_URL="http://${host_port/0.0.0.0/127.0.0.1}"
echo "listening at $BASE_URL"

wait_healthy "$NAME" || true

if ((failed == 0)); then
  echo "ready after $(since "$checks_started")"
  if [[ -z ${BASE_IMAGE:-} ]]; then check "the image runs Node.js $NODE_LINE" check_node_line; fi
  check "GET /healthz answers {\"status\":\"ok\"}" check_healthz
  check "GET /tools is a JSON array that lists Echo" check_tools
  check "POST /tools/Echo {\"text\":\"hello\"} returns hello with isError false" check_echo
  check "Write, Read and Grep round-trip a file in /workspace" check_file_tools
  check "Bash runs as uid 1000 in /workspace" check_bash
  check "the start-up log says Bash runs without the sandbox, under the subreaper, and why" check_bash_mode_default
  check "a setsid'd and a double-forked process a Bash call starts are gone when it returns" check_no_escapees
  check "Read refuses a path outside the workspace" check_refuses_escape
  check "a request with a wrong API key is refused" check_unauthenticated_refused
  check "without API keys the image refuses to start, naming TOOLPORT_API_KEYS" check_no_keys_refuses_to_start
  check "the server runs as a non-root user (id -u)" check_uid
  check "no process in the container runs as root (podman top)" check_no_root_process
  check "ripgrep is installed for the Grep tool" podman exec "$NAME" rg --version
  # shellcheck disable=SC2016 # $f is expanded by the container's shell
  check "the app user can write to /workspace" \
    podman exec "$NAME" sh -c 'f=/workspace/.toolport-probe && touch "$f" && rm "$f"'
  check "the image's HEALTHCHECK passes (podman healthcheck run)" podman healthcheck run "$NAME"
  check "podman stop -t 10 ends the container gracefully with exit code 0" check_stop
fi

if ((failed == 0)); then
  echo "== container: run $SANDBOXED (--security-opt unmask=/proc/*, TOOLPORT_BASH_SANDBOX=true)"
  FILE_KEY=$(node -e 'console.log(require("node:crypto").randomBytes(24).toString("base64url"))')
  printf '[{"label":"from-file","key":"%s"}]' "$FILE_KEY" >"$WORK/keys.json"
  chmod 644 "$WORK/keys.json"
  podman run -d --name "$SANDBOXED" -p 127.0.0.1::8080 --security-opt 'unmask=/proc/*' \
    -e TOOLPORT_BASH_SANDBOX=true -e TOOLPORT_API_KEYS="$API_KEY" \
    -e TOOLPORT_API_KEYS_FILE=/run/secrets/toolport-keys.json -v "$WORK/keys.json:/run/secrets/toolport-keys.json:ro" \
    "$IMAGE" >/dev/null
  host_port=$(podman port "$SANDBOXED" 8080/tcp | head -n1)
  BASE_URL="http://${host_port/0.0.0.0/127.0.0.1}"
  if wait_healthy "$SANDBOXED"; then
    check "sandboxed Bash reads neither key, from /run/secrets or from the server's environment" check_sandboxed_bash_sees_no_key
  fi
fi

# The Kubernetes Deployment of deploy/kubernetes, played by podman with its ConfigMap, claim and
# security context (read-only root, uid 1000, no capabilities, no_new_privs); what podman cannot
# play as Kubernetes would is said in test/deploy/podman-play.ts.
if ((failed == 0)); then
  PLAY=toolport-play-$$
  PLAYED=$PLAY-pod-0-toolport
  echo "== kube: podman kube play deploy/kubernetes as $PLAY"
  play_cleanup() {
    if [[ $1 -ne 0 || $failed -ne 0 ]]; then podman logs "$PLAYED" >&2 || true; fi
    podman pod rm -f "$PLAY-pod-0" >/dev/null 2>&1 || true
    podman volume rm -f "$PLAY-tmp" "$PLAY-toolport-workspace" >/dev/null 2>&1 || true
  }
  # cleanup takes the exit status from $?, and errexit holds in traps: hand the status on.
  trap 'play_status=$?; play_cleanup "$play_status"; set +e; (exit "$play_status"); cleanup' EXIT
  check_played_ready() { http GET /readyz | expect_json 'b.status === "ready"' && check_tools; }
  check_played_confined() {
    # shellcheck disable=SC2016 # expanded by the container's shell
    podman exec "$PLAYED" sh -c '[ "$(id -u)" = 1000 ] && ! touch /probe 2>/dev/null &&
      grep -q "^CapEff:\s*0*$" /proc/self/status && grep -q "^NoNewPrivs:\s*1$" /proc/self/status'
  }
  mkdir -m 755 "$WORK/play-keys"
  printf '[{"label":"from-secret","key":"%s"}]' "$API_KEY" >"$WORK/play-keys/keys.json"
  chmod 644 "$WORK/play-keys/keys.json"
  play_port=$(node -e 'const s = require("node:net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })')
  node --import tsx "$ROOT/test/deploy/podman-play.ts" "$(podman image inspect "$IMAGE" --format '{{index .RepoTags 0}}')" \
    "$PLAY" "$play_port" "$WORK/play-keys" >"$WORK/play.yaml"
  BASE_URL=http://127.0.0.1:$play_port
  check "podman kube play starts the Deployment" podman kube play "$WORK/play.yaml"
  if ((failed == 0)) && wait_healthy "$PLAYED"; then
    check "the played Deployment answers /readyz, and a key from its keys file" check_played_ready
    check "it runs as uid 1000 on a read-only root, without capabilities, with no_new_privs" check_played_confined
    check "its start-up log says Bash runs without the sandbox (TOOLPORT_BASH_SANDBOX=false), under the subreaper" \
      bash_mode "$PLAYED" 'b.bashSandbox === "off" && b.reaping === "subreaper" && b.reason === "TOOLPORT_BASH_SANDBOX=false"'
  fi
fi

echo "== checks took $(since "$checks_started"); total $(since "$started")"
echo "container: $passed passed, $failed failed"
((failed == 0))
