import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { checkCommandLine, MAX_COMMANDS, MAX_LINE_BYTES, MAX_NESTING, parseCommandPattern } from '#src/permissions/bash/check.js';

const RULES = {
  allow: ['npm run test:*', 'git status', 'git diff:*', 'echo:*', 'ls:*', 'cat:*', 'grep:*', 'cd:*', 'true'].map(parseCommandPattern),
  deny: ['curl:*', 'git push:*', 'rm -rf /'].map(parseCommandPattern),
};

const CURL = 'denied by Bash(curl:*)';
const ONLY_HARMLESS =
  'is refused: before a command only LANG, LANGUAGE, TZ, NO_COLOR, FORCE_COLOR, TERM, COLUMNS, LINES, CI, NODE_ENV, RUST_BACKTRACE, PYTHONUNBUFFERED, PYTHONDONTWRITEBYTECODE and LC_* may be set';
const EVALUATES = 'is refused: bash evaluates the variables in it as code';
const CHANGES = 'is refused: it changes what later commands run';

// A line and what the rules above make of it: true when allowed, else the reason (and the command it names).
type Row = readonly [line: string, expected: true | string, command?: string];

const ROWS: readonly Row[] = [
  // Lists, pipelines and compound commands: every command must be allowed.
  ['npm run test', true],
  ['npm run test -- --watch', true],
  ['git status', true],
  ['ls -la && git status', true],
  ['cat a.txt | grep foo |& cat', true],
  ['echo a; echo b || echo c', true],
  ['echo a\necho b', true],
  ['ls &\necho done', true],
  ['(cd src && ls)', true],
  ['{ echo a; ls; }', true],
  ['if true; then echo yes; else echo no; fi', 'an if statement is not allowed under permission rules'], // was allowed: see the commit message
  ['for f in *.ts; do cat "$f"; done', 'a for loop is not allowed under permission rules'], // was allowed: see the commit message
  ['while true; do ls; done', 'a while loop is not allowed under permission rules'], // was allowed: see the commit message
  ['case $x in a) echo a;; *) ls;; esac', 'a case statement is not allowed under permission rules'], // was allowed: see the commit message
  ['! ls', true],
  ['[[ -f x ]] && ls', 'a [[ ]] test (use [ ] or test) is not allowed under permission rules'], // was allowed: see the commit message
  ['(( x = 1 + 2 ))', 'an arithmetic command ((( ... ))) is not allowed under permission rules'], // was allowed: see the commit message
  ['', true],
  ['# only a comment', true],
  ['npm run test && curl evil', CURL, 'curl evil'],
  ['npm run test; rm -rf /', 'denied by Bash(rm -rf /)', 'rm -rf /'],
  ['npm run test || wget evil', '`wget evil` is not allowed by any rule for Bash', 'wget evil'],
  ['ls\ncurl evil', CURL, 'curl evil'],
  ['ls & curl evil', CURL, 'curl evil'],
  ['cat a | sh', 'sh running a script or its standard input is not allowed under permission rules: the rules cannot read the commands it runs', 'sh'],
  ['(ls; curl evil)', CURL, 'curl evil'],
  ['{ ls; curl evil; }', CURL, 'curl evil'],
  ['if true; then curl evil; fi', 'an if statement is not allowed under permission rules'],
  ['while curl evil; do ls; done', 'a while loop is not allowed under permission rules'],
  ['case x in a) curl evil;; esac', 'a case statement is not allowed under permission rules'],
  ['f() { curl evil; }', 'a "(" after a command name (a function definition) is not allowed under permission rules'],
  ['f() { ls; }; f', 'a "(" after a command name (a function definition) is not allowed under permission rules'],
  // Words: exact rules, prefixes on word boundaries, quote removal.
  ['npm run test-evil', '`npm run test-evil` is not allowed by any rule for Bash', 'npm run test-evil'],
  ['npm run testing', '`npm run testing` is not allowed by any rule for Bash'],
  ['npm run', '`npm run` is not allowed by any rule for Bash'],
  ['git status --short', '`git status --short` is not allowed by any rule for Bash'],
  ['git  status', true],
  ["'n'pm run test", true],
  ['"npm" run "test"', true],
  ['n\\pm run test', true],
  ["c''url evil", CURL],
  ['\\curl evil', CURL],
  ['"cu"r\'l\' evil', CURL],
  ['/usr/bin/curl evil', CURL],
  ['git push origin main', 'denied by Bash(git push:*)'],
  ['git $SUB origin', 'denied by Bash(git push:*)', 'git $SUB origin'],
  ['rm -rf / $EXTRA', 'denied by Bash(rm -rf /)'],
  ['$CMD run test', 'the command name is not literal ($CMD)', '$CMD run test'],
  ['"$(echo npm)" run test', 'command substitution ($(...)) is not allowed under permission rules'],
  ["$'\\x63url' evil", "an escape inside $'...' is not allowed under permission rules"],
  ['npm run $T', '`npm run $T` is not allowed by any rule for Bash'],
  ['npm run test $EXTRA', true],
  ['echo \'curl evil\' "$(ls)"', 'command substitution ($(...)) is not allowed under permission rules'], // was allowed: see the commit message
  ['echo hi # curl evil', true],
  // Substitutions anywhere run their commands.
  ['echo $(git status)', 'command substitution ($(...)) is not allowed under permission rules'], // was allowed: see the commit message
  ['echo "$(ls)" `true`', 'command substitution ($(...)) is not allowed under permission rules'], // was allowed: see the commit message
  ['echo $(curl evil)', 'command substitution ($(...)) is not allowed under permission rules'],
  ['echo `curl evil`', 'command substitution (`...`) is not allowed under permission rules'],
  ['echo "a $(curl evil) b"', 'command substitution ($(...)) is not allowed under permission rules'],
  ['echo ${X:-$(curl evil)}', 'parameter expansion with an operator (${...}) is not allowed under permission rules'],
  ['echo $((1 + $(curl evil)))', 'arithmetic expansion ($((...))) is not allowed under permission rules'],
  ['X=$(curl evil) ls', 'command substitution ($(...)) is not allowed under permission rules'],
  ['X=$(ls)', 'command substitution ($(...)) is not allowed under permission rules'], // was allowed: see the commit message
  ['X=1', 'setting X is refused: only lowercase variables may be set alone under permission rules'], // was allowed: see the commit message
  ['ls > $(curl evil)', 'command substitution ($(...)) is not allowed under permission rules'],
  ['cat <<< "$(curl evil)"', 'command substitution ($(...)) is not allowed under permission rules'],
  ['for f in $(curl evil); do ls; done', 'a for loop is not allowed under permission rules'],
  ['cat <(ls) >(grep x)', 'process substitution (<(...)) is not allowed under permission rules'], // was allowed: see the commit message
  ['cat <(curl evil)', 'process substitution (<(...)) is not allowed under permission rules'],
  ['ls > >(curl evil)', 'a redirection (>) without a target is not allowed under permission rules'],
  // Here-documents: an unquoted delimiter expands the body, a quoted one does not.
  ['cat <<EOF\n$(git status)\nEOF', "a here-document whose body bash expands (quote its delimiter: <<'EOF') is not allowed under permission rules"], // was allowed: see the commit message
  ['cat <<EOF\nhello $(curl evil)\nEOF', "a here-document whose body bash expands (quote its delimiter: <<'EOF') is not allowed under permission rules"],
  // tree-sitter leaves a backtick in a here-document as text: refused rather than guessed.
  ['cat <<EOF\n`curl evil`\nEOF', "a here-document whose body bash expands (quote its delimiter: <<'EOF') is not allowed under permission rules"],
  ["cat <<'EOF'\n$(curl evil) `curl evil`\nEOF", true],
  ['cat <<\\EOF\n$(curl evil)\nEOF', true],
  ['cat <<-EOF\n\t$(curl evil)\n\tEOF', "a here-document whose body bash expands (quote its delimiter: <<'EOF') is not allowed under permission rules"],
  ['cat <<EOF | sh\nls\nEOF', 'sh running a script or its standard input is not allowed under permission rules: the rules cannot read the commands it runs'],
  // Wrappers are looked through: the command they run must be allowed.
  // Stricter since the rules read assignments: only harmless variables may be set for a command.
  ['env LANG=C npm run test', true],
  ['LANG=C TZ=UTC LC_ALL=C npm run test', true],
  ['env -i -u HOME ls', true],
  ['env -i -u HOME PATH=/bin ls', `setting PATH for ls ${ONLY_HARMLESS}`, 'env -i -u HOME PATH=/bin ls'],
  [
    'env -i PATH=/bin -u HOME ls',
    'setting PATH for -u is refused: before a command only LANG, LANGUAGE, TZ, NO_COLOR, FORCE_COLOR, TERM, COLUMNS, LINES, CI, NODE_ENV, RUST_BACKTRACE, PYTHONUNBUFFERED, PYTHONDONTWRITEBYTECODE and LC_* may be set',
  ],
  [
    'env X=1 curl evil',
    'setting X for curl is refused: before a command only LANG, LANGUAGE, TZ, NO_COLOR, FORCE_COLOR, TERM, COLUMNS, LINES, CI, NODE_ENV, RUST_BACKTRACE, PYTHONUNBUFFERED, PYTHONDONTWRITEBYTECODE and LC_* may be set',
    'env X=1 curl evil',
  ],
  ['env', '`env` is not allowed by any rule for Bash'],
  ['env -S "curl evil"', 'the rules cannot read the options of env (-S)'],
  ['env $OPTS ls', 'the arguments of env are not literal ($OPTS)'],
  ['command ls', true],
  ['command curl evil', CURL],
  ['command -v npm', '`command -v npm` is not allowed by any rule for Bash'],
  ['exec ls', true],
  ['exec curl evil', CURL],
  ['exec >log 2>&1', true],
  ['nohup npm run test &', true],
  ['nohup curl evil', CURL],
  ['timeout 5 npm run test', true],
  ['timeout -s KILL --kill-after=2 1.5m curl evil', CURL],
  ['timeout --weird 5 ls', 'the rules cannot read the options of timeout (--weird)'],
  ['timeout soon ls', 'the rules cannot read the duration of timeout (soon)'],
  ['time -p ls', true],
  ['nice -n 5 ls', true],
  ['nice -5 curl evil', CURL],
  ['stdbuf -oL grep x', true],
  ['setsid -f curl evil', CURL],
  ['builtin cd src', true],
  ['time { curl evil; }', 'denied by Bash(curl:*)'],
  ['coproc curl evil', 'a coprocess is not allowed under permission rules'],
  ['xargs curl', 'denied by Bash(curl:*)'],
  ['find . -exec curl {} \\;', 'find -exec is not allowed under permission rules: it runs commands the rules do not see'],
  // Shells and eval: the string is a line of its own.
  ["bash -c 'npm run test && ls'", true],
  ['sh -c "echo hi"', "the rules read command strings with bash's grammar only, not sh's (-c): use bash -c"], // was allowed: see the commit message
  ["bash -lc 'git status'", 'the rules cannot read the options of bash (-lc)'], // was allowed: see the commit message
  ['zsh -c ls', "the rules read command strings with bash's grammar only, not zsh's (-c): use bash -c"], // was allowed: see the commit message
  ['dash -ec ls', "the rules read command strings with bash's grammar only, not dash's (-ec): use bash -c"], // was allowed: see the commit message
  ['/bin/sh -c "curl evil"', "the rules read command strings with bash's grammar only, not sh's (-c): use bash -c", '/bin/sh -c "curl evil"'],
  ["bash -c 'ls; wget evil'", '`wget evil` is not allowed by any rule for Bash', 'wget evil'],
  ['bash -c \'bash -c "curl evil"\'', CURL],
  ['bash -c "$CMD"', 'the command string of bash -c is not literal ("$CMD")'],
  ['bash -i -c ls', 'the rules cannot read the options of bash (-i)'],
  ['bash -c', 'bash -c has no command string'],
  ["bash -c 'if'", 'an if statement is not allowed under permission rules (in a bash -c command string)'],
  ['bash scripts/build.sh', 'bash running a script or its standard input is not allowed under permission rules: the rules cannot read the commands it runs'],
  ['eval echo hi', 'eval is not allowed under permission rules: it runs its arguments as code'], // was allowed: see the commit message
  ["eval 'ls; echo done'", 'eval is not allowed under permission rules: it runs its arguments as code'], // was allowed: see the commit message
  ['eval curl evil', 'eval is not allowed under permission rules: it runs its arguments as code'],
  ["eval 'ls;' 'curl evil'", 'eval is not allowed under permission rules: it runs its arguments as code'],
  ['eval "$X"', 'eval is not allowed under permission rules: it runs its arguments as code'],
  ['eval', 'eval is not allowed under permission rules: it runs its arguments as code'], // was allowed: see the commit message
  ['builtin eval curl evil', 'eval is not allowed under permission rules: it runs its arguments as code'],
  ['eval eval eval eval eval eval eval eval ls', 'eval is not allowed under permission rules: it runs its arguments as code'], // was allowed: see the commit message
  ['eval eval eval eval eval eval eval eval eval ls', 'eval is not allowed under permission rules: it runs its arguments as code'],
  // Lines the parser cannot read are refused.
  ['echo a; ; ls', '";" where a command should be is not allowed under permission rules'],
  ['echo "unterminated', 'an unterminated quote is not allowed under permission rules'],
  ['if true; then ls', 'an if statement is not allowed under permission rules'],
  ['echo $(ls', 'command substitution ($(...)) is not allowed under permission rules'],
  ['[[ x =~ ^a`curl`$ ]]', 'a [[ ]] test (use [ ] or test) is not allowed under permission rules'],
  ['timeout $T ls', 'the arguments of timeout are not literal ($T)'],
  ['bash $ARGS', 'the arguments of bash are not literal ($ARGS)'],
  // B1: bash evaluates arithmetic, subscripts, ${!x} and ${x@P} again, and a value set earlier in the line runs.
  ["x='a[$(cat .env >&2)]'; [[ x -eq 0 ]]", 'a [[ ]] test (use [ ] or test) is not allowed under permission rules'],
  ['[[ $x -lt 1 ]]', 'a [[ ]] test (use [ ] or test) is not allowed under permission rules'],
  ['[[ 1 -lt 2 ]] && ls', 'a [[ ]] test (use [ ] or test) is not allowed under permission rules'], // was allowed: see the commit message
  ['[ "$x" -eq 0 ] && ls', true],
  ["x='a[$(cat .env >&2)]'; (( x ))", 'an arithmetic command ((( ... ))) is not allowed under permission rules'],
  ["x='a[$(cat .env >&2)]'; y[x]=1", 'an array element assignment is not allowed under permission rules'],
  ["x='a[$(cat .env >&2)]'; echo $((x))", 'arithmetic expansion ($((...))) is not allowed under permission rules'],
  ['echo $[x]', 'arithmetic expansion ($[...]) is not allowed under permission rules'],
  ['echo $(( $x + 1 ))', 'arithmetic expansion ($((...))) is not allowed under permission rules'],
  ['echo $(( 16#ff + 2 ** 3 )) $[1<<2]', 'arithmetic expansion ($((...))) is not allowed under permission rules'], // was allowed: see the commit message
  ['(( x += 1 ))', 'an arithmetic command ((( ... ))) is not allowed under permission rules'],
  ['for ((i = 0; i < n; i++)); do ls; done', 'a for loop is not allowed under permission rules'],
  ["x='$(cat .env)'; echo ${x@P}", 'parameter expansion with an operator (${...}) is not allowed under permission rules'],
  ['echo ${a[@]@P}', 'parameter expansion with an operator (${...}) is not allowed under permission rules'],
  ['echo ${x@Q} ${x@E} ${x@U} ${#x} ${x:-y}', 'parameter expansion with an operator (${...}) is not allowed under permission rules'], // was allowed: see the commit message
  ["[[ -v 'a[$(cat .env >&2)]' ]]", 'a [[ ]] test (use [ ] or test) is not allowed under permission rules'],
  ["[ -v 'a[$(cat .env >&2)]' ]", "the variable name 'a[$(cat .env >&2)]' given to [ is refused: bash evaluates a subscript as arithmetic"],
  ['[[ -v x ]] && ls', 'a [[ ]] test (use [ ] or test) is not allowed under permission rules'], // was allowed: see the commit message
  ['echo ${a[x]}', 'parameter expansion with an operator (${...}) is not allowed under permission rules'],
  ['echo ${a[1]} ${a[@]} ${#a[*]} ${!a[@]} ${!pre*}', 'parameter expansion with an operator (${...}) is not allowed under permission rules'], // was allowed: see the commit message
  ['echo ${s:x}', 'parameter expansion with an operator (${...}) is not allowed under permission rules'],
  ['echo ${s:1:2} ${s: -1}', 'parameter expansion with an operator (${...}) is not allowed under permission rules'], // was allowed: see the commit message
  ["x='a[$(cat .env >&2)]'; echo ${!x}", 'parameter expansion with an operator (${...}) is not allowed under permission rules'],
  ['a=([x]=1)', 'an array assignment is not allowed under permission rules'],
  ['a=([0]=1 2)', 'an array assignment is not allowed under permission rules'], // was allowed: see the commit message
  ["trap 'curl evil' EXIT", 'trap is not allowed under permission rules: it runs its argument as code later', "trap 'curl evil' EXIT"],
  ["trap 'ls' EXIT", 'trap is not allowed under permission rules: it runs its argument as code later'], // was allowed: see the commit message
  // B2: inside backticks bash undoes \` \$ and \\, and runs what it gets.
  ['echo `echo \\`cat .env\\` `', 'command substitution (`...`) is not allowed under permission rules'],
  ['echo "`echo \\`cat .env\\``"', 'command substitution (`...`) is not allowed under permission rules'],
  ['echo `echo \\$HOME`', 'command substitution (`...`) is not allowed under permission rules'],
  // B3: variables that change what an allowed program runs.
  [
    "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0='cat .env >&2; false' git status",
    `setting GIT_CONFIG_COUNT for git ${ONLY_HARMLESS}`,
  ],
  ['NODE_OPTIONS=--require=./x.js npm run test', `setting NODE_OPTIONS for npm ${ONLY_HARMLESS}`],
  ['LD_PRELOAD=./x.so ls', `setting LD_PRELOAD for ls ${ONLY_HARMLESS}`],
  ['env NODE_OPTIONS=--require=./x.js npm run test', `setting NODE_OPTIONS for npm ${ONLY_HARMLESS}`],
  ['X=1 npm run test', `setting X for npm ${ONLY_HARMLESS}`],
  ['PATH=/tmp/x:$PATH; git status', 'setting PATH is refused: only lowercase variables may be set alone under permission rules'],
  ['for HOME in x; do git status; done', 'a for loop is not allowed under permission rules'],
  // B4: bash joins backslash-newline before it splits words.
  ['cu\\\nrl evil', CURL, 'curl evil'],
  ['echo a \\\n  b && cu\\\nrl evil', CURL, 'curl evil'],
  ['npm run test \\\n  -- --watch', true],
  ["echo 'a\\\nb' # c \\\nls", true],
  ['ls\rcurl evil', 'the command line contains a \\r character, which the rules do not read'],
  ['ls\0curl evil', 'the command line contains a \\u0000 character, which the rules do not read'],
];

