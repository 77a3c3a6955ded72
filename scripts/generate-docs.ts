/**
 * `npm run docs`: writes the reference tables of docs/ from the code they describe, between
 * `<!-- generated: NAME -->` and `<!-- end generated -->`: `config` (docs/configuration.md) from
 * `CONFIG_VARIABLES`, `errors` (docs/rest-api.md) from the error catalog. `--check` only compares:
 * it exits 1, naming the pages that differ and this command. test/docs.test.ts runs the check.
 */
import { readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { CONFIG_VARIABLES } from '../src/config/config.js';
import { ERROR_CODES, ErrorCatalog, JSON_RPC } from '../src/core/errors.js';

/** The repository's root. */
export const ROOT = path.resolve(import.meta.dirname, '..');
/** The command that regenerates the tables, for messages. */
export const DOCS_COMMAND = 'npm run docs';

const JSON_RPC_MEANINGS = new Map<number, string>([
  [JSON_RPC.PARSE_ERROR, 'parse error'],
  [JSON_RPC.INVALID_REQUEST, 'invalid request'],
  [JSON_RPC.METHOD_NOT_FOUND, 'method not found'],
  [JSON_RPC.INVALID_PARAMS, 'invalid params'],
  [JSON_RPC.INTERNAL_ERROR, 'internal error'],
]);

// A pipe inside a cell would split it in two.
const cell = (text: string): string => text.replace(/\|/g, '\\|');

/** The configuration table: every variable `loadConfig` reads, its default and what it does. */
export function configTable(): string {
  const rows = CONFIG_VARIABLES.map(({ name, default: fallback, meaning, see }) => {
    const more = see === undefined ? '' : ` ([more](${see}))`;
    return `| \`${name}\` | ${cell(fallback)} | ${cell(meaning)}${more} |`;
  });
  return ['| variable | default | meaning |', '| --- | --- | --- |', ...rows].join('\n');
}

/** The error table: every catalog code, its HTTP status, its JSON-RPC code and when a client gets it. */
export function errorTable(): string {
  const rows = ERROR_CODES.map((code) => {
    const { status, jsonRpc, summary } = ErrorCatalog[code];
    const meaning = JSON_RPC_MEANINGS.get(jsonRpc);
    return `| \`${code}\` | ${status} | ${jsonRpc}${meaning === undefined ? '' : ` (${meaning})`} | ${cell(summary)} |`;
  });
  return ['| code | HTTP status | JSON-RPC code | when |', '| --- | --: | --- | --- |', ...rows].join('\n');
}

/** Each generated block by its marker name. */
export const GENERATORS: Readonly<Record<string, () => string>> = { config: configTable, errors: errorTable };

const BLOCK = /(<!-- generated: ([a-z-]+) -->\n)[\s\S]*?(<!-- end generated -->)/g;

/**
 * The page with every generated block written afresh. Throws for a block whose name has no
 * generator, and for an opening marker without its end.
 */
export function renderPage(text: string, generators: Readonly<Record<string, () => string>> = GENERATORS): string {
  const opened = text.match(/<!-- generated: /g)?.length ?? 0;
  let closed = 0;
  const rendered = text.replace(BLOCK, (_block, open: string, name: string, end: string) => {
    closed += 1;
    const generate = generators[name];
    if (generate === undefined) throw new Error(`unknown generated block "${name}"; known: ${Object.keys(generators).join(', ')}`);
    return `${open}${generate()}\n${end}`;
  });
  if (closed !== opened) throw new Error('a "<!-- generated: NAME -->" marker has no "<!-- end generated -->" after it');
  return rendered;
}

/** README.md and every page of docs/, relative to the root. */
export async function pages(root = ROOT): Promise<string[]> {
  const docs = (await readdir(path.join(root, 'docs'))).filter((name) => name.endsWith('.md')).sort();
  return ['README.md', ...docs.map((name) => `docs/${name}`)];
}

/** The pages whose generated blocks differ from what the code gives now. */
export async function driftedPages(root = ROOT): Promise<string[]> {
  const drifted: string[] = [];
  for (const page of await pages(root)) {
    const text = await readFile(path.join(root, page), 'utf8');
    if (renderPage(text) !== text) drifted.push(page);
  }
  return drifted;
}

async function main(): Promise<void> {
  if (process.argv.includes('--check')) {
    const drifted = await driftedPages();
    if (drifted.length > 0) {
      console.error(`${drifted.join(', ')}: generated tables differ from the code: run ${DOCS_COMMAND}`);
      process.exitCode = 1;
    }
    return;
  }
  for (const page of await pages()) {
    const file = path.join(ROOT, page);
    const text = await readFile(file, 'utf8');
    const rendered = renderPage(text);
    if (rendered === text) continue;
    await writeFile(file, rendered);
    console.log(`wrote ${page}`);
  }
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === import.meta.filename) await main();
