# Attacks on a running toolport container from a Bash call, and the good path, for
# scripts/test-container.sh, which sources this file and defines check, http, expect_json,
# bash_body and podman. Each attack runs as key A, an attacker with Bash and a workspace of its
# own, and asserts on the call's output; every command echoes a marker, so a check cannot pass
# because the command never ran. Each attack is also run outside the sandbox (`podman exec` as
# the same user), where it must find what Bash must not: a scan that finds nothing anywhere proves
# nothing.
#
# attack_setting sets, before the checks of one setting: C (the container), BASE_URL, WS_A / WS_B
# (key A's and key B's workspaces inside the container) and MECHANISM (landlock or bubblewrap). The script sets once:
# KEY_A, KEY_B, MARKER_B (the content of B_FILE in key B's workspace), SECRETS (every key and
# secret, one a line, exported), OUTSIDE_HOST / OUTSIDE_IP (the npm registry, port 443) and
# HOST_PORT (a port the host listens on).
# shellcheck shell=bash disable=SC2016 # single-quoted scripts are expanded by the container's shell or node

ATTACK_START=attack-started
ATTACK_END=attack-finished

# bash_as KEY COMMAND [TIMEOUT_MS]: the JSON result of a Bash call running COMMAND with KEY.
bash_as() {
  local body
  body=$(node -e 'process.stdout.write(JSON.stringify({ command: process.argv[1], timeout: Number(process.argv[2]) }))' "$2" "${3:-60000}")
  API_KEY=$1 HTTP_TIMEOUT_MS=$((${3:-60000} + 30000)) http POST /tools/Bash "$body"
}

# expect_attack JS_PREDICATE: reads a Bash result on stdin and prints its text. Fails when any of
# SECRETS appears anywhere in the result, when the command did not print ATTACK_START, or unless
# the predicate over `b` (the result) and `text` (its text) holds.
expect_attack() {
  node -e '
    let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => {
      let b; try { b = JSON.parse(s); } catch { console.error("not JSON: " + s); process.exit(1); }
      const text = (b.content ?? []).map((c) => c.text ?? "").join("\n");
      console.log(text.length > 6000 ? text.slice(0, 3000) + "\n[...]\n" + text.slice(-3000) : text);
      const leaked = process.env.SECRETS.split("\n").filter((secret) => secret && s.includes(secret));
      if (leaked.length > 0) { console.error(`LEAKED ${leaked.length} secret(s) into the result`); process.exit(1); }
      if (!text.includes(process.env.ATTACK_START)) { console.error("the command never printed its start marker"); process.exit(1); }
      if (!new Function("b", "text", "return (" + process.argv[1] + ");")(b, text)) { console.error("unexpected result (isError " + b.isError + ")"); process.exit(1); }
    });
  ' "$1"
}
export ATTACK_START

# A shell prelude: writes every secret, one a line, to $pats (decoded from base64, so no secret
# stands in any command line a scan could read), and prints the start marker.
secrets_prelude() {
  printf 'echo %s; pats=$(mktemp); printf %%s %s | base64 -d > "$pats"; ' "$ATTACK_START" "$(printf %s "$SECRETS" | base64 -w0)"
}

# Reads every process's environ and cmdline, and names each that holds a secret.
proc_scan_command() {
  printf '%s' "$(secrets_prelude)"'n=0
for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do
  if tr "\0" "\n" < "$f" > "$pats.out" 2>/dev/null; then
    n=$((n + 1)); if grep -q -F -f "$pats" "$pats.out"; then echo "LEAK in $f"; fi
  fi
done
echo "read $n files of $(ls -d /proc/[0-9]* | wc -l) processes"; echo '"$ATTACK_END"
}

# grep -r for every secret through the places a key or a secret lives.
grep_scan_command() {
  printf '%s' "$(secrets_prelude)"'grep -r -l -s -F -f "$pats" /run /etc /home /app /srv /workspace '"$WS_A $WS_B"' | sed "s/^/LEAK in /"
echo '"$ATTACK_END"
}

