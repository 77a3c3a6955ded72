import ignore, { type Ignore } from 'ignore';
import { PermissionDenied, PermissionRuleError, type PathAccess, type PermissionRules, type Permissions, type RuleCatalog } from '../core/permissions.js';

/**
 * The tools whose specifier rules govern an access: Claude Code's, where Read rules apply to every
 * tool that reads and Edit rules to every tool that changes files.
 */
const FAMILIES: Record<PathAccess, readonly string[]> = { read: ['Read'], edit: ['Edit'], write: ['Edit', 'Write'] };

/** The path rules a tool's description states: those of `FAMILIES`, and Read's for Edit, which reads what it changes. */
const SHOWN: Record<PathAccess, readonly string[]> = { read: ['Read'], edit: ['Read', 'Edit'], write: ['Edit', 'Write'] };

interface Rule {
  /** As written, for messages and the audit line. */
  readonly text: string;
  /** A tool's name, or a group's prefix when `group`. */
  readonly tool: string;
  readonly group: boolean;
  readonly specifier: string | undefined;
  /** For path rules: the pattern, compiled with gitignore's semantics. */
  readonly path: Ignore | undefined;
}

/** One list of rules: the server's default, or a key's own. */
interface Layer {
  readonly allow: readonly Rule[];
  readonly deny: readonly Rule[];
}

const RULE = /^([A-Za-z0-9_-]+)(\*)?(?:\((.*)\))?$/s;

/** Parses one rule; throws `PermissionRuleError` naming it. */
function parseRule(text: string, catalog: RuleCatalog): Rule {
  const fail = (problem: string): never => {
    throw new PermissionRuleError(`rule ${JSON.stringify(text)} ${problem}`);
  };
  const match = RULE.exec(text.trim());
  if (match === null) return fail('is not of the form Tool or Tool(specifier)');
  const [, tool = '', star, specifier] = match;
  if (star !== undefined) {
    if (specifier !== undefined) fail('names a group of tools (`*`), which takes no specifier');
    if (!catalog.knowsGroup(tool)) fail(`names no served tool (no tool name starts with ${JSON.stringify(tool)})`);
    return { text, tool, group: true, specifier: undefined, path: undefined };
  }
  if (!catalog.knows(tool)) fail(`names ${JSON.stringify(tool)}, which is not a served tool`);
  if (specifier === undefined) return { text, tool, group: false, specifier: undefined, path: undefined };
  const kind = catalog.specifierOf(tool);
  if (specifier.trim() === '') fail('has an empty specifier; write the tool name alone for the whole tool');
  if (kind === undefined) fail(`gives ${tool} a specifier, but ${tool}'s rules are the tool name alone`);
  if (kind === 'command') {
    try {
      catalog.checkCommand?.(specifier);
    } catch (err) {
      fail(`has a command toolport cannot read: ${(err as Error).message}`);
    }
    return { text, tool, group: false, specifier, path: undefined };
  }
  return { text, tool, group: false, specifier, path: ignore({ ignorecase: false }).add(pathPattern(specifier, fail)) };
}

/**
 * A path specifier as a gitignore pattern relative to the workspace root. `./x` and `/x` are
 * anchored at the root; a name alone (`.env`) matches at any depth, as in a .gitignore.
 */
function pathPattern(specifier: string, fail: (problem: string) => never): string {
  if (specifier.startsWith('//') || specifier.startsWith('~')) {
    fail('is not relative to the workspace: path rules are relative to the workspace root (write `secrets/**`, `./.env` or `/.env`)');
  }
  if (specifier.startsWith('!')) fail('starts with "!": a rule cannot un-match a path; list it in the other list instead');
  if (specifier.includes('\0')) fail('holds a NUL byte');
  let pattern = specifier.startsWith('./') ? specifier.slice(1) : specifier;
  if (pattern.split('/').some((part) => part === '..')) fail('goes up with "..": path rules name paths inside the workspace');
  if (pattern === '/' || pattern === '') fail('names the workspace root itself; write `**` for every path');
  // gitignore reads a leading "#" as a comment and drops trailing spaces: escape both, so the rule means the name written.
  if (pattern.startsWith('#')) pattern = `\\${pattern}`;
  return pattern.replace(/ +$/, (spaces) => '\\ '.repeat(spaces.length));
}

