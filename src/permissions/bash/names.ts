/**
 * Variables that change what a program does without showing in its words. Before a command under
 * an allow list, only the harmless ones may be set (`LANG=C git status`); anywhere else, and under
 * deny rules alone, the ones that load code, pick the program that runs or where its configuration
 * comes from are refused. The lists are best effort: a program may read any variable.
 */

// Locale, time zone, colour and terminal width, CI hints, build modes and Python's buffering: read as data.
const HARMLESS = new Set([
  'LANG',
  'LANGUAGE',
  'TZ',
  'NO_COLOR',
  'FORCE_COLOR',
  'TERM',
  'COLUMNS',
  'LINES',
  'CI',
  'NODE_ENV',
  'RUST_BACKTRACE',
  'PYTHONUNBUFFERED',
  'PYTHONDONTWRITEBYTECODE',
]);
const HARMLESS_PATTERN = /^LC_[A-Z]+$/;
/** The harmless variables, as a refusal lists them. */
export const HARMLESS_SHOWN = `${[...HARMLESS].join(', ')} and LC_*`;

const DANGEROUS = new Set([
  'PATH',
  'IFS',
  'ENV',
  'BASH_ENV',
  'SHELLOPTS',
  'BASHOPTS',
  'PS0',
  'PS1',
  'PS2',
  'PS4',
  'PROMPT_COMMAND',
  'HOME',
  'XDG_CONFIG_HOME',
  'CDPATH',
  'NODE_OPTIONS',
  'NODE_PATH',
  'PYTHONSTARTUP',
  'PYTHONPATH',
  'PYTHONHOME',
  'PERL5OPT',
  'PERL5LIB',
  'PERLLIB',
  'PERL5DB',
  'RUBYOPT',
  'RUBYLIB',
  'JAVA_TOOL_OPTIONS',
  '_JAVA_OPTIONS',
  'CLASSPATH',
  'OPENSSL_CONF',
  'GCONV_PATH',
  'EDITOR',
  'VISUAL',
  'PAGER',
  'MANPAGER',
  'BROWSER',
  'LESSOPEN',
  'LESSCLOSE',
  'SSH_ASKPASS',
  'RUSTC_WRAPPER',
]);
// Git's (GIT_CONFIG_*, GIT_EXEC_PATH, GIT_SSH_COMMAND...), the loader's, npm's and cargo's settings, exported functions.
const DANGEROUS_PATTERN = /^(GIT_|LD_|DYLD_|NPM_CONFIG_|npm_config_|CARGO_|BASH_FUNC_)/;

/** Whether a variable may be set just before a command an allow rule matched. */
export function harmlessVariable(name: string): boolean {
  return HARMLESS.has(name) || HARMLESS_PATTERN.test(name);
}

/** Whether setting a variable may change which code a later command runs. */
export function dangerousVariable(name: string): boolean {
  return DANGEROUS.has(name) || DANGEROUS_PATTERN.test(name);
}

/** The variable a word assigns or names (`PATH=x`, `a[1]+=y`, `HOME`): the identifier at its start, if any. */
export function variableOf(text: string): string | undefined {
  return /^[A-Za-z_][A-Za-z0-9_]*/.exec(text)?.[0];
}

// Lowercase variables some programs read from the environment: proxies, and bash's own history characters.
const LOWERCASE_READ = /(^|_)proxy$|^histchars$|^auto_resume$/;

/**
 * Whether a variable may be set alone (`x=1`) under rules: a lowercase name, which neither bash nor
 * the programs it runs read (bash's own settings and the environment are uppercase), bar proxies.
 */
export function localVariable(name: string): boolean {
  return /^[a-z_][a-z0-9_]*$/.test(name) && !LOWERCASE_READ.test(name);
}
