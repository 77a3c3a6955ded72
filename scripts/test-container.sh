#!/usr/bin/env bash
# Builds the image and checks the running container from outside: health, the tool list, an
# Echo call, the non-root user, the image's HEALTHCHECK, and a graceful stop (exit code 0); which
# mode Bash runs in (the start-up log), that nothing a Bash call starts outlives it; then, in each
# setting toolport is deployed in, Bash as an attacker (test/deploy/container-attacks.sh): it must
# read no key or secret, connect nowhere, neither signal nor trace the server, not see another
# key's workspace, and be stopped at its process and temporary-space bounds, while git, npm test
# and node work in its workspace. The settings, each with a keys file that gives two keys
# workspaces of their own, TOOLPORT_API_KEYS and an operator's secret in the environment:
#   default     the README's run line under podman's defaults (Landlock expected)
#   restricted  Docker's default seccomp profile, no capabilities, no_new_privs, a read-only root
#               with /tmp on a tmpfs, uid 1000: a Kubernetes restricted pod's settings (Landlock)
#   kube        the Deployment of deploy/kubernetes, played with `podman kube play` (Landlock)
#   bubblewrap  podman with the flags that let bubblewrap work (--security-opt unmask=/proc/*)
#
#   npm run test:container
#
# PODMAN     the podman to use; default <repo>/../shared/container/podman.sh (as in CI, where
#            shared/ is a sibling of the clone)
# BASE_IMAGE the base image; default what `podman.sh --base-image` prints, built with the Node.js
#            line PODMAN_NODE_MAJOR (default 26, the Active LTS)
# IMAGE      the tag to build; default toolport:test
# SECCOMP_PROFILE  Docker's default seccomp profile; default where Debian's
#            golang-github-docker-docker-dev puts it (scripts/install-system-deps.sh installs it)
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
RESTRICTED=$NAME-restricted
SECCOMP_PROFILE=${SECCOMP_PROFILE:-/usr/share/gocode/src/github.com/docker/docker/profiles/seccomp/default.json}
HEALTH_DEADLINE_S=60
passed=0
failed=0
WORK=$(mktemp -d)
HOST_LISTENER=""

