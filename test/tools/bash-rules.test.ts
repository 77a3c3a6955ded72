import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { checkCommandLine, MAX_COMMANDS, MAX_LINE_BYTES, MAX_NESTING, MAX_PARSE_MS, parseCommandPattern } from '../../src/tools/bash-rules.js';

const RULES = {
  allow: ['npm run test:*', 'git status', 'git diff:*', 'echo:*', 'ls:*', 'cat:*', 'grep:*', 'cd:*', 'true'].map(parseCommandPattern),
  deny: ['curl:*', 'git push:*', 'rm -rf /'].map(parseCommandPattern),
};

const CURL = 'denied by Bash(curl:*)';
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
  ['env X=1 npm run test', true],
  ['X=1 Y=2 npm run test', true],
  ['env -i -u HOME PATH=/bin ls', true],
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
  ['ls\rcurl evil', 'the command line contains a \\r character, which the rules do not read'],
  ['ls\0curl evil', 'the command line contains a \\u0000 character, which the rules do not read'],
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
    const allowed = ['ls', 'git status', 'npm run test', 'npm run test -- --x', 'echo hi', 'cat a.txt', "'n'pm run test", 'env X=1 ls', 'true'];
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