check_proc_scan() {
  bash_as "$KEY_A" "$(proc_scan_command)" | expect_attack "text.includes('$ATTACK_END') && !text.includes('LEAK') && /read [1-9][0-9]* files/.test(text)"
}
check_grep_scan() {
  bash_as "$KEY_A" "$(grep_scan_command)" | expect_attack "text.includes('$ATTACK_END') && !text.includes('LEAK')"
}
# The same scans as the container's user outside the sandbox find the server's environment, the
# keys file and key B's marker.
check_scans_find_outside() {
  local found
  found=$(podman exec "$C" bash -c "$(proc_scan_command)"; podman exec "$C" bash -c "$(grep_scan_command)")
  grep -v -F -f <(printf '%s\n' "$SECRETS") <<<"$found"
  grep -q '^LEAK in /proc/1/environ$' <<<"$found" &&
    grep -q "^LEAK in /run/secrets/" <<<"$found" &&
    grep -q "^LEAK in $WS_B/$B_FILE$" <<<"$found"
}

# connect_script: node, connecting to each HOST:PORT argument and printing what came of it.
connect_script() {
  printf '%s' 'const net = require("node:net");
for (const target of process.argv.slice(1)) {
  const [host, port] = target.split(" ");
  const s = net.connect({ host, port: Number(port) });
  let done = false;
  const end = (what) => { if (!done) console.log(`${what} node ${host}:${port}`); done = true; s.destroy(); };
  s.setTimeout(5000, () => end("no connection (timeout)"));
  s.on("connect", () => end("CONNECTED")).on("error", (e) => end(`no connection (${e.code})`));
}'
}
# The targets: the npm registry by name and by address, the host, and the server itself.
net_targets() {
  printf '%s\n' "$OUTSIDE_HOST 443" "$OUTSIDE_IP 443" "$HOST_IP $HOST_PORT" "127.0.0.1 8080"
}
# The container itself reaches the registry and the host: refusals below are the sandbox's.
check_container_connects() {
  local out
  HOST_IP=$(host_address) || return 1
  out=$(podman exec "$C" node -e "$(connect_script)" "$OUTSIDE_IP 443" "$HOST_IP $HOST_PORT")
  echo "$out"
  [[ $(grep -c '^CONNECTED' <<<"$out") == 2 ]]
}
check_no_connection() {
  local command targets
  HOST_IP=$(host_address) || return 1
  targets=$(net_targets | sed 's/.*/"&"/' | tr '\n' ' ')
  command="echo $ATTACK_START
for t in $targets; do set -- \$t
  if timeout 5 bash -c 'exec 3<>\"/dev/tcp/\$0/\$1\"' \"\$1\" \"\$2\" 2>/dev/null; then echo \"CONNECTED bash \$1:\$2\"; else echo \"no connection bash \$1:\$2\"; fi
done
node -e '$(connect_script)' $targets
echo $ATTACK_END"
  bash_as "$KEY_A" "$command" | expect_attack "text.includes('$ATTACK_END') && !text.includes('CONNECTED') && text.split('no connection').length - 1 === 8"
}
# host_address: the host as the container sees it, its default gateway (from /proc/net/route).
host_address() {
  podman exec "$C" node -e '
    const row = require("node:fs").readFileSync("/proc/net/route", "utf8").split("\n").map((l) => l.split("\t")).find((f) => f[1] === "00000000");
    if (!row) process.exit(1);
    console.log(Buffer.from(row[2], "hex").reverse().join("."));'
}