cleanup() {
  local status=$? container
  trap - EXIT INT TERM
  if [[ -n $HOST_LISTENER ]]; then kill "$HOST_LISTENER" 2>/dev/null || true; fi
  for container in "$NAME" "$SANDBOXED" "$RESTRICTED"; do
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

# check DESCRIPTION COMMAND...: runs the command; its output is shown only when it fails, but
# for lines that start with "note: ".
check() {
  local what=$1; shift
  if "$@" >"$WORK/out" 2>&1; then
    passed=$((passed + 1)); echo "ok   - $what"; grep '^note: ' "$WORK/out" | sed 's/^/       /' || true
  else
    failed=$((failed + 1)); echo "FAIL - $what"; sed 's/^/       /' "$WORK/out"
  fi
}

# http METHOD PATH [JSON_BODY]: prints the response body; fails on a non-2xx status or after
# HTTP_TIMEOUT_MS (default 5000).
# shellcheck disable=SC2016 # the single-quoted scripts are JavaScript, expanded by no shell
http() {
  node -e '
    const [method, url, body] = process.argv.slice(1);
    const headers = { authorization: `Bearer ${process.env.API_KEY}` };
    const init = { method, headers, signal: AbortSignal.timeout(Number(process.env.HTTP_TIMEOUT_MS || 5000)) };
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
# bash_mode CONTAINER JS_PREDICATE: the start-up log lines on Bash's mode (one per workspace),
# each of which must satisfy the predicate; and no line may say Bash runs without a sandbox.
bash_mode() {
  local lines
  lines=$(podman logs "$1" 2>&1 | grep '"bashSandbox"') || { echo "no start-up line on Bash's mode"; return 1; }
  echo "$lines"
  ! podman logs "$1" 2>&1 | grep -i 'without a sandbox' || return 1
  while IFS= read -r line; do expect_json "$2" <<<"$line" || return 1; done <<<"$lines"
}
LANDLOCK='b.bashSandbox === "on" && b.mechanism === "landlock" && b.msg === "Bash runs commands in the Landlock sandbox"'
check_bash_mode_default() {
  # Under podman's defaults bubblewrap cannot mount a /proc of its own; auto falls back to Landlock.
  bash_mode "$NAME" "$LANDLOCK && /^TOOLPORT_BASH_SANDBOX=auto/.test(b.reason)"
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
# shellcheck source-path=SCRIPTDIR source=../test/deploy/container-attacks.sh
source "$ROOT/test/deploy/container-attacks.sh"

# The secrets an attacker is after: the server's key (TOOLPORT_API_KEYS), two keys of the keys
# file, each with a workspace of its own, an operator's secret in the container's environment,
# and a file in key B's workspace.
secret() { node -e 'console.log(require("node:crypto").randomBytes(24).toString("base64url"))'; }
API_KEY=$(secret); KEY_A=$(secret); KEY_B=$(secret); OPERATOR_SECRET=$(secret); MARKER_B=$(secret)
B_FILE=b-only-$RANDOM.txt
SECRETS=$(printf '%s\n' "$API_KEY" "$KEY_A" "$KEY_B" "$OPERATOR_SECRET" "$MARKER_B")
export API_KEY SECRETS
# keys_file FILE WORKSPACE_A WORKSPACE_B: writes a keys file giving key A and key B those workspaces.
keys_file() {
  printf '[{"label":"team-a","key":"%s","workspace":"%s"},{"label":"team-b","key":"%s","workspace":"%s"}]' \
    "$KEY_A" "$2" "$KEY_B" "$3" >"$1"
  chmod 644 "$1"
}
# workspaces DIR: the server's and the two keys' workspaces on the host, owned by the image's user,
# with key B's file.
workspaces() {
  mkdir -p "$1/server" "$1/team-a" "$1/team-b"
  printf '%s\n' "$MARKER_B" >"$1/team-b/$B_FILE"
  chmod 600 "$1/team-b/$B_FILE"
  chown -R 1000:1000 "$1"
}
keys_file "$WORK/keys-srv.json" /srv/team-a /srv/team-b
# The runs below: the keys, the operator's secret and the three workspaces; and the memory bound
# per call of deploy/kubernetes (1 GiB, not the default 4 GiB), which also spares the machine.
keyed_run=(-p 127.0.0.1::8080 -e TOOLPORT_BASH_MAX_MEMORY=1073741824 -e TOOLPORT_API_KEYS="$API_KEY" -e OPERATOR_SECRET="$OPERATOR_SECRET"
  -e TOOLPORT_API_KEYS_FILE=/run/secrets/toolport-keys.json -v "$WORK/keys-srv.json:/run/secrets/toolport-keys.json:ro")
mounts() { echo "-v $1/server:/workspace -v $1/team-a:/srv/team-a -v $1/team-b:/srv/team-b"; }

# What the attacks try to reach: the npm registry (which this machine reaches) and a port on the host.
OUTSIDE_HOST=registry.npmjs.org
OUTSIDE_IP=$(node -e 'require("node:dns").lookup(process.argv[1], { family: 4 }, (e, a) => { if (e) process.exit(1); console.log(a); })' "$OUTSIDE_HOST")
node -e 'const s = require("node:net").createServer((c) => c.on("error", () => {}).end("host\n")).listen(0, "0.0.0.0", () => console.log(s.address().port))' >"$WORK/host-port" &
HOST_LISTENER=$!
until [[ -s $WORK/host-port ]]; do sleep 0.1; done
HOST_PORT=$(<"$WORK/host-port")
echo "attack targets: $OUTSIDE_HOST ($OUTSIDE_IP) port 443; the host's port $HOST_PORT"

# start CONTAINER PODMAN_RUN_ARGS...: runs the image, sets BASE_URL, and waits until it answers.
start() {
  local container=$1 host_port
  shift
  podman run -d --name "$container" "$@" "$IMAGE" >/dev/null
  host_port=$(podman port "$container" 8080/tcp | head -n1)
  BASE_URL="http://${host_port/0.0.0.0/127.0.0.1}"
  echo "listening at $BASE_URL"
  wait_healthy "$container"
}

echo "== default: run $NAME (podman's defaults)"
workspaces "$WORK/default"
# The image listens on 0.0.0.0 and serves Bash, so it refuses to start without API keys.
# shellcheck disable=SC2046 # mounts prints words to split
if start "$NAME" "${keyed_run[@]}" $(mounts "$WORK/default"); then
  echo "ready after $(since "$checks_started")"
  if [[ -z ${BASE_IMAGE:-} ]]; then check "the image runs Node.js $NODE_LINE" check_node_line; fi
  check "GET /healthz answers {\"status\":\"ok\"}" check_healthz
  check "GET /tools is a JSON array that lists Echo" check_tools
  check "POST /tools/Echo {\"text\":\"hello\"} returns hello with isError false" check_echo
  check "Write, Read and Grep round-trip a file in /workspace" check_file_tools
  check "Bash runs as uid 1000 in /workspace" check_bash
  check "the start-up log says Bash runs in the Landlock sandbox (auto), in every workspace" check_bash_mode_default
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
  C=$NAME WS_A=/srv/team-a WS_B=/srv/team-b MECHANISM=landlock
  attack_setting default
  check "podman stop -t 10 ends the container gracefully with exit code 0" check_stop
fi

# check_confined CONTAINER: uid 1000 on a read-only root, without capabilities, with no_new_privs.
check_confined() {
  # shellcheck disable=SC2016 # expanded by the container's shell
  podman exec "$1" sh -c '[ "$(id -u)" = 1000 ] && ! touch /probe 2>/dev/null &&
    grep -q "^CapEff:\s*0*$" /proc/self/status && grep -q "^NoNewPrivs:\s*1$" /proc/self/status'
}

echo "== restricted: run $RESTRICTED (Docker's default seccomp profile, --cap-drop=all, no-new-privileges, --read-only, --user 1000:1000)"
if [[ ! -f $SECCOMP_PROFILE ]]; then
  failed=$((failed + 1)); echo "FAIL - no seccomp profile at $SECCOMP_PROFILE (bash scripts/install-system-deps.sh installs it)"
else
  workspaces "$WORK/restricted"
  # /tmp on a tmpfs, as a pod's emptyDir gives it (deploy/kubernetes: 1Gi).
  # shellcheck disable=SC2046 # mounts prints words to split
  if start "$RESTRICTED" --security-opt seccomp="$SECCOMP_PROFILE" --cap-drop=all --security-opt no-new-privileges \
    --read-only --tmpfs /tmp:rw,size=1g,mode=1777 --user 1000:1000 "${keyed_run[@]}" $(mounts "$WORK/restricted"); then
    check "[restricted] it runs as uid 1000 on a read-only root, without capabilities, with no_new_privs" check_confined "$RESTRICTED"
    check "[restricted] the start-up log says Bash runs in the Landlock sandbox, in every workspace" \
      bash_mode "$RESTRICTED" "$LANDLOCK"
    C=$RESTRICTED WS_A=/srv/team-a WS_B=/srv/team-b MECHANISM=landlock
    attack_setting restricted
  fi
fi

echo "== bubblewrap: run $SANDBOXED (--security-opt unmask=/proc/*, TOOLPORT_BASH_SANDBOX=bubblewrap)"
workspaces "$WORK/bubblewrap"
# shellcheck disable=SC2046 # mounts prints words to split
if start "$SANDBOXED" --security-opt 'unmask=/proc/*' -e TOOLPORT_BASH_SANDBOX=bubblewrap "${keyed_run[@]}" $(mounts "$WORK/bubblewrap"); then
  check "[bubblewrap] the start-up log says Bash runs in bubblewrap, in every workspace" \
    bash_mode "$SANDBOXED" 'b.bashSandbox === "on" && b.mechanism === "bubblewrap" && /bubblewrap/.test(b.reason)'
  C=$SANDBOXED WS_A=/srv/team-a WS_B=/srv/team-b MECHANISM=bubblewrap
  attack_setting bubblewrap
  podman rm -f -t 0 "$SANDBOXED" >/dev/null
fi

# The Kubernetes Deployment of deploy/kubernetes, played by podman with its ConfigMap, claim and
# security context (read-only root, uid 1000, no capabilities, no_new_privs); what podman cannot
# play as Kubernetes would is said in test/deploy/podman-play.ts. The keys' workspaces are
# directories side by side on the workspace claim, as deploy/kubernetes/README.md says, made
# before the play.
PLAY=toolport-play-$$
PLAYED=$PLAY-pod-0-toolport
echo "== kube: podman kube play deploy/kubernetes as $PLAY"
play_cleanup() {
  if [[ $1 -ne 0 || $failed -ne 0 ]]; then podman logs "$PLAYED" >&2 || true; fi
  podman pod rm -f "$PLAY-pod-0" >/dev/null 2>&1 || true
  podman volume rm -f "$PLAY-tmp" "$PLAY-toolport-workspace" >/dev/null 2>&1 || true
}
# cleanup takes the exit status from $?, and errexit holds in traps: hand the status on.
# shellcheck disable=SC2154 # play_status is assigned in the trap's own string
trap 'play_status=$?; play_cleanup "$play_status"; set +e; (exit "$play_status"); cleanup' EXIT
check_played_ready() { http GET /readyz | expect_json 'b.status === "ready"' && check_tools; }
mkdir -m 755 "$WORK/play-keys"
keys_file "$WORK/play-keys/keys.json" /workspace/team-a /workspace/team-b
podman volume create "$PLAY-toolport-workspace" >/dev/null
# shellcheck disable=SC2016 # expanded by the container's shell
podman run --rm --user 0:0 -v "$PLAY-toolport-workspace:/workspace" -e MARKER_B="$MARKER_B" "$IMAGE" sh -c \
  'mkdir -p /workspace/team-a /workspace/team-b && printf "%s\n" "$MARKER_B" > "/workspace/team-b/$1" &&
   chmod 600 "/workspace/team-b/$1" && chown -R 1000:1000 /workspace' sh "$B_FILE"
play_port=$(node -e 'const s = require("node:net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })')
node --import tsx "$ROOT/test/deploy/podman-play.ts" "$(podman image inspect "$IMAGE" --format '{{index .RepoTags 0}}')" \
  "$PLAY" "$play_port" "$WORK/play-keys" "OPERATOR_SECRET=$OPERATOR_SECRET" >"$WORK/play.yaml"
BASE_URL=http://127.0.0.1:$play_port
API_KEY=$KEY_A
check "podman kube play starts the Deployment" podman kube play "$WORK/play.yaml"
if podman container exists "$PLAYED" && wait_healthy "$PLAYED"; then
  check "[kube] the played Deployment answers /readyz, and a key from its keys file" check_played_ready
  check "[kube] it runs as uid 1000 on a read-only root, without capabilities, with no_new_privs" check_confined "$PLAYED"
  check "[kube] its start-up log says Bash runs in the Landlock sandbox (TOOLPORT_BASH_SANDBOX=true)" \
    bash_mode "$PLAYED" "$LANDLOCK && /^TOOLPORT_BASH_SANDBOX=true/.test(b.reason)"
  C=$PLAYED WS_A=/workspace/team-a WS_B=/workspace/team-b MECHANISM=landlock
  attack_setting kube
fi

echo "== checks took $(since "$checks_started"); total $(since "$started")"
echo "container: $passed passed, $failed failed"
((failed == 0))
