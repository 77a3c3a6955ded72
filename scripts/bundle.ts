/**
 * The second half of `npm run build`. First the Perl helpers (the `.pl` files under src/: the
 * reaper and the lock helper), which tsc does not copy: each goes beside its compiled module in
 * dist/, and beside the bundles in dist/main/, since a module finds its helper in its own
 * directory (`new URL('./reaper.pl', import.meta.url)`) and in a bundle that is dist/main/.
 *
 * Then it bundles dist/main/run-server.js, what `node dist/server.js` loads, and
 * dist/main/run-cli.js, what the `toolport` command loads, with their dependencies, into those
 * files and the chunks they share or import later. Start-up loaded about a thousand modules (373 of them typebox's), and resolving,
 * reading and linking them was most of a cold start; a few bundled files load in a fraction of that. The rest of dist/ stays as tsc wrote it, for the
 * package's API and the command line.
 *
 * Left out, loaded from node_modules as before: packages that read files of their own at run
 * time (@fastify/swagger-ui's static files; pino's transports, started in worker threads by file
 * name), and ioredis, which only servers with TOOLPORT_REDIS_URL load.
 */
import { copyFile, readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { build } from 'esbuild';
import { BUNDLE_OPTIONS } from './bundle-options.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const SRC = path.join(ROOT, 'src');
const DIST = path.join(ROOT, 'dist');
const ENTRIES = ['dist/main/run-server.js', 'dist/main/run-cli.js'].map((entry) => path.join(ROOT, entry));
// esbuild's names for the chunks (and their source maps).
const CHUNK = /^chunk-[A-Z0-9]+\.js(\.map)?$/;

const helpers = (await readdir(SRC, { recursive: true })).filter((file) => file.endsWith('.pl')).sort();
const names = new Map<string, string>();
for (const helper of helpers) {
  // One directory beside the bundles holds them all, so two helpers of one name would collide there.
  const name = path.basename(helper);
  const other = names.get(name);
  if (other !== undefined) throw new Error(`src/${helper} and src/${other} would both be dist/main/${name}; rename one`);
  names.set(name, helper);
  await copyFile(path.join(SRC, helper), path.join(DIST, helper));
  await copyFile(path.join(SRC, helper), path.join(DIST, 'main', name));
}

// Both in place, with what they share and what they import only when needed (tracing, upstreams'
// clients, the command line's commands) in chunks beside them: a start reads and compiles what it
// runs, not 6 MB, and `toolport mcp` never loads the HTTP stack. Chunks of an earlier build go
// first. In dist/main itself, not a directory below, so that `../../package.json` (read by the
// version module) means the same from every file.
for (const stale of (await readdir(path.join(DIST, 'main'))).filter((file) => CHUNK.test(file))) await rm(path.join(DIST, 'main', stale));
await build({
  entryPoints: ENTRIES,
  outdir: path.join(DIST, 'main'),
  splitting: true,
  chunkNames: 'chunk-[hash]',
  allowOverwrite: true,
  ...BUNDLE_OPTIONS,
  sourcemap: true,
  sourcesContent: false,
  logLevel: 'warning',
});