# outside_processes: "PID NAME" of every process in the container now, before the call that
# attacks them exists: tini, the server, its helpers, the resident reapers and the shells started
# ahead of calls, key B's among them.
outside_processes() {
  podman exec "$C" sh -c 'for p in /proc/[0-9]*; do [ "${p#/proc/}" = $$ ] && continue
    printf "%s %s\n" "${p#/proc/}" "$(tr "\0" " " < "$p/cmdline" 2>/dev/null | cut -c1-40 | tr -s " \n" "__")"; done'
}
check_no_signal_no_trace() {
  local processes pids
  processes=$(outside_processes) || return 1
  echo "$processes"
  pids=$(cut -d' ' -f1 <<<"$processes" | tr '\n' ' ')
  grep -q '^[0-9]* node_/app/dist/server.js' <<<"$processes" || { echo "no server process found"; return 1; }
  # Each target: a signal, its open files through /proc/PID/fd (the keys file, the server's
  # sockets), its maps, and ptrace(PTRACE_ATTACH). A process gone meanwhile answers ESRCH. The
  # shell started ahead that runs this very call is among them, and skipped ($$).
  bash_as "$KEY_A" "echo $ATTACK_START
targets=\$(for p in $pids; do [ \$p = \$\$ ] || echo \$p; done)
for p in \$targets; do
  kill -0 \$p 2>/dev/null && echo \"SIGNALLED \$p\"
  for fd in /proc/\$p/fd/*; do
    target=\$(readlink \"\$fd\" 2>/dev/null) && echo \"FD LINK \$fd -> \$target\"
    (: < \"\$fd\") 2>/dev/null && echo \"FD OPENED \$fd\"
  done
  cat /proc/\$p/maps > /dev/null 2>&1 && echo \"MAPS OF \$p\"
done
perl -e 'for my \$p (@ARGV) { my \$r = syscall(101, 16, \$p + 0, 0, 0); print \$r == -1 ? \"ptrace \$p refused: \$!\\n\" : \"TRACED \$p\\n\" }' \$targets
kill -0 \$\$ && echo 'its own shell answers kill -0'
echo $ATTACK_END" | expect_attack "text.includes('$ATTACK_END') && !/SIGNALLED|FD LINK|FD OPENED|MAPS OF|TRACED/.test(text) && text.includes('its own shell answers') && /ptrace 1 refused: Operation not permitted/.test(text)"
}

# In bubblewrap's PID namespace a call sees only its own processes (the PIDs the container knows
# mean nothing there), so no process outside it can be named, signalled or traced.
check_sees_only_its_call() {
  bash_as "$KEY_A" "echo $ATTACK_START
for p in /proc/[0-9]*; do echo \"SEEN \${p#/proc/} \$(tr '\\0' ' ' < \$p/cmdline 2>/dev/null | cut -c1-60)\"; done
echo $ATTACK_END" | expect_attack "text.includes('$ATTACK_END') && /SEEN 1 /.test(text) && !/dist\\/server\\.js|toolport-reaper|tini|flock\\.pl/.test(text.replace(/^SEEN 1 .*$/m, ''))"
}

# Key B runs a command with a secret in its text, as an agent's `export TOKEN=...; curl ...`
# would, and a second secret only in a child's arguments (`curl -u user:$TOKEN`); key A, meanwhile,
# reads every command line. The first must stay hidden. The second is reported, not asserted:
# Landlock hides no process's existence or command line (docs/security.md, Landlock and seccomp).
check_other_call_hidden() {
  local text_token argv_token call deadline status=0
  text_token=$(secret); argv_token=$(secret)
  bash_as "$KEY_B" ": $text_token; perl -e 'sleep 15' \"user:\$(printf %s $(printf %s "$argv_token" | base64 -w0) | base64 -d)\"; echo done" 60000 >"$WORK/b-call.json" &
  call=$!
  # The bracket keeps grep from finding its own command line.
  deadline=$((SECONDS + 10))
  until podman exec "$C" sh -c 'grep -q -s -a -E "$1" /proc/[0-9]*/cmdline' sh "user:[${argv_token:0:1}]${argv_token:1}"; do
    ((SECONDS < deadline)) || { echo "key B's command never ran"; kill "$call"; return 1; }
    sleep 0.2
  done
  bash_as "$KEY_A" "$(SECRETS=$text_token proc_scan_command)" |
    SECRETS=$(printf '%s\n%s' "$SECRETS" "$text_token") expect_attack "text.includes('$ATTACK_END') && !text.includes('LEAK')" || status=1
  if bash_as "$KEY_A" "$(SECRETS=$argv_token proc_scan_command)" | grep -q 'LEAK in'; then
    echo "note: key A read a secret in the arguments of a process of key B's call"
  fi
  wait "$call"
  return "$status"
}