/** Whether a deny rule takes paths from the tools of `families`: a path rule of one of them, or one of them named alone. */
function deniesPaths(rule: Rule, families: readonly string[]): boolean {
  return !rule.group && families.includes(rule.tool) && (rule.path !== undefined || rule.specifier === undefined);
}

function matchesTool(rule: Rule, tool: string): boolean {
  return rule.group ? tool.startsWith(rule.tool) : rule.tool === tool;
}

/** How a path is spelled for gitignore matching: a directory ends with `/`, so `secrets/` patterns match it and what it holds. */
function gitPath(relative: string, directory: boolean): string | undefined {
  if (relative === '.' || relative === '') return undefined;
  return directory ? `${relative}/` : relative;
}

/**
 * The rules that apply to one caller, compiled: the server's default layer and the key's own. A
 * call must pass every layer, so a key's rules can only narrow the default. Tools consult this
 * through their context (`ToolContext.permissions`) on the path they really resolved, or on the
 * command line they are about to run.
 */
export class CompiledPermissions implements Permissions {
  readonly #layers: readonly Layer[];
  readonly #governs = new Map<PathAccess, boolean>();

  private constructor(layers: readonly Layer[]) {
    this.#layers = layers;
  }

  /**
   * Compiles rule lists, in order (the server's default first). Throws `PermissionRuleError` for
   * the first bad rule, its message naming the list (`where`) and the rule. Undefined when no list
   * has a rule: such a caller behaves exactly as with no rules at all.
   */
  static compile(lists: ReadonlyArray<{ where: string; rules: PermissionRules | undefined }>, catalog: RuleCatalog): CompiledPermissions | undefined {
    const layers: Layer[] = [];
    for (const { where, rules } of lists) {
      if (rules === undefined) continue;
      const parse = (text: string): Rule => {
        try {
          return parseRule(text, catalog);
        } catch (err) {
          if (err instanceof PermissionRuleError) throw new PermissionRuleError(`${where}: ${err.message}`);
          throw err;
        }
      };
      const layer = { allow: (rules.allow ?? []).map(parse), deny: (rules.deny ?? []).map(parse) };
      if (layer.allow.length + layer.deny.length > 0) layers.push(layer);
    }
    return layers.length === 0 ? undefined : new CompiledPermissions(layers);
  }

  /** This caller's rules and then `other`'s: a call must pass both (a key's rules after the server's default). */
  and(other: CompiledPermissions | undefined): CompiledPermissions {
    return other === undefined ? this : new CompiledPermissions([...this.#layers, ...other.#layers]);
  }

  /**
   * The refusal of a whole tool, before its input is looked at: a rule that denies the tool by
   * name (or group), or an allow list that has rules for the tool's name and none of them it.
   */
  toolRefusal(tool: string): PermissionDenied | undefined {
    for (const layer of this.#layers) {
      const denied = layer.deny.find((r) => r.specifier === undefined && matchesTool(r, tool));
      if (denied !== undefined) return new PermissionDenied(`Tool ${JSON.stringify(tool)} is denied by ${denied.text}.`, denied.text, tool);
    }
    return undefined;
  }

  /** Whether any rule could refuse or filter this access; without, tools skip the checks (and their cost). */
  governs(access: PathAccess): boolean {
    // Asked on every read of a file (the link count check): the answer never changes, so it is kept.
    let answer = this.#governs.get(access);
    if (answer === undefined) this.#governs.set(access, (answer = this.#decideGoverns(access)));
    return answer;
  }

  #decideGoverns(access: PathAccess): boolean {
    const families = FAMILIES[access];
    return this.#layers.some(
      (layer) => layer.allow.some((r) => r.path !== undefined && families.includes(r.tool)) || layer.deny.some((r) => deniesPaths(r, families)),
    );
  }

