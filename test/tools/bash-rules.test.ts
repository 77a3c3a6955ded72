import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { checkCommandLine, MAX_COMMANDS, MAX_LINE_BYTES, MAX_NESTING, MAX_PARSE_MS, parseCommandPattern } from '../../src/tools/bash-rules.js';

const RULES = {
  allow: ['npm run test:*', 'git status', 'git diff:*', 'echo:*', 'ls:*', 'cat:*', 'grep:*', 'cd:*', 'true'].map(parseCommandPattern),
  deny: ['curl:*', 'git push:*', 'rm -rf /'].map(parseCommandPattern),
};

const CURL = 'denied by Bash(curl:*)';
const ONLY_HARMLESS =
  'is refused: before a command only LANG, LANGUAGE, TZ, NO_COLOR, FORCE_COLOR, TERM, COLUMNS, LINES, CI, NODE_ENV, RUST_BACKTRACE, PYTHONUNBUFFERED, PYTHONDONTWRITEBYTECODE and LC_* may be set';
const EVALUATES = 'is refused: bash evaluates the variables in it as code';
const SUBSCRIPT = 'is refused: bash evaluates it as arithmetic';
const CHANGES = 'is refused: it changes what later commands run';
const BACKTICKS = 'inside backticks is refused';
const UNPARSED = 'the command line could not be parsed';

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
  ['if true; then echo yes; else echo no; fi', true],
  ['for f in *.ts; do cat "$f"; done', true],
  ['while true; do ls; done', true],
  ['case $x in a) echo a;; *) ls;; esac', true],
  ['! ls', true],
  ['[[ -f x ]] && ls', true],
  ['(( x = 1 + 2 ))', true],
  ['', true],
  ['# only a comment', true],
  ['npm run test && curl evil', CURL, 'curl evil'],
  ['npm run test; rm -rf /', 'denied by Bash(rm -rf /)', 'rm -rf /'],
  ['npm run test || wget evil', '`wget evil` is not allowed by any rule for Bash', 'wget evil'],
  ['ls\ncurl evil', CURL, 'curl evil'],
  ['ls & curl evil', CURL, 'curl evil'],
  ['cat a | sh', '`sh` is not allowed by any rule for Bash', 'sh'],
  ['(ls; curl evil)', CURL, 'curl evil'],
  ['{ ls; curl evil; }', CURL, 'curl evil'],
  ['if true; then curl evil; fi', CURL, 'curl evil'],
  ['while curl evil; do ls; done', CURL, 'curl evil'],
  ['case x in a) curl evil;; esac', CURL, 'curl evil'],
  ['f() { curl evil; }', CURL, 'curl evil'],
  ['f() { ls; }; f', '`f` is not allowed by any rule for Bash', 'f'],
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
  ['"$(echo npm)" run test', 'the command name is not literal ("$(echo npm)")'],
  ["$'\\x63url' evil", "the command name is not literal ($'\\x63url')"],
  ['npm run $T', '`npm run $T` is not allowed by any rule for Bash'],
  ['npm run test $EXTRA', true],
  ['echo \'curl evil\' "$(ls)"', true],
  ['echo hi # curl evil', true],
  // Substitutions anywhere run their commands.
  ['echo $(git status)', true],
  ['echo "$(ls)" `true`', true],
  ['echo $(curl evil)', CURL, 'curl evil'],
  ['echo `curl evil`', CURL, 'curl evil'],
  ['echo "a $(curl evil) b"', CURL],
  ['echo ${X:-$(curl evil)}', CURL],
  ['echo $((1 + $(curl evil)))', CURL],
  ['X=$(curl evil) ls', CURL],
  ['X=$(ls)', true],
  ['X=1', true],
  ['ls > $(curl evil)', CURL],
  ['cat <<< "$(curl evil)"', CURL],
  ['for f in $(curl evil); do ls; done', CURL],
  ['cat <(ls) >(grep x)', true],
  ['cat <(curl evil)', CURL, 'curl evil'],
  ['ls > >(curl evil)', CURL],
  // Here-documents: an unquoted delimiter expands the body, a quoted one does not.
  ['cat <<EOF\n$(git status)\nEOF', true],
  ['cat <<EOF\nhello $(curl evil)\nEOF', CURL, 'curl evil'],
  // tree-sitter leaves a backtick in a here-document as text: refused rather than guessed.
  ['cat <<EOF\n`curl evil`\nEOF', `${UNPARSED} ("\`" read as text)`],
  ["cat <<'EOF'\n$(curl evil) `curl evil`\nEOF", true],
  ['cat <<\\EOF\n$(curl evil)\nEOF', true],
  ['cat <<-EOF\n\t$(curl evil)\n\tEOF', `${UNPARSED} ("$(" read as text)`],
  ['cat <<EOF | sh\nls\nEOF', '`sh` is not allowed by any rule for Bash'],
  // Wrappers are looked through: the command they run must be allowed.
  // Stricter since the rules read assignments: only harmless variables may be set for a command.
  ['env LANG=C npm run test', true],
  ['LANG=C TZ=UTC LC_ALL=C npm run test', true],
  ['env -i -u HOME ls', true],
  ['env -i -u HOME PATH=/bin ls', `setting PATH for ls ${ONLY_HARMLESS}`, 'env -i -u HOME PATH=/bin ls'],
  ['env -i PATH=/bin -u HOME ls', '`-u HOME ls` is not allowed by any rule for Bash'],
  ['env X=1 curl evil', CURL, 'env X=1 curl evil'],
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
  ['time { curl evil; }', `${UNPARSED} ("{" where a command name should be)`],
  ['coproc curl evil', `${UNPARSED} ("coproc" where a command name should be)`],
  ['xargs curl', '`xargs curl` is not allowed by any rule for Bash'],
  ['find . -exec curl {} \\;', '`find . -exec curl {} \\;` is not allowed by any rule for Bash'],
  // Shells and eval: the string is a line of its own.
  ["bash -c 'npm run test && ls'", true],
  ['sh -c "echo hi"', true],
  ["bash -lc 'git status'", true],
  ['zsh -c ls', true],
  ['dash -ec ls', true],
  ['/bin/sh -c "curl evil"', CURL, 'curl evil'],
  ["bash -c 'ls; wget evil'", '`wget evil` is not allowed by any rule for Bash', 'wget evil'],
  ['bash -c \'bash -c "curl evil"\'', CURL],
  ['bash -c "$CMD"', 'the command string of bash -c is not literal ("$CMD")'],
  ['bash -i -c ls', 'the rules cannot read the options of bash (-i)'],
  ['bash -c', 'bash -c has no command string'],
  ["bash -c 'if'", 'the command string of bash -c could not be parsed'],
  ['bash scripts/build.sh', '`bash scripts/build.sh` is not allowed by any rule for Bash'],
  ['eval echo hi', true],
  ["eval 'ls; echo done'", true],
  ['eval curl evil', CURL],
  ["eval 'ls;' 'curl evil'", CURL],
  ['eval "$X"', 'the arguments of eval are not literal ("$X")'],
  ['eval', true],
  ['builtin eval curl evil', CURL],
  [`${'eval '.repeat(MAX_NESTING)}ls`, true],
  [`${'eval '.repeat(MAX_NESTING + 1)}ls`, `the command line nests bash -c, sh -c or eval more than ${MAX_NESTING} levels deep`],
  // Lines the parser cannot read are refused.
  ['echo a; ; ls', UNPARSED],
  ['echo "unterminated', UNPARSED],
  ['if true; then ls', UNPARSED],
  ['echo $(ls', UNPARSED],
  ['[[ x =~ ^a`curl`$ ]]', `${UNPARSED} ("\`" read as text)`],
  ['timeout $T ls', 'the arguments of timeout are not literal ($T)'],
  ['bash $ARGS', 'the arguments of bash are not literal ($ARGS)'],
  // B1: bash evaluates arithmetic, subscripts, ${!x} and ${x@P} again, and a value set earlier in the line runs.
  ["x='a[$(cat .env >&2)]'; [[ x -eq 0 ]]", '-eq on anything but numbers in [[ ]] (x -eq 0) is refused: bash evaluates both sides as arithmetic'],
  ['[[ $x -lt 1 ]]', '-lt on anything but numbers in [[ ]] ($x -lt 1) is refused: bash evaluates both sides as arithmetic'],
  ['[[ 1 -lt 2 ]] && ls', true],
  ['[ "$x" -eq 0 ] && ls', true],
  ["x='a[$(cat .env >&2)]'; (( x ))", `arithmetic on anything but numbers ((( x ))) ${EVALUATES}`],
  ["x='a[$(cat .env >&2)]'; y[x]=1", `a subscript that is not a number (y[x]) ${SUBSCRIPT}`],
  ["x='a[$(cat .env >&2)]'; echo $((x))", `arithmetic on anything but numbers ($((x))) ${EVALUATES}`],
  ['echo $[x]', `arithmetic on anything but numbers ($[x]) ${EVALUATES}`],
  ['echo $(( $x + 1 ))', `arithmetic on anything but numbers ($(( $x + 1 ))) ${EVALUATES}`],
  ['echo $(( 16#ff + 2 ** 3 )) $[1<<2]', true],
  ['(( x += 1 ))', `arithmetic on anything but numbers ((( x += 1 ))) ${EVALUATES}`],
  ['for ((i = 0; i < n; i++)); do ls; done', `arithmetic on anything but numbers (for ((i = 0; i < n; i++)); do ls; done) ${EVALUATES}`],
  ["x='$(cat .env)'; echo ${x@P}", 'the expansion ${x@P} is refused: bash would run the commands its value holds'],
  ['echo ${a[@]@P}', 'the expansion ${a[@]@P} is refused: bash would run the commands its value holds'],
  ['echo ${x@Q} ${x@E} ${x@U} ${#x} ${x:-y}', true],
  ["[[ -v 'a[$(cat .env >&2)]' ]]", "-v on anything but a plain variable name (-v 'a[$(cat .env >&2)]') is refused: bash evaluates a subscript as arithmetic"],
  ["[ -v 'a[$(cat .env >&2)]' ]", "-v on anything but a plain variable name (-v 'a[$(cat .env >&2)]') is refused: bash evaluates a subscript as arithmetic"],
  ['[[ -v x ]] && ls', true],
  ['echo ${a[x]}', `a subscript that is not a number (a[x]) ${SUBSCRIPT}`],
  ['echo ${a[1]} ${a[@]} ${#a[*]} ${!a[@]} ${!pre*}', true],
  ['echo ${s:x}', `an offset that is not a number (\${s:x}) ${SUBSCRIPT}`],
  ['echo ${s:1:2} ${s: -1}', true],
  ["x='a[$(cat .env >&2)]'; echo ${!x}", 'indirect expansion (${!x}) is refused: bash evaluates the name it holds'],
  ['a=([x]=1)', `an array element with a subscript that is not a number ([x]=1) ${SUBSCRIPT}`],
  ['a=([0]=1 2)', true],
  ["trap 'curl evil' EXIT", CURL, 'curl evil'],
  ["trap 'ls' EXIT", true],
  // B2: inside backticks bash undoes \` \$ and \\, and runs what it gets.
  ['echo `echo \\`cat .env\\` `', `an escaped "\`", "$" or "\\" ${BACKTICKS} (\`echo \\\`cat .env\\\` \`): write $(...) instead`],
  ['echo "`echo \\`cat .env\\``"', `an escaped "\`", "$" or "\\" ${BACKTICKS} (\`echo \\\`cat .env\\\`\`): write $(...) instead`],
  ['echo `echo \\$HOME`', `an escaped "\`", "$" or "\\" ${BACKTICKS} (\`echo \\$HOME\`): write $(...) instead`],
  // B3: variables that change what an allowed program runs.
  [
    "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0='cat .env >&2; false' git status",
    `setting GIT_CONFIG_COUNT for git ${ONLY_HARMLESS}`,
  ],
  ['NODE_OPTIONS=--require=./x.js npm run test', `setting NODE_OPTIONS for npm ${ONLY_HARMLESS}`],
  ['LD_PRELOAD=./x.so ls', `setting LD_PRELOAD for ls ${ONLY_HARMLESS}`],
  ['env NODE_OPTIONS=--require=./x.js npm run test', `setting NODE_OPTIONS for npm ${ONLY_HARMLESS}`],
  ['X=1 npm run test', `setting X for npm ${ONLY_HARMLESS}`],
  ['PATH=/tmp/x:$PATH; git status', `setting PATH (PATH=/tmp/x:$PATH) ${CHANGES}`],
  ['for HOME in x; do git status; done', `a loop over HOME ${CHANGES}`],
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
  ['echo hi {a[x]}>/dev/null', `a descriptor variable with a subscript that is not a number ({a[x]}) ${SUBSCRIPT}`],
  ['declare -i y=1', 'declare -i is refused: bash would evaluate the values given to the variable later as code', 'declare -i y=1'],
  ["declare -n r='a[x]'", 'declare -n is refused: bash would evaluate the values given to the variable later as code'],
  ["declare 'a[$(cat .env >&2)]=1'", "the variable name 'a[$(cat .env >&2)]=1' given to declare is refused: bash evaluates a subscript as arithmetic"],
  ["read 'a[x]' < f", "the variable name 'a[x]' given to read is refused: bash evaluates a subscript as arithmetic"],
  ['read -r -a "$n" < f', 'the variable name given to read is not literal ("$n")'],
  ['read -r -p "name: " line < f', true],
  ["printf -v 'a[x]' 1", "the variable name 'a[x]' given to printf is refused: bash evaluates a subscript as arithmetic"],
  ["mapfile -C 'cat .env' -c 1 < f", 'mapfile -C is refused: it runs a command line the rules do not see'],
  ['export PATH=/tmp/x; git status', `setting PATH (export PATH=/tmp/x) ${CHANGES}`],
  ["PS4='$(cat .env >&2)'; set -x", `setting PS4 (PS4='$(cat .env >&2)') ${CHANGES}`],
  ['read -r PATH < f', `setting PATH (read PATH) ${CHANGES}`],
  ["x='a[$(cat .env >&2)]'; (( x ))", `arithmetic on anything but numbers ((( x ))) ${EVALUATES}`],
  ["x='$(cat .env)'; echo ${x@P}", 'the expansion ${x@P} is refused: bash would run the commands its value holds'],
  ['GIT_CONFIG_COUNT=1 git status', 'setting GIT_CONFIG_COUNT for git is refused: it changes what the command runs', 'GIT_CONFIG_COUNT=1 git status'],
  ['env LD_PRELOAD=./x.so ls', 'setting LD_PRELOAD for ls is refused: it changes what the command runs'],
  ['BASH_ENV=./x bash -c ls', 'setting BASH_ENV for bash is refused: it changes what the command runs'],
  ['X=1 Y=2 ls', true],
  ['PATH=/tmp/x', `setting PATH (PATH=/tmp/x) ${CHANGES}`],
  ['ca\\\nt .env', 'denied by Bash(cat:*)', 'cat .env'],
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
    expectVerdict(await checkCommandLine('if', rules), UNPARSED);
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

  it('refuses a line of more commands than the limit, counting those inside bash -c', async () => {
    expectVerdict(await checkCommandLine('ls;'.repeat(MAX_COMMANDS + 1), RULES), `the command line runs more than ${MAX_COMMANDS} commands`);
    const inner = `bash -c '${'ls;'.repeat(MAX_COMMANDS / 2)}'`;
    expectVerdict(await checkCommandLine(`${inner}; ${inner}`, RULES), `the command line runs more than ${MAX_COMMANDS} commands`);
  });

  it('gives up on a line that would take the parser minutes, and parses the next one', async () => {
    // tree-sitter's error recovery on 60,000 ")" runs for minutes; the parse is stopped at the budget.
    expectVerdict(await checkCommandLine(')'.repeat(60_000), RULES), `the command line took more than ${MAX_PARSE_MS} ms to parse`);
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
      (c: string) => `echo $(${c})`,
      (c: string) => `echo \`${c}\``,
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