check_other_workspace_hidden() {
  bash_as "$KEY_A" "echo $ATTACK_START
cat $WS_B/$B_FILE 2>&1 | head -n 2
ls -A $WS_B 2>/dev/null | sed 's/^/LISTED /'
find / \\( -path /proc -o -path /sys \\) -prune -o -name '$B_FILE' -print 2>/dev/null | sed 's/^/FOUND /'
echo $ATTACK_END" 120000 | expect_attack "text.includes('$ATTACK_END') && !/LISTED|FOUND/.test(text)" &&
    API_KEY=$KEY_A http POST /tools/Read "{\"file_path\":\"$WS_B/$B_FILE\"}" | expect_json 'b.isError === true'
}

# processes_matching ERE: how many processes in the container have a command line that matches.
processes_matching() {
  podman exec "$C" sh -c 'grep -l -s -a -E "$1" /proc/[0-9]*/cmdline | wc -l' sh "$1"
}
# echo_promptly: an Echo call answers within 2 s.
echo_promptly() {
  HTTP_TIMEOUT_MS=2000 API_KEY=$KEY_B http POST /tools/Echo '{"text":"still here"}' | expect_json 'b.content[0].text === "still here"'
}
check_process_bound() {
  local mark=60.$RANDOM max=0 n call deadline
  local pattern="^sleep.${mark/./\\.}"
  bash_as "$KEY_A" "echo $ATTACK_START; for i in \$(seq 3000); do sleep $mark & done; echo 'all 3000 started'; wait; echo $ATTACK_END" 90000 >"$WORK/fork.json" &
  call=$!
  while kill -0 "$call" 2>/dev/null; do
    n=$(processes_matching "$pattern") || n=0
    ((n > max)) && max=$n
    sleep 0.3
  done
  wait "$call" || { echo "the call failed"; cat "$WORK/fork.json"; return 1; }
  echo "note: at most $max of the 3,000 sleeps existed at once"
  expect_attack "!text.includes('$ATTACK_END') && /TOOLPORT_BASH_MAX_PROCESSES/.test(text)" <"$WORK/fork.json" >"$WORK/fork.txt" ||
    { cat "$WORK/fork.txt"; return 1; }
  grep -F 'TOOLPORT_BASH_' "$WORK/fork.txt" | sed 's/^/note: /'
  ((max < 3000)) || return 1
  deadline=$((SECONDS + 15))
  until [[ $(processes_matching "$pattern") == 0 ]]; do
    ((SECONDS < deadline)) || { echo "sleeps left behind after the call"; return 1; }
    sleep 0.3
  done
  echo_promptly
}

# fill_command DIR: writes 50 MB files into DIR until 1,100 MB are written or a write fails.
fill_command() {
  echo "echo $ATTACK_START; for i in \$(seq 22); do head -c 50M /dev/zero > \"$1/fill\$i\" || break; echo \"wrote \$((i * 50)) MB\"; done; echo $ATTACK_END"
}
# Under Landlock /tmp itself is not writable; bubblewrap gives each call a /tmp of its own,
# bounded by TOOLPORT_BASH_TMP_SIZE.
check_tmp_not_writable() {
  local predicate="!text.includes('wrote')"
  [[ $MECHANISM == bubblewrap ]] && predicate="!text.includes('wrote 1100 MB') && /TOOLPORT_BASH_TMP_SIZE/.test(text)"
  bash_as "$KEY_A" "$(fill_command /tmp)" | expect_attack "text.includes('$ATTACK_END') && $predicate" && echo_promptly
}
check_tmpdir_bound() {
  local deadline
  bash_as "$KEY_A" "$(fill_command '${TMPDIR:-/tmp}')" 120000 |
    expect_attack "!text.includes('wrote 1100 MB') && (/TOOLPORT_BASH_TMP_SIZE/.test(text) || (b.isError && !/timed out/.test(text)))" >"$WORK/fill.txt" ||
    { cat "$WORK/fill.txt"; return 1; }
  grep -E 'TOOLPORT_BASH_|wrote' "$WORK/fill.txt" | tail -n 2 | sed 's/^/note: /'
  echo_promptly || return 1
  # The call's files go with it.
  deadline=$((SECONDS + 10))
  until (($(podman exec "$C" du -sm /tmp | cut -f1) < 100)); do
    ((SECONDS < deadline)) || { podman exec "$C" du -sm /tmp; echo "the call's files stayed in /tmp"; return 1; }
    sleep 0.3
  done
}