  /**
   * Whether `tool` may do `access` on the path the walk resolved (`relative` to the workspace root,
   * canonical); the refusal names the rule. For a directory an allow list is not applied (what a
   * listing shows of it is filtered entry by entry, `visible`), only denials. The refusal names the
   * path as `shown` (the client's spelling), so it never tells where a symlink leads.
   */
  pathRefusal(tool: string, access: PathAccess, relative: string, directory = false, shown = relative): PermissionDenied | undefined {
    const path = gitPath(relative, directory);
    const families = FAMILIES[access];
    for (const layer of this.#layers) {
      // A bare `Read` denies every path to every tool that reads, as `Read(**)` would.
      const denied = layer.deny.find((r) => deniesPaths(r, families) && (r.path === undefined || (path !== undefined && r.path.ignores(path))));
      if (denied !== undefined) return new PermissionDenied(`Path ${JSON.stringify(shown)} is denied by ${denied.text}.`, denied.text, tool);
      if (directory) continue;
      const allows = layer.allow.filter((r) => families.includes(r.tool) && (r.specifier === undefined || r.path !== undefined));
      const specific = allows.filter((r) => r.path !== undefined);
      // A bare `Read` in the allow list allows every path; a list of path rules allows only theirs.
      if (specific.length === 0 || allows.some((r) => r.specifier === undefined)) continue;
      if (path === undefined || !specific.some((r) => r.path!.ignores(path))) {
        const family = families.filter((f) => specific.some((r) => r.tool === f)).join(' or ');
        return new PermissionDenied(`Path ${JSON.stringify(shown)} is not allowed by any rule for ${family}.`, undefined, tool);
      }
    }
    return undefined;
  }

  /** The refusal of a file with `links` names under rules for reading: a rule cannot tell by which name the file is reached. */
  linkRefusal(tool: string, relative: string, links: number): PermissionDenied {
    return new PermissionDenied(
      `Path ${JSON.stringify(relative)} has ${links} names (hard links); under rules for Read a file with more than one name is refused, since a rule cannot tell which of its names it is reached by.`,
      undefined,
      tool,
    );
  }

  /** Whether a listing or a search (Glob, LS, Grep) may show or read this path: what Read may read. */
  visible(relative: string, directory: boolean): boolean {
    return this.pathRefusal('Read', 'read', relative, directory) === undefined;
  }

  /** Each layer's command rules for a tool (Bash), as written inside the parentheses; empty: no command rule applies. */
  commandRules(tool: string): ReadonlyArray<{ allow: readonly string[] | undefined; deny: readonly string[] }> {
    const layers: Array<{ allow: readonly string[] | undefined; deny: readonly string[] }> = [];
    for (const layer of this.#layers) {
      const allows = layer.allow.filter((r) => matchesTool(r, tool));
      const deny = layer.deny.filter((r) => !r.group && r.tool === tool && r.specifier !== undefined).map((r) => r.specifier!);
      const bare = allows.some((r) => r.specifier === undefined);
      const allow = bare || allows.length === 0 ? undefined : allows.map((r) => r.specifier!);
      if (allow !== undefined || deny.length > 0) layers.push({ allow, deny });
    }
    return layers;
  }

  /**
   * The rules a model should know about for a tool, as the last line of its description: those
   * naming it, and the path rules that govern what it touches. Undefined: none.
   */
  summary(tool: string, access: PathAccess | undefined): string | undefined {
    const families = access === undefined ? [] : SHOWN[access];
    const applies = (r: Rule): boolean =>
      matchesTool(r, tool) || (!r.group && families.includes(r.tool) && (r.path !== undefined || r.specifier === undefined));
    const allowed = unique(this.#layers.flatMap((l) => l.allow.filter(applies).map((r) => r.text)));
    const denied = unique(this.#layers.flatMap((l) => l.deny.filter(applies).map((r) => r.text)));
    const parts = [
      allowed.length > 0 ? `Allowed for this key: ${allowed.join(', ')}.` : '',
      denied.length > 0 ? `Denied for this key: ${denied.join(', ')}.` : '',
    ];
    const line = parts.filter((p) => p !== '').join(' ');
    return line === '' ? undefined : line;
  }
}

function unique(texts: string[]): string[] {
  return [...new Set(texts)];
}

/**
 * Compiles rule lists, in order (the server's default first), against `catalog`: the rule language
 * read once. Throws `PermissionRuleError` for the first bad rule, naming its list and the rule;
 * undefined when no list has a rule.
 */
export function compilePermissions(lists: ReadonlyArray<{ where: string; rules: PermissionRules | undefined }>, catalog: RuleCatalog): Permissions | undefined {
  return CompiledPermissions.compile(lists, catalog);
}
