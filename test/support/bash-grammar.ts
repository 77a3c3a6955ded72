/**
 * Command lines generated from a grammar of bash, seeded, for the Bash rules' oracle: words with
 * every kind of quoting and expansion, lists and pipelines, subshells and groups, redirections,
 * here-documents, comments, shell options, evaluating builtins and wrapper programs; then mutated
 * (a character of bash's syntax, or a backslash-newline, put anywhere) so the reader meets text no
 * one wrote on purpose.
 */

/** A small seeded generator (mulberry32): the same seed gives the same lines on every machine. */
export class Random {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  below(n: number): number {
    return Math.floor(this.next() * n);
  }

  pick<T>(items: readonly T[]): T {
    return items[this.below(items.length)] as T;
  }

  chance(p: number): boolean {
    return this.next() < p;
  }
}

// Programs the rules of the oracle allow, and programs they forbid (each harmless in a scratch directory).
const ALLOWED_PROGRAMS = ['echo', 'ls', 'cat', 'head -1', 'grep x', 'wc -l', 'git status', 'true', 'printf %s'];
const FORBIDDEN_PROGRAMS = ['id', 'rm -f gone', 'touch pwned', 'uname', 'date', 'whoami', 'sort', 'tr a b', 'printenv'];

const WORDS = ['a', '-l', '.', 'x.txt', '--short', "'a b'", '"a b"', 'a\\ b', "''", '""', '-', '--', 'x=1', 'HEAD~1', '%s', 'a:b'];
const VARIABLES = ['$HOME', '"$HOME"', '${HOME}', '$1', '"$@"', '$?', '$#', '$$', '$x', '"${x}"', '$', '"a$"'];
// Expansions and quoting the rules refuse, most of which run a program when bash reads them.
const EXPANSIONS = [
  '$(id)',
  '"$(id)"',
  '`id`',
  '"`id`"',
  '${x:-$(id)}',
  "${x:-'$(id)'}",
  '"${x:-\'$(id)\'}"',
  '"${x:-"$(id)"}"',
  '${x#$(id)}',
  '${x/a/$(id)}',
  '${!x}',
  '${x@P}',
  '${#x}',
  '$((1+2))',
  '$((x))',
  '$[1]',
  '<(id)',
  '>(id)',
  'a<(id)',
  "$'\\x69d'",
  "$'id'",
  '$"id"',
  '{id,}',
  '{a,b}',
  '~',
  '~/x',
  '*',
  '?',
  '[a]',
  'a#$(id)',
  '\\#$(id)',
  '#$(id)',
  "'$(id)'",
  '"\\$(id)"',
  '\\$(id)',
  '$x$(id)',
  '"\\"$(id)\\""',
  "'\\''$(id)",
  '"a\'"$(id)"\'"',
  '\\\\$(id)',
  '"\\\\$(id)"',
  '$\\\n(id)',
  '<\\\n(id)',
  '$\\\n{x:-$(id)}',
  '"$\\\n(id)"',
  "$'\\''id",
];
const WRAPPERS = [
  'env',
  'env -i',
  'env LANG=C',
  'env X=1',
  'env -u HOME',
  'env -S',
  'command',
  'command -p',
  'exec',
  'builtin',
  'nohup',
  'time',
  'time -p',
  '\\time',
  'nice -n 1',
  'nice -1',
  'timeout 5',
  'timeout -s KILL 5',
  'stdbuf -oL',
  'setsid',
  'xargs',
  'xargs -0',
  'xargs -I{}',
  'flock .lock',
  'sudo',
  'find . -maxdepth 0 -exec',
  '!',
  'LANG=C',
  'X=1',
  'PATH=.:$PATH',
  'time --',
  'time -p --',
  'env A!B=1',
  'env =x',
  'env -- X=1',
  'env -i --',
  'nice --',
  'command --',
  'exec --',
  'timeout -- 5',
  'xargs --',
  './env',
  '/usr/bin/env',
];
// Builtins and settings that evaluate text or change how bash reads the rest of the line.
const EVALUATING = [
  'eval id',
  "eval 'ls; id'",
  'eval "$x"',
  '. ./evil.sh',
  'source ./evil.sh',
  "trap 'id' EXIT",
  'trap id EXIT',
  "compgen -C 'id' x",
  "complete -C 'id' x",
  "mapfile -C 'id' -c 1 < x.txt",
  'shopt -s expand_aliases\nalias ls=id\nls',
  'shopt -u interactive_comments\necho #$(id)',
  'shopt -s extglob',
  'set -o posix',
  'set -e',
  'set -euo pipefail',
  'set +x',
  "PS4='$(id)'; set -x; true",
  'BASH_ENV=./evil.sh bash -c true',
  'IFS=x',
  "x='a[$(id)]'; [ x -eq 0 ]",
  "printf -v 'a[$(id)]' 1",
  "read 'a[$(id)]' < x.txt",
  "declare 'a[$(id)]=1'",
  'declare -n r=x',
  "let 'x=a[$(id)]'",
  'hash -p /usr/bin/id ls; ls',
  'enable -n echo',
  "bash -c 'id'",
  "bash -c 'echo ok'",
  'bash -c "ls; id"',
  "sh -c 'id'",
  'bash -lc ls',
  'bash ./evil.sh',
  'bash -O extglob -c ls',
  'x=1',
  'cd sub',
  'cd ..',
  'pwd',
  '[ -f x.txt ]',
  'test -n a',
  '[ -v x ]',
  "[ -v 'a[$(id)]' ]",
];
const REDIRECTS = [
  '>out.txt',
  '> out.txt',
  '>>out.txt',
  '2>&1',
  '>/dev/null',
  '2>/dev/null',
  '&>out.txt',
  '>&out.txt',
  '< x.txt',
  '<<< word',
  '<<<"$(id)"',
  '> .env',
  '>>secret/key',
  '>../escape',
  '> "$x"',
  '>$(id)',
  '{fd}>out.txt',
  '3>&-',
  '<> x.txt',
  '>|out.txt',
];
const HERE_DOCUMENTS = ["<<'EOF'\n$(id)\nEOF", '<<EOF\n$(id)\nEOF', '<<EOF\nplain\nEOF', '<<-EOF\n\tplain\n\tEOF', '<<"E"F\n`id`\nEF', '<<EOF\n`id`'];
const SEPARATORS = ['; ', ' && ', ' || ', ' | ', '\n', ' & ', ' |& ', ';', '&&', '|'];
const COMMENTS = [' # $(id)', '#x', ' #', ' # `id`\n'];
// Characters of bash's syntax a mutation puts anywhere in a line.
const SYNTAX = ["'", '"', '\\', '$', '#', '(', ')', '{', '}', ';', '&', '|', ' ', '\n', '\\\n', '`', '<', '>', '=', '~', '*', '!'];