# 3 GiB in one process, 64 MiB every 50 ms, past the bound (TOOLPORT_BASH_MAX_MEMORY, 1 GiB, as
# deploy/kubernetes sets it below the container's limit of 1536Mi, which the kube play applies: a
# faster allocation could meet that limit between two counts of the reaper).
check_memory_bound() {
  bash_as "$KEY_A" "echo $ATTACK_START; perl -e 'for (1 .. 48) { push @held, q(a) x (64 << 20); select(undef, undef, undef, 0.05) } print qq(allocated\\n); sleep 5'; echo $ATTACK_END" |
    expect_attack "!text.includes('$ATTACK_END') && /TOOLPORT_BASH_MAX_MEMORY/.test(text)" >"$WORK/memory.txt" || { cat "$WORK/memory.txt"; return 1; }
  grep -F 'TOOLPORT_BASH_' "$WORK/memory.txt" | sed 's/^/note: /'
  echo_promptly
}

check_good_path() {
  bash_as "$KEY_A" "echo $ATTACK_START; set -e; rm -rf good; mkdir good; cd good
git init -q . && echo hello > README && git add README && git -c user.name=A -c user.email=a@example.com commit -q -m first
echo \"commits: \$(git rev-list --count HEAD)\"
printf '%s' '{\"name\":\"good\",\"version\":\"1.0.0\",\"private\":true,\"scripts\":{\"test\":\"node --test\"}}' > package.json
printf '%s\n' 'const test = require(\"node:test\");' 'const assert = require(\"node:assert\");' 'test(\"adds\", () => assert.equal(1 + 1, 2));' > add.test.js
npm test 2>&1 | grep -E '(pass|fail) [0-9]+\$'
node -e 'console.log(\"node says\", 6 * 7)'
echo $ATTACK_END" 120000 |
    expect_attack "b.isError === false && text.includes('$ATTACK_END') && text.includes('commits: 1') && /pass 1\n/.test(text) && /fail 0\n/.test(text) && text.includes('node says 42')"
}

# attack_setting LABEL: every attack and the good path against the container C.
attack_setting() {
  local label=$1
  check "[$label] outside the sandbox, the scans find the server's environment, the keys file and key B's file" check_scans_find_outside
  check "[$label] Bash of key A reads no key or secret in any process's environ or cmdline" check_proc_scan
  check "[$label] grep -r through /run, /etc, /home, /app and the workspaces finds no key or secret" check_grep_scan
  check "[$label] the container itself connects to $OUTSIDE_HOST:443 and to the host" check_container_connects
  check "[$label] Bash connects nowhere: the registry, the host, the server (/dev/tcp and node)" check_no_connection
  if [[ $MECHANISM == bubblewrap ]]; then
    check "[$label] Bash sees no process outside its call (its own PID namespace)" check_sees_only_its_call
  else
    check "[$label] Bash can neither signal nor trace a process outside its call (the server, the reapers, key B's next shell), nor open their files" check_no_signal_no_trace
  fi
  check "[$label] key A reads nothing of key B's running command line" check_other_call_hidden
  check "[$label] key B's workspace is hidden from key A, by path, by find / and through Read" check_other_workspace_hidden
  check "[$label] 3,000 background processes: fewer exist at once, the call is stopped with a note, Echo answers" check_process_bound
  check "[$label] /tmp itself is not writable from Bash (bubblewrap: its own /tmp, bounded)" check_tmp_not_writable
  check "[$label] 1.1 GB into \$TMPDIR is stopped at its bound with a note, and the files go" check_tmpdir_bound
  check "[$label] 3 GiB in one process is stopped at TOOLPORT_BASH_MAX_MEMORY with a note, and Echo answers" check_memory_bound
  check "[$label] the good path in key A's workspace: git init/add/commit, npm test, node -e" check_good_path
}
