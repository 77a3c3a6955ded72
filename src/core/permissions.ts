import { ToolportError } from './errors.js';

/**
 * Permission rules as an operator writes them, in Claude Code's language: `Tool`, `Tool(specifier)`,
 * or a group of tools `github__*`. Deny wins over allow; with an allow list for a tool, what it does
 * not match is refused; a tool with no rule is left to the key's scope.
 */
export interface PermissionRules {
  readonly allow?: readonly string[];
  readonly deny?: readonly string[];
}

/** What a rule's parenthesised part is for a tool: a path pattern (file tools) or a command line (Bash). */
export type SpecifierKind = 'path' | 'command';

/** What a tool declares about its rules (`ToolDef.rules`). */
export interface ToolRules {
  /** What its own rules' parentheses hold; left out: its rules are its name alone. */
  readonly specifier?: SpecifierKind;
  /** Which path rules govern the files it touches: Read's for `read`, Edit's (and Write's) for `edit` and `write`. */
  readonly access?: PathAccess;
}

/** What the rules are checked against when they are compiled (at start-up, and at a reload of the keys). */
export interface RuleCatalog {
  /** Whether a rule may name this tool: a served tool, or one an upstream may list later. */
  knows(tool: string): boolean;
  /** Whether a group (`github__*`) names a prefix some tool (or upstream) has. */
  knowsGroup(prefix: string): boolean;
  /** The kind of specifier a tool's rules take; undefined: its rules are the name alone. */
  specifierOf(tool: string): SpecifierKind | undefined;
  /** Throws an Error saying what is wrong with a command specifier (Bash's). */
  checkCommand?(specifier: string): void;
}

/** Raised for a rule that cannot be read; the message names the rule. */
export class PermissionRuleError extends Error {
  override readonly name = 'PermissionRuleError';
}

/** What a file tool does to a path: read it (Read, Grep, Glob, LS), edit it in place (Edit), or write it whole (Write). */
export type PathAccess = 'read' | 'edit' | 'write';

/** A refusal by a rule, or for the want of one: FORBIDDEN, with the rule named for the audit line. */
export class PermissionDenied extends ToolportError {
  /** The rule that denied the call, as written; undefined when no allow rule matched. */
  readonly rule: string | undefined;

  constructor(message: string, rule: string | undefined, tool: string) {
    super('FORBIDDEN', message, { tool, ...(rule !== undefined && { rule }) });
    this.rule = rule;
  }
}

/**
 * The rules that apply to one caller, compiled (`src/permissions/rules.ts` compiles them): the
 * server's default layer and the caller's own, which a call must each pass. The gateway asks it
 * for a whole tool; tools consult it through their context (`ToolContext.permissions`) on the path
 * they really resolved, or on the command line they are about to run.
 */
export interface Permissions {
  /** The refusal of a whole tool, before its input is looked at. */
  toolRefusal(tool: string): PermissionDenied | undefined;
  /** Whether any rule could refuse or filter this access; without, tools skip the checks (and their cost). */
  governs(access: PathAccess): boolean;
  /** The refusal of `relative` (workspace-relative, as resolved) for this access by `tool`, if any. */
  pathRefusal(tool: string, access: PathAccess, relative: string, directory?: boolean, shown?: string): PermissionDenied | undefined;
  /** The refusal of a file with several hard links, which path rules cannot judge by one of its names. */
  linkRefusal(tool: string, relative: string, links: number): PermissionDenied;
  /** Whether a listing or search may show this entry (Read's deny rules hide it). */
  visible(relative: string, directory: boolean): boolean;
  /** A tool's command rules, layer by layer: what each allows (undefined: no allow list) and denies. */
  commandRules(tool: string): ReadonlyArray<{ allow: readonly string[] | undefined; deny: readonly string[] }>;
  /** The rules a tool's description states for this caller, one line; undefined when none apply. */
  summary(tool: string, access: PathAccess | undefined): string | undefined;
}
