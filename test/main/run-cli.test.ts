import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '#src/config/config.js';
import { Echo } from '#src/tools/index.js';
import { createToolset } from '#src/assembly/toolset.js';
import { kill, startServer } from '../support/server-process.js';
import { temporaryDirectory } from '../support/workspace.js';

// Each test spawns the real CLI (about half a second each on an idle machine), so they run a
// few at a time; the generous kill timeout is for a loaded CI machine, not a sleep.

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const WORKSPACE = await temporaryDirectory({ after }, 'toolport-cli-');
const FAILING_TOOLS = './test/fixtures/plugins/failing-tools.ts';

/** The parent's environment without anything toolport reads, plus a temporary workspace. */
function baseEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (value === undefined || key.startsWith('TOOLPORT_') || key.startsWith('NODE_TEST') || ['PORT', 'HOST', 'LOG_LEVEL'].includes(key)) continue;
    env[key] = value;
  }
  env.TOOLPORT_WORKSPACE = WORKSPACE;
  return env;
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `toolport <args>` from the repository root and collects its output. */
function cli(args: string[], env: Record<string, string> = {}, cwd = REPO): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', import.meta.resolve('tsx'), path.join(REPO, 'src/cli.ts'), ...args], {
      cwd,
      env: { ...baseEnv(), ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 120_000,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** What the CLI prints for a value: indented JSON and a newline. */
const printed = (value: unknown): string => `${JSON.stringify(value, null, 2)}\n`;

/** The tool list the CLI should print, computed in-process from the same configuration. */
async function expectedList(format: 'anthropic' | 'openai' | 'mcp', env: Record<string, string> = {}): Promise<unknown> {
  const registry = await createToolset(loadConfig({ TOOLPORT_WORKSPACE: WORKSPACE, ...env }), REPO);
  return JSON.parse(JSON.stringify(registry.toAPI(format))) as unknown;
}

describe('toolport CLI', { concurrency: 4 }, () => {
  test('list prints the tools in the Anthropic format by default and exits 0', async () => {
    const run = await cli(['list']);
    assert.equal(run.stderr, '');
    assert.equal(run.code, 0);
    const list = JSON.parse(run.stdout) as { name: string; input_schema: unknown }[];
    assert.deepEqual(list, await expectedList('anthropic'));
    assert.equal(run.stdout, printed(list));
    assert.deepEqual(
      list.find((t) => t.name === 'Echo'),
      {
        name: 'Echo',
        description: Echo.description,
        input_schema: {
          type: 'object',
          required: ['text'],
          properties: { text: { type: 'string', description: 'The text to return.' } },
          additionalProperties: false,
        },
      },
    );
  });

  test('list --format openai prints the tools as OpenAI function tools', async () => {
    const run = await cli(['list', '--format', 'openai']);
    assert.equal(run.code, 0);
    const list = JSON.parse(run.stdout) as { type: string; function: { name: string } }[];
    assert.deepEqual(list, await expectedList('openai'));
    assert.ok(list.every((t) => t.type === 'function'));
    assert.ok(list.some((t) => t.function.name === 'Echo'));
  });

  test('list --format mcp prints { tools } with annotations', async () => {
    const run = await cli(['list', '--format=mcp']);
    assert.equal(run.code, 0);
    assert.deepEqual(JSON.parse(run.stdout), await expectedList('mcp'));
  });

  test('list --format bad exits 2 and names the valid formats on stderr', async () => {
    const run = await cli(['list', '--format', 'bad']);
    assert.equal(run.code, 2);
    assert.equal(run.stdout, '');
    assert.ok(run.stderr.startsWith('toolport: unknown format "bad"; valid formats: anthropic, openai, openai-responses, mcp\n'), run.stderr);
    assert.match(run.stderr, /Usage: toolport <command>/);
  });

  test('call Echo with valid input prints the ToolResult and exits 0', async () => {
    const run = await cli(['call', 'Echo', '{"text":"hi"}']);
    assert.equal(run.stderr, '');
    assert.equal(run.stdout, printed({ content: [{ type: 'text', text: 'hi' }], isError: false }));
    assert.equal(run.code, 0);
  });

  test('call Echo with invalid input prints an INVALID_INPUT body and exits 1', async () => {
    const run = await cli(['call', 'Echo', '{}']);
    const message = 'Invalid input for tool "Echo":\n- $.text: is required';
    assert.equal(
      run.stdout,
      printed({
        content: [{ type: 'text', text: message }],
        isError: true,
        error: { code: 'INVALID_INPUT', message, details: { violations: [{ path: '$.text', message: 'is required' }] } },
      }),
    );
    assert.equal(run.code, 1);
  });

  test('call of an unknown tool prints a TOOL_NOT_FOUND body and exits 1', async () => {
    const run = await cli(['call', 'Nope', '{}']);
    assert.equal(run.code, 1);
    const body = JSON.parse(run.stdout) as { isError: boolean; error: { code: string; message: string; details: { tool: string; available: string[] } } };
    assert.equal(body.isError, true);
    assert.equal(body.error.code, 'TOOL_NOT_FOUND');
    assert.equal(body.error.details.tool, 'Nope');
    assert.ok(body.error.details.available.includes('Echo'));
    assert.equal(body.error.message, `Tool "Nope" not found. Available tools: ${body.error.details.available.join(', ')}.`);
  });

  test('call with input that is not JSON prints an INVALID_JSON body and exits 1', async () => {
    const run = await cli(['call', 'Echo', 'not json']);
    const message = 'The input is not valid JSON: not json';
    assert.equal(run.stdout, printed({ content: [{ type: 'text', text: message }], isError: true, error: { code: 'INVALID_JSON', message } }));
    assert.equal(run.code, 1);
  });

  test('call of a plug-in tool that reports isError prints its result and exits 1', async () => {
    const run = await cli(['call', 'ReportsError'], { TOOLPORT_PLUGINS: FAILING_TOOLS });
    assert.equal(run.stdout, printed({ content: [{ type: 'text', text: 'it did not work' }], isError: true }));
    assert.equal(run.code, 1);
  });

  test('call of a tool that throws prints only the ToolResult on stdout and exits 1', async () => {
    const run = await cli(['call', 'ThrowsError', '{}'], { TOOLPORT_PLUGINS: FAILING_TOOLS });
    assert.equal(run.code, 1);
    assert.equal(run.stdout, printed({ content: [{ type: 'text', text: 'Tool "ThrowsError" failed: disk on fire' }], isError: true }));
  });

  test('call with LOG_LEVEL=info keeps the log line off stdout', async () => {
    const run = await cli(['call', 'Echo', '{"text":"hi"}'], { LOG_LEVEL: 'info' });
    assert.equal(run.code, 0);
    assert.equal(run.stdout, printed({ content: [{ type: 'text', text: 'hi' }], isError: false }));
    assert.match(run.stderr, /"msg":"tool call"/);
  });

  test('an unknown command exits 2 and names it on stderr', async () => {
    const run = await cli(['frobnicate']);
    assert.equal(run.code, 2);
    assert.equal(run.stdout, '');
    assert.ok(run.stderr.startsWith('toolport: unknown command "frobnicate"\n'), run.stderr);
  });

  test('no command prints the usage and exits 2', async () => {
    const run = await cli([]);
    assert.equal(run.code, 2);
    assert.match(run.stdout, /^Usage: toolport <command>\n/);
  });

  test('openapi prints an OpenAPI 3.1.0 document with a /tools/Echo path', async () => {
    const run = await cli(['openapi']);
    assert.equal(run.code, 0);
    const document = JSON.parse(run.stdout) as { openapi: string; paths: Record<string, unknown> };
    assert.equal(document.openapi, '3.1.0');
    assert.ok(document.paths['/tools/Echo'], Object.keys(document.paths).join(', '));
    assert.equal(run.stdout, printed(document));
  });

  test('reload <pid> makes that server reload its keys file: a removed key is refused, and the server runs on', async (t) => {
    const dir = await temporaryDirectory(t, 'toolport-cli-keys-');
    const file = path.join(dir, 'keys.json');
    const admin = { label: 'admin', key: 'admin-secret-0123456789abcdef' };
    const bot = { label: 'bot', key: 'bot-secret-0123456789abcdef' };
    writeFileSync(file, JSON.stringify([admin, bot]));
    const server = await startServer({ TOOLPORT_API_KEYS_FILE: file, TOOLPORT_TOOLS: 'Echo', TOOLPORT_BASH_SANDBOX: 'false' });
    t.after(() => kill(server));
    const tools = (who: { key: string }) => fetch(`${server.url}/tools`, { headers: { authorization: `Bearer ${who.key}` } }).then((r) => r.status);
    assert.equal(await tools(bot), 200);
    writeFileSync(`${file}.new`, JSON.stringify([admin]));
    renameSync(`${file}.new`, file);

    const run = await cli(['reload', String(server.pid)]);
    assert.deepEqual(run, { code: 0, stdout: `Sent SIGHUP to process ${server.pid}; its log says whether the keys were reloaded or kept.\n`, stderr: '' });
    await server.logLine((l) => l.msg === 'API keys reloaded');
    assert.equal(await tools(bot), 401);
    assert.equal(await tools(admin), 200);
    assert.equal(server.child.exitCode, null);
  });

  test('reload without one process id exits 2 with the usage', async () => {
    for (const args of [[], ['abc'], ['0'], ['12', '13'], ['2147483648'], ['1.5']]) {
      const run = await cli(['reload', ...args]);
      assert.equal(run.code, 2, args.join(' '));
      assert.equal(run.stdout, '', args.join(' '));
      assert.ok(run.stderr.startsWith('toolport: reload needs the process id of the server: toolport reload <pid>\n'), run.stderr);
      assert.match(run.stderr, /Usage: toolport <command>/);
    }
  });

  test('reload of a process id no process has exits 1 and says so', async () => {
    // Above any pid_max Linux allows (2^22).
    const run = await cli(['reload', '2147483647']);
    assert.deepEqual(run, { code: 1, stdout: '', stderr: 'toolport: no process has the id 2147483647\n' });
  });

  test('mcp and serve started from / or the home directory without TOOLPORT_WORKSPACE refuse to start, saying to set it', async (t) => {
    const home = await temporaryDirectory(t, 'toolport-home-');
    for (const [command, cwd, what] of [
      ['mcp', '/', 'the root of the file system'],
      ['serve', '/', 'the root of the file system'],
      ['mcp', home, 'the home directory'],
    ] as const) {
      const run = await cli([command], { TOOLPORT_WORKSPACE: '', HOME: home, PORT: '0' }, cwd);
      assert.deepEqual(
        { code: run.code, stdout: run.stdout, stderr: run.stderr },
        {
          code: 1,
          stdout: '',
          stderr: `toolport: TOOLPORT_WORKSPACE is not set, and the working directory ${cwd} is ${what}, which toolport does not take as its workspace by default: set TOOLPORT_WORKSPACE (or pass --workspace) to the directory the tools may work in.\n`,
        },
        `${command} from ${cwd}`,
      );
    }
    // --workspace (or the variable) is honoured from anywhere.
    const listed = await cli(['list', '--workspace', WORKSPACE], { TOOLPORT_WORKSPACE: '', HOME: home }, '/');
    assert.equal(listed.code, 0, listed.stderr);
    assert.deepEqual(JSON.parse(listed.stdout), await expectedList('anthropic'));
  });

  test('a configuration error (PORT=abc) exits 1 with a message naming PORT', async () => {
    const run = await cli(['list'], { PORT: 'abc' });
    assert.equal(run.code, 1);
    assert.equal(run.stdout, '');
    assert.equal(run.stderr, 'toolport: Invalid PORT: expected an integer from 0 to 65535, got "abc"\n');
  });
});