function word(random: Random): string {
  const roll = random.below(10);
  if (roll < 4) return random.pick(WORDS);
  if (roll < 6) return random.pick(VARIABLES);
  if (roll < 8) return random.pick(EXPANSIONS);
  return random.pick(WORDS) + random.pick([...VARIABLES, ...EXPANSIONS, ...WORDS]);
}

function simpleCommand(random: Random): string {
  const roll = random.below(10);
  let command = roll < 5 ? random.pick(ALLOWED_PROGRAMS) : roll < 7 ? random.pick(FORBIDDEN_PROGRAMS) : roll < 9 ? random.pick(EVALUATING) : '';
  if (command === '') command = `${random.pick(WRAPPERS)} ${random.pick([...ALLOWED_PROGRAMS, ...FORBIDDEN_PROGRAMS])}`;
  if (random.chance(0.3)) command = `${random.pick(WRAPPERS)} ${command}`;
  for (let i = random.below(3); i > 0; i--) command += ` ${word(random)}`;
  if (random.chance(0.3)) command += ` ${random.pick(REDIRECTS)}`;
  return command;
}

function command(random: Random, depth: number): string {
  const roll = random.below(12);
  if (depth < 2 && roll === 0) return `(${list(random, depth + 1)})`;
  if (depth < 2 && roll === 1) return `{ ${list(random, depth + 1)}; }`;
  if (roll === 2) return `${simpleCommand(random)} ${random.pick(HERE_DOCUMENTS)}\n`;
  return simpleCommand(random);
}

function list(random: Random, depth: number): string {
  let line = command(random, depth);
  for (let i = random.below(3); i > 0; i--) line += random.pick(SEPARATORS) + command(random, depth);
  return line;
}

/** One generated line: a list of commands, perhaps with a comment, then mutated at up to two places. */
export function generateLine(random: Random): string {
  let line = list(random, 0);
  if (random.chance(0.15)) line += random.pick(COMMENTS) + (random.chance(0.5) ? simpleCommand(random) : '');
  for (let i = random.below(3); i > 0; i--) {
    if (random.chance(0.5)) continue;
    const at = random.below(line.length + 1);
    line = line.slice(0, at) + random.pick(SYNTAX) + line.slice(at);
  }
  return line;
}
