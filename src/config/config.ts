import path from 'node:path';
import { type Env } from './parse.js';
import { readSection, sectionVariables, type ConfigVariable, type SettingsOf } from './variables.js';
import { AUTH } from './sections/auth.js';
import { BASH } from './sections/bash.js';
import { HTTP } from './sections/http.js';
import { LIMITS } from './sections/limits.js';
import { TELEMETRY } from './sections/telemetry.js';
import { TOOLS } from './sections/tools.js';
import { UPSTREAMS } from './sections/upstreams.js';

export { ConfigError } from './parse.js';
export type { OAuthConfig } from './sections/auth.js';
export type { ConfigVariable } from './variables.js';

/**
 * The configuration's sections. Each variable is declared once, in its section's file: its
 * type, parsing, error text and docs row (`npm run docs`). A function that needs a section takes
 * its type (`HttpSettings`, `LimitsSettings`, ...), so a `Config` passes as it is.
 */
export const SECTIONS = { http: HTTP, tools: TOOLS, limits: LIMITS, bash: BASH, auth: AUTH, upstreams: UPSTREAMS, telemetry: TELEMETRY } as const;

/** How the server listens and answers (PORT, HOST, connections, the Host, Origin and CORS guards). */
export type HttpSettings = SettingsOf<typeof HTTP>;
/** Which tools are served, and the workspace they work in. */
export type ToolsSettings = SettingsOf<typeof TOOLS>;
/** How many calls run and wait, for how long, and how often a caller may ask. */
export type LimitsSettings = SettingsOf<typeof LIMITS>;
/** Where and how Bash runs. */
export type BashSettings = SettingsOf<typeof BASH>;
/** Keys, permission rules and OAuth. */
export type AuthSettings = SettingsOf<typeof AUTH>;
/** The upstream MCP servers. */
export type UpstreamsSettings = SettingsOf<typeof UPSTREAMS>;
/** Logs and traces. */
export type TelemetrySettings = SettingsOf<typeof TELEMETRY>;

/** Everything the service reads from its environment, validated: every section's fields. Nothing else reads `process.env`. */
export type Config = HttpSettings & ToolsSettings & LimitsSettings & BashSettings & AuthSettings & UpstreamsSettings & TelemetrySettings;

/**
 * Every variable `loadConfig` reads, in the order of the configuration table (section by
 * section); a test fails when `loadConfig` reads one that is not here, or this names one it never reads.
 */
export const CONFIG_VARIABLES: readonly ConfigVariable[] = Object.values(SECTIONS).flatMap(sectionVariables);

/** Reads and validates the configuration; throws `ConfigError` naming the first bad variable. */
export function loadConfig(env: Env = process.env, cwd = process.cwd()): Config {
  return Object.assign({}, ...Object.values(SECTIONS).map((section) => readSection(section, env, cwd))) as Config;
}

/** A warning for a workspace set explicitly to the root of the file system, or undefined. */
export function workspaceWarning(config: Pick<Config, 'workspace'>): string | undefined {
  const dir = path.resolve(config.workspace);
  if (dir !== path.parse(dir).root) return undefined;
  return `TOOLPORT_WORKSPACE is ${dir}: the file tools and Bash may touch every file the server's user can`;
}
