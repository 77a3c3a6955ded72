import { boolean, byteSize, integer, list, oneOf, optionalInteger, raw, type Env } from './parse.js';

/** One variable `loadConfig` reads, as docs/configuration.md lists it (`npm run docs`). */
export interface ConfigVariable {
  readonly name: string;
  /** The default, as Markdown text. */
  readonly default: string;
  /** What the variable does, as Markdown text: one table cell. */
  readonly meaning: string;
  /** The page (and anchor) of docs/ that says more, relative to docs/. */
  readonly see?: string;
}

/**
 * One field of the configuration, declared once: the variables it reads (its rows of the docs
 * table), and how it reads them (its type, its parsing, the error that names a bad value).
 */
export interface Setting<T, Omitted extends boolean = boolean> {
  readonly variables: readonly ConfigVariable[];
  /** Reads the field; throws `ConfigError` naming the bad variable. */
  read(env: Env, cwd: string): T;
  /** An unset field leaves no key behind (`'oauth' in config` says whether it is configured). */
  readonly omitUnset: Omitted;
}

/** A section of the configuration: its fields by name, in the order of the docs table. */
export type Section = Readonly<Record<string, Setting<unknown>>>;

type ValueOf<S> = S extends Setting<infer T> ? T : never;

/** The values a section reads: a field that may be left out is optional. */
export type SettingsOf<S extends Section> = {
  -readonly [K in keyof S as S[K] extends Setting<unknown, true> ? never : K]: ValueOf<S[K]>;
} & {
  -readonly [K in keyof S as S[K] extends Setting<unknown, true> ? K : never]?: Exclude<ValueOf<S[K]>, undefined>;
};

/** Reads every field of a section, in order; the first bad variable throws. */
export function readSection<S extends Section>(section: S, env: Env, cwd: string): SettingsOf<S> {
  const values: Record<string, unknown> = {};
  for (const [field, setting] of Object.entries(section)) {
    const value = setting.read(env, cwd);
    if (!(setting.omitUnset && value === undefined)) values[field] = value;
  }
  return values as SettingsOf<S>;
}

/** The variables of a section, in order. */
export function sectionVariables(section: Section): ConfigVariable[] {
  return Object.values(section).flatMap((setting) => setting.variables);
}

/** A value as the docs table shows it: as code. */
export const code = (value: number | string): string => `\`${value}\``;

/** A variable's row; `default` is shown as given (Markdown). */
interface Described {
  readonly name: string;
  readonly meaning: string;
  readonly see?: string;
}

const row = (doc: Described, shown: string): ConfigVariable => ({
  name: doc.name,
  default: shown,
  meaning: doc.meaning,
  ...(doc.see === undefined ? {} : { see: doc.see }),
});

/** A field read by `read` from the variables given; for values no simpler kind below fits. */
export function setting<T>(variables: ConfigVariable | readonly ConfigVariable[], read: (env: Env, cwd: string) => T): Setting<T, false> {
  return { variables: Array.isArray(variables) ? variables : [variables as ConfigVariable], read, omitUnset: false };
}

/** A field left out of the configuration when unset: a file a feature is switched on by. */
export function optionalSetting<T>(variables: ConfigVariable | readonly ConfigVariable[], read: (env: Env) => T | undefined): Setting<T | undefined, true> {
  return { variables: Array.isArray(variables) ? variables : [variables as ConfigVariable], read, omitUnset: true };
}

/** A field read as `base` reads it, then turned into the value the service uses. */
export function mapped<T, U>(base: Setting<T, false>, map: (value: T) => U): Setting<U, false> {
  return setting(base.variables, (env, cwd) => map(base.read(env, cwd)));
}

/** Fields read together into one object (a tool's bounds), each from its own variable. */
export function groupSetting<S extends Section>(fields: S): Setting<SettingsOf<S>, false> {
  return setting(sectionVariables(fields), (env, cwd) => readSection(fields, env, cwd));
}

/** An integer from `min` to `max`; `fallback` when unset. */
export function integerSetting(doc: Described & { fallback: number; min: number; max: number; shown?: string }): Setting<number, false> {
  return setting(row(doc, doc.shown ?? code(doc.fallback)), (env) => integer(env, doc.name, doc.fallback, doc.min, doc.max));
}

/** An integer from `min` to `max`; undefined when unset (its default is derived elsewhere, as `shown` says). */
export function optionalIntegerSetting(doc: Described & { shown: string; min: number; max: number }): Setting<number | undefined, false> {
  return setting(row(doc, doc.shown), (env) => optionalInteger(env, doc.name, doc.min, doc.max));
}

/** A size in bytes, optionally with K, M, G or T. */
export function byteSizeSetting(doc: Described & { fallback: number; shown: string }): Setting<number, false> {
  return setting(row(doc, doc.shown), (env) => byteSize(env, doc.name, doc.fallback));
}

/** `true`, `1`, `yes`, or `false`, `0`, `no`. */
export function booleanSetting(doc: Described & { fallback: boolean }): Setting<boolean, false> {
  return setting(row(doc, code(String(doc.fallback))), (env) => boolean(env, doc.name, doc.fallback));
}

/** One of a few words. */
export function oneOfSetting<T extends string>(doc: Described & { values: readonly T[]; fallback: T }): Setting<T, false> {
  return setting(row(doc, code(doc.fallback)), (env) => oneOf(env, doc.name, doc.values, doc.fallback));
}

/** A comma-separated list; undefined when unset. A secret's value never goes into an error message. */
export function listSetting(doc: Described & { shown: string; secret?: boolean }): Setting<string[] | undefined, false> {
  return setting(row(doc, doc.shown), (env) => list(env, doc.name, { secret: doc.secret ?? false }));
}

/** A comma-separated list; empty when unset. */
export function itemsSetting(doc: Described & { shown: string; secret?: boolean }): Setting<string[], false> {
  return setting(row(doc, doc.shown), (env) => list(env, doc.name, { secret: doc.secret ?? false }) ?? []);
}

/** Text taken as it is (a file, a URL checked later); undefined when unset. */
export function textSetting(doc: Described & { shown: string }): Setting<string | undefined, false> {
  return setting(row(doc, doc.shown), (env) => raw(env, doc.name));
}