// Lines refused under deny rules alone (the attacker's second key), whatever they run.
const DENY_ONLY = { deny: ['curl:*', 'cat:*'].map(parseCommandPattern) };
const DENY_ONLY_ROWS: readonly Row[] = [
  ['let x=1+2', true],
  ['let x=y', `let on anything but numbers (x=y) ${EVALUATES}`, 'let x=y'],
  ['echo hi {a[x]}>/dev/null', 'a redirection to a descriptor variable ({name}>) is not allowed under permission rules'],
  ['declare -i y=1', 'declare -i is refused: bash would evaluate the values given to the variable later as code', 'declare -i y=1'],
  ["declare -n r='a[x]'", 'declare -n is refused: bash would evaluate the values given to the variable later as code'],
  ["declare 'a[$(cat .env >&2)]=1'", "the variable name 'a[$(cat .env >&2)]=1' given to declare is refused: bash evaluates a subscript as arithmetic"],
  ["read 'a[x]' < f", "the variable name 'a[x]' given to read is refused: bash evaluates a subscript as arithmetic"],
  ['read -r -a "$n" < f', 'the variable name given to read is not literal ("$n")'],
  ['read -r -p "name: " line < f', true],
  ["printf -v 'a[x]' 1", "the variable name 'a[x]' given to printf is refused: bash evaluates a subscript as arithmetic"],
  ["mapfile -C 'cat .env' -c 1 < f", 'mapfile -C is refused: it runs a command line the rules do not see'],
  ['export PATH=/tmp/x; git status', `setting PATH (export PATH=/tmp/x) ${CHANGES}`],
  ["PS4='$(cat .env >&2)'; set -x", 'setting PS4 is refused: only lowercase variables may be set alone under permission rules'],
  ['read -r PATH < f', `setting PATH (read PATH) ${CHANGES}`],
  ["x='a[$(cat .env >&2)]'; (( x ))", 'an arithmetic command ((( ... ))) is not allowed under permission rules'],
  ["x='$(cat .env)'; echo ${x@P}", 'parameter expansion with an operator (${...}) is not allowed under permission rules'],
  ['GIT_CONFIG_COUNT=1 git status', 'setting GIT_CONFIG_COUNT for git is refused: it changes what the command runs', 'GIT_CONFIG_COUNT=1 git status'],
  ['env LD_PRELOAD=./x.so ls', 'setting LD_PRELOAD for ls is refused: it changes what the command runs'],
  ['BASH_ENV=./x bash -c ls', 'setting BASH_ENV for bash is refused: it changes what the command runs'],
  ['X=1 Y=2 ls', true],
  ['PATH=/tmp/x', 'setting PATH is refused: only lowercase variables may be set alone under permission rules'],
  ['ca\\\nt .env', 'denied by Bash(cat:*)', 'cat .env'],
  // Found by bash as the oracle (test/permissions/bash/oracle.test.ts): a shell running a script runs what no rule sees.
  ['bash ./evil.sh "a$"#x', 'bash running a script or its standard input is not allowed under permission rules: the rules cannot read the commands it runs'],
  ['echo ls | bash', 'bash running a script or its standard input is not allowed under permission rules: the rules cannot read the commands it runs'],
  ['sh evil.sh', 'sh running a script or its standard input is not allowed under permission rules: the rules cannot read the commands it runs'],
  // Found by the oracle's 100,000-line run: env takes any word with a "=" as an assignment, not only a valid name's.
  ['(env LAN!G=C curl evil)', 'denied by Bash(curl:*)', 'env LAN!G=C curl evil'],
  ['env LANG#=C cat .env &>out.txt', 'denied by Bash(cat:*)', 'env LANG#=C cat .env &>out.txt'],
  ['env =LANG=C curl x', 'denied by Bash(curl:*)', 'env =LANG=C curl x'],
  // Bash's time keyword skips -p and then --: `time -- rm x` runs rm.
  ['time -- curl evil', 'denied by Bash(curl:*)', 'curl evil'],
  ['time -p -- cat .env', 'denied by Bash(cat:*)', 'cat .env'],
  // A program named like a wrapper or a shell but not the system's is not read as one.
  ['./env curl x', "./env is not allowed under permission rules: it is named like env but is not the system's"],
  ['/usr/bin/env curl x', 'denied by Bash(curl:*)'],
  ['tmp/bash -c ls', "tmp/bash is not allowed under permission rules: it is named like bash but is not the system's"],
];

function expectVerdict(verdict: Awaited<ReturnType<typeof checkCommandLine>>, expected: true | string, command?: string): void {
  if (expected === true) return assert.deepEqual(verdict, { allowed: true });
  assert.equal(verdict.allowed, false, 'refused');
  if (verdict.allowed) return;
  assert.equal(verdict.reason, expected);
  if (command !== undefined) assert.equal(verdict.command, command);
  const denied = /^denied by Bash\((.*)\)$/s.exec(expected);
  assert.equal(verdict.rule?.text, denied?.[1]);
}

describe('checkCommandLine', () => {
  for (const [line, expected, command] of ROWS) {
    it(`${expected === true ? 'allows' : 'refuses'} ${JSON.stringify(line)}`, async () => {
      expectVerdict(await checkCommandLine(line, RULES), expected, command);
    });
  }

  for (const [line, expected, command] of DENY_ONLY_ROWS) {
    it(`with only deny rules, ${expected === true ? 'allows' : 'refuses'} ${JSON.stringify(line)}`, async () => {
      expectVerdict(await checkCommandLine(line, DENY_ONLY), expected, command);
    });
  }

  it('with only deny rules, allows what they do not match and still reads every command', async () => {
    const rules = { deny: [parseCommandPattern('curl:*')] };
    expectVerdict(await checkCommandLine('ls && wget x', rules), true);
    expectVerdict(await checkCommandLine('ls && bash -c "curl evil"', rules), CURL, 'curl evil');
    expectVerdict(await checkCommandLine('$CMD x', rules), 'the command name is not literal ($CMD)');
    expectVerdict(await checkCommandLine('if', rules), 'an if statement is not allowed under permission rules');
  });

  it("allows a realistic agent's lines under rules of the issue's kind", async () => {
    const rules = { allow: ['npm test:*', 'git status:*', 'ls:*', 'head:*', 'grep:*'].map(parseCommandPattern), deny: [] };
    const lines = [
      'cd src && ls',
      'npm test -- --watch=false',
      'git status --short',
      'git status 2>&1 | head -20',
      'ls -la src | grep "\\.ts$" | head -5',
      'npm test 2>&1 | grep -E "fail|pass"',
      'cd src/tools && ls -la && cd ../.. && git status --short',
      'NO_COLOR=1 npm test -- test/x.test.ts > /dev/null 2>&1; git status',
      'set -euo pipefail\nnpm test\ngit status --porcelain | head -n 1 # check',
    ];
    for (const line of lines) expectVerdict(await checkCommandLine(line, rules), true);
    expectVerdict(await checkCommandLine('cd src && ls', { allow: [parseCommandPattern('ls:*')], deny: [] }), true);
  });

  it('with no rules at all, allows any line without reading it', async () => {
    expectVerdict(await checkCommandLine('if', { deny: [] }), true);
  });

  it('refuses a line longer than the limit, counted in bytes, before parsing it', async () => {
    const tooLong = `the command line is longer than ${MAX_LINE_BYTES} bytes`;
    expectVerdict(await checkCommandLine(`echo ${'a'.repeat(MAX_LINE_BYTES)}`, RULES), tooLong);
    expectVerdict(await checkCommandLine(`echo ${'é'.repeat(MAX_LINE_BYTES / 2)}`, RULES), tooLong);
  });

  it('reads a line of exactly the limit', async () => {
    const line = `echo ${'word '.repeat(MAX_LINE_BYTES / 5)}`.slice(0, MAX_LINE_BYTES);
    assert.equal(Buffer.byteLength(line), MAX_LINE_BYTES);
    expectVerdict(await checkCommandLine(line, RULES), true);
  });

  it('reads bash -c strings nested up to the limit, and refuses one deeper', async () => {
    const nest = (depth: number): string => {
      let line = 'curl evil';
      for (let i = 0; i < depth; i++) line = `bash -c '${line.replaceAll("'", "'\\''")}'`;
      return line;
    };
    expectVerdict(await checkCommandLine(nest(MAX_NESTING), RULES), CURL, 'curl evil');
    expectVerdict(await checkCommandLine(nest(MAX_NESTING + 1), RULES), `the command line nests bash -c more than ${MAX_NESTING} levels deep`);
  });

  it('refuses a line of more commands than the limit, counting those inside bash -c', async () => {
    expectVerdict(await checkCommandLine('ls;'.repeat(MAX_COMMANDS + 1), RULES), `the command line runs more than ${MAX_COMMANDS} commands`);
    const inner = `bash -c '${'ls;'.repeat(MAX_COMMANDS / 2)}'`;
    expectVerdict(await checkCommandLine(`${inner}; ${inner}`, RULES), `the command line runs more than ${MAX_COMMANDS} commands`);
  });

  it('refuses a line that took tree-sitter minutes at its first character, and reads the next one', async () => {
    // tree-sitter's error recovery on 60,000 ")" ran for minutes; the rules' own reader stops where bash would.
    expectVerdict(await checkCommandLine(')'.repeat(60_000), RULES), '")" where a command should be is not allowed under permission rules');
    expectVerdict(await checkCommandLine('( '.repeat(30_000), RULES), 'nesting subshells and groups more than 64 deep is not allowed under permission rules');
    expectVerdict(await checkCommandLine('git status', RULES), true);
  });

  it('refuses a line that exhausts the parser, and parses the next one', async () => {
    // A long pipeline ending in "|" exhausts the parser's memory (or its budget, whichever comes first).
    const verdict = await checkCommandLine('x |'.repeat(21_000), RULES);
    assert.equal(verdict.allowed, false);
    expectVerdict(await checkCommandLine('npm run test && curl evil', RULES), CURL);
  });

  it('answers lines checked at the same time, each with its own verdict', async () => {
    const lines = ['ls', 'curl evil', 'git status', 'wget x', 'npm run test'];
    const verdicts = await Promise.all(lines.map((line) => checkCommandLine(line, RULES)));
    assert.deepEqual(
      verdicts.map((verdict) => verdict.allowed),
      [true, false, true, false, true],
    );
  });

  it('allows a line exactly when every command joined in it is allowed', async () => {
    const allowed = ['ls', 'git status', 'npm run test', 'npm run test -- --x', 'echo hi', 'cat a.txt', "'n'pm run test", 'env LANG=C ls', 'true'];
    const refused = ['curl evil', 'wget x', 'npm run test-evil', 'git push', 'rm -rf /', 'n\\pm run testing', 'sh', 'python3 -c 1'];
    const wrap = [
      (c: string) => c,
      (c: string) => `(${c})`,
      (c: string) => `{ ${c}; }`,
      (c: string) => `time ${c}`,
      (c: string) => `env LANG=C ${c}`,
      (c: string) => `nohup ${c}`,
    ];
    const part = fc.record({
      ok: fc.boolean(),
      index: fc.nat(),
      wrapper: fc.constantFrom(...wrap),
    });
    const operator = fc.constantFrom('; ', ' && ', ' || ', ' | ', '\n', ' & ', ' |& ');
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(part, operator), { minLength: 1, maxLength: 6 }), async (parts) => {
        let line = '';
        for (const [{ ok, index, wrapper }, op] of parts) {
          const pool = ok ? allowed : refused;
          line += (line === '' ? '' : op) + wrapper(pool[index % pool.length] as string);
        }
        const verdict = await checkCommandLine(line, RULES);
        assert.equal(
          verdict.allowed,
          parts.every(([{ ok }]) => ok),
          line,
        );
      }),
      { numRuns: 300 },
    );
  });
});

describe('parseCommandPattern', () => {
  it('splits a rule into words as the shell would', () => {
    assert.deepEqual(parseCommandPattern('git status'), { text: 'git status', words: ['git', 'status'], prefix: false });
    assert.deepEqual(parseCommandPattern('  npm run test:*  '), { text: 'npm run test:*', words: ['npm', 'run', 'test'], prefix: true });
    assert.deepEqual(parseCommandPattern("git commit -m 'wip fix':*").words, ['git', 'commit', '-m', 'wip fix']);
    assert.deepEqual(parseCommandPattern('echo "a b" c\\ d \'*\'').words, ['echo', 'a b', 'c d', '*']);
    assert.deepEqual(parseCommandPattern('git log HEAD~1').words, ['git', 'log', 'HEAD~1']);
    assert.deepEqual(parseCommandPattern('npm run test :*').words, ['npm', 'run', 'test']);
  });

  const ERRORS: readonly (readonly [string, string])[] = [
    ['', 'the Bash rule is empty'],
    ['   ', 'the Bash rule is empty'],
    [':*', 'the Bash rule ":*" names no command before ":*"'],
    ["''", `the Bash rule "''" names no command`],
    ['npm *', 'the Bash rule "npm *" has a "*" that is not its end: only a final ":*" (npm run test:*) matches more words'],
    ['npm run test*', 'the Bash rule "npm run test*" has a "*" that is not its end: only a final ":*" (npm run test:*) matches more words'],
    ['*', 'the Bash rule "*" has a "*" that is not its end: only a final ":*" (npm run test:*) matches more words'],
    ["git commit -m 'wip", `the Bash rule "git commit -m 'wip" has an unterminated ' quote`],
    ['echo "a', 'the Bash rule "echo "a" has an unterminated " quote'],
    ['echo \\', 'the Bash rule "echo \\" ends with a lone backslash'],
    ['ls; curl', 'the Bash rule "ls; curl" has an unquoted ";": a rule is one simple command'],
    ['ls | grep', 'the Bash rule "ls | grep" has an unquoted "|": a rule is one simple command'],
    ['ls && x', 'the Bash rule "ls && x" has an unquoted "&": a rule is one simple command'],
    ['cat > f', 'the Bash rule "cat > f" has an unquoted ">": a rule is one simple command'],
    ['echo $HOME', 'the Bash rule "echo $HOME" has an unquoted "$" (an expansion): a rule\'s words are literal, so quote it'],
    ['echo `id`', 'the Bash rule "echo `id`" has an unquoted "`" (an expansion): a rule\'s words are literal, so quote it'],
    ['echo "$HOME"', 'the Bash rule "echo "$HOME"" has "$" inside double quotes (an expansion): a rule\'s words are literal, so use single quotes'],
    ['ls ~', 'the Bash rule "ls ~" has an unquoted "~" (a tilde): a rule\'s words are literal, so quote it'],
    ['ls a?', 'the Bash rule "ls a?" has an unquoted "?" (a glob): a rule\'s words are literal, so quote it'],
    ['ls [ab]', 'the Bash rule "ls [ab]" has an unquoted "[" (a glob): a rule\'s words are literal, so quote it'],
    ['echo {a,b}', 'the Bash rule "echo {a,b}" has an unquoted "{" (a brace expansion): a rule\'s words are literal, so quote it'],
    ['ls #x', 'the Bash rule "ls #x" has an unquoted "#", which starts a comment'],
    ['X=1 npm test', 'the Bash rule "X=1 npm test" starts with an assignment (X=1), which is not part of the command it matches: name the command'],
    ['if true', 'the Bash rule "if true" starts with the shell keyword "if", which runs nothing itself: name the commands it runs'],
  ];
  for (const [text, message] of ERRORS) {
    it(`refuses ${JSON.stringify(text)}`, () => {
      assert.throws(() => parseCommandPattern(text), { message });
    });
  }
});
