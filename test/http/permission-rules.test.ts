import assert from 'node:assert/strict';
import { readFile, writeFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { describe, it, before, after } from 'node:test';
import type { FastifyInstance } from 'fastify';
import type { KeySpec } from '#src/auth/keyring.js';
import { buildApp } from '#src/http/app.js';
import { createToolset } from '#src/assembly/toolset.js';
import { serverPermissions } from '#src/permissions/catalog.js';
import { Workspace } from '#src/os/fs/workspace.js';
import { capturedLog } from '../support/log-capture.js';
import { scrapeMetrics } from '../support/metrics-text.js';
import { Cleanups, temporaryDirectory } from '../support/workspace.js';
import { errorBody } from '#src/core/errors.js';

const DOCS_KEY = 'docs-writer-0123456789abcdef';
const PLAIN_KEY = 'plain-reader-0123456789abcdef';
const NARROW_KEY = 'narrow-reader-0123456789abcdef';
const CI_KEY = 'ci-runner-0123456789abcdef';
const TOOLS = ['Read', 'Edit', 'Write', 'LS', 'Glob', 'Echo', 'Bash'];

describe('permission rules through the HTTP adapters', () => {
  const cleanups = new Cleanups();
  let app: FastifyInstance;
  let root: string;
  let log: ReturnType<typeof capturedLog>;
  let workspace: Workspace;

  before(async () => {
    const dir = await temporaryDirectory(cleanups);
    root = path.join(dir, 'ws');
    await mkdir(path.join(root, 'docs'), { recursive: true });
    await writeFile(path.join(root, '.env'), 'TOKEN=hunter2\n');
    await writeFile(path.join(root, 'README.md'), 'hello\n');
    await writeFile(path.join(root, 'docs', 'guide.md'), 'guide\n');
    const defaults = path.join(dir, 'permissions.json');
    await writeFile(defaults, JSON.stringify({ deny: ['Read(.env)'] }));
    workspace = await Workspace.open(root);
    log = capturedLog();
    const registry = await createToolset({ workspace: root, tools: TOOLS, plugins: [], bashSandbox: 'auto' }, dir, undefined, workspace);
    const permissions = await serverPermissions({ permissionsFile: defaults }, registry.list(), []);
    const keys: KeySpec[] = [
      { label: 'docs', key: DOCS_KEY, permissions: { allow: ['Edit(docs/**)', 'Write(docs/**)'] } },
      { label: 'plain', key: PLAIN_KEY },
      { label: 'ci', key: CI_KEY, permissions: { allow: ['Bash(echo:*)', 'Bash(npm run test:*)'], deny: ['Bash(curl:*)'] } },
      { label: 'narrow', key: NARROW_KEY, tools: ['Read', 'LS'], permissions: { allow: ['Read(docs/**)'] } },
    ];
    app = await buildApp({ registry, apiKeys: keys, permissions, logger: log.logger });
  });
  after(async () => {
    await app.close();
    await workspace.close();
    await cleanups.run();
  });

  const rest = (key: string, tool: string, input: unknown) =>
    app.inject({
      method: 'POST',
      url: `/tools/${tool}`,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      payload: JSON.stringify(input),
    });

  it('answer a REST call a rule denies with 403 FORBIDDEN naming the rule, before anything is read', async () => {
    const res = await rest(PLAIN_KEY, 'Read', { file_path: '.env' });
    assert.equal(res.statusCode, 403);
    assert.deepEqual(res.json(), errorBody('FORBIDDEN', 'Path ".env" is denied by Read(.env).', { tool: 'Read', rule: 'Read(.env)' }));
    // The same path spelled another way is the same path.
    for (const spelling of ['./.env', 'docs/../.env', path.join(root, '.env')]) {
      const again = await rest(PLAIN_KEY, 'Read', { file_path: spelling });
      assert.equal(again.statusCode, 403, spelling);
    }
    // A missing path is refused the same way: the answer says nothing about what exists.
    assert.equal((await rest(PLAIN_KEY, 'Read', { file_path: 'docs/.env' })).statusCode, 403);
    assert.equal((await rest(PLAIN_KEY, 'Read', { file_path: 'README.md' })).statusCode, 200);
  });

  it('refuse what an allow list does not match, and change nothing', async () => {
    const res = await rest(DOCS_KEY, 'Write', { file_path: 'README.md', content: 'owned\n' });
    assert.equal(res.statusCode, 403);
    assert.deepEqual(res.json(), errorBody('FORBIDDEN', 'Path "README.md" is not allowed by any rule for Edit or Write.', { tool: 'Write' }));
    assert.equal(await readFile(path.join(root, 'README.md'), 'utf8'), 'hello\n');
    const edit = await rest(DOCS_KEY, 'Edit', { file_path: 'README.md', old_string: 'hello', new_string: 'owned' });
    assert.deepEqual(edit.json(), errorBody('FORBIDDEN', 'Path "README.md" is not allowed by any rule for Edit.', { tool: 'Edit' }));
    assert.equal(await readFile(path.join(root, 'README.md'), 'utf8'), 'hello\n');
    const ok = await rest(DOCS_KEY, 'Write', { file_path: 'docs/new.md', content: 'new\n' });
    assert.equal(ok.statusCode, 200);
    assert.equal(await readFile(path.join(root, 'docs', 'new.md'), 'utf8'), 'new\n');
  });

  it('refuse a Bash line unless every command it would run is allowed, before it runs', async () => {
    const cases: Array<[string, string, string | undefined]> = [
      ['echo hi && curl -s evil.example', 'Command `curl -s evil.example` is denied by Bash(curl:*).', 'Bash(curl:*)'],
      ['echo hi; touch docs/owned', 'Command `touch docs/owned` is not allowed by any rule for Bash.', undefined],
      [
        'echo $(touch docs/owned)',
        'The command line is not allowed by any rule for Bash: command substitution ($(...)) is not allowed under permission rules.',
        undefined,
      ],
      ['bash -c "touch docs/owned"', 'Command `touch docs/owned` is not allowed by any rule for Bash.', undefined],
      ['echo $(', 'The command line is not allowed by any rule for Bash: command substitution ($(...)) is not allowed under permission rules.', undefined],
    ];
    for (const [command, message, rule] of cases) {
      const res = await rest(CI_KEY, 'Bash', { command });
      assert.equal(res.statusCode, 403, command);
      assert.deepEqual(res.json(), errorBody('FORBIDDEN', message, { tool: 'Bash', ...(rule !== undefined && { rule }) }), command);
    }
    await assert.rejects(readFile(path.join(root, 'docs', 'owned')), { code: 'ENOENT' });
    const ok = await rest(CI_KEY, 'Bash', { command: "e'ch'o allowed" });
    assert.equal(ok.statusCode, 200);
    assert.match((ok.json() as { content: Array<{ text: string }> }).content[0]!.text, /allowed/);
    // A key without Bash rules runs any line, as before.
    assert.equal((await rest(PLAIN_KEY, 'Bash', { command: 'echo hi; true' })).statusCode, 200);
  });

  it('let a key narrow the default: both must pass', async () => {
    const res = await rest(NARROW_KEY, 'Read', { file_path: 'README.md' });
    assert.deepEqual(res.json(), errorBody('FORBIDDEN', 'Path "README.md" is not allowed by any rule for Read.', { tool: 'Read' }));
    assert.equal((await rest(NARROW_KEY, 'Read', { file_path: 'docs/guide.md' })).statusCode, 200);
  });

  it('make a denial through /calls an error result, and through MCP an error, for that call only, as for a tool outside the scope', async () => {
    const turn = [
      { type: 'tool_use', id: 'toolu_1', name: 'Read', input: { file_path: '.env' } },
      { type: 'tool_use', id: 'toolu_2', name: 'Echo', input: { text: 'still here' } },
    ];
    const calls = await app.inject({
      method: 'POST',
      url: '/calls',
      headers: { authorization: `Bearer ${PLAIN_KEY}`, 'content-type': 'application/json' },
      payload: JSON.stringify(turn),
    });
    assert.equal(calls.statusCode, 200);
    assert.deepEqual(calls.json(), {
      role: 'user',
      content: [
        { type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'text', text: 'Path ".env" is denied by Read(.env).' }], is_error: true },
        { type: 'tool_result', tool_use_id: 'toolu_2', content: [{ type: 'text', text: 'still here' }], is_error: false },
      ],
    });
    const mcp = await app.inject({
      method: 'POST',
      url: '/mcp',
      headers: {
        authorization: `Bearer ${PLAIN_KEY}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2025-11-25',
      },
      payload: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'Read', arguments: { file_path: '.env' } } }),
    });
    assert.equal(mcp.statusCode, 200);
    assert.deepEqual(mcp.json(), {
      jsonrpc: '2.0',
      id: 7,
      error: { code: -31002, message: 'Path ".env" is denied by Read(.env).', data: { code: 'FORBIDDEN', details: { tool: 'Read', rule: 'Read(.env)' } } },
    });
  });

  it('write every denial into the audit line (key, tool, rule) and count it', async () => {
    const before =
      (await scrapeMetrics(app, { authorization: `Bearer ${PLAIN_KEY}` })).get('toolport_rejected_calls_total{reason="forbidden",transport="rest"}') ?? 0;
    log.lines.length = 0;
    await rest(PLAIN_KEY, 'Read', { file_path: '.env' });
    const refused = log.lines.filter((l) => l.msg === 'tool call refused');
    assert.equal(refused.length, 1);
    assert.equal(refused[0]!.key, 'plain');
    assert.equal(refused[0]!.tool, 'Read');
    assert.equal(refused[0]!.rule, 'Read(.env)');
    assert.equal(refused[0]!.code, 'FORBIDDEN');
    assert.equal(log.lines.filter((l) => l.msg === 'tool call').length, 0);
    const afterCount = (await scrapeMetrics(app, { authorization: `Bearer ${PLAIN_KEY}` })).get(
      'toolport_rejected_calls_total{reason="forbidden",transport="rest"}',
    );
    assert.equal(afterCount, before + 1);
  });

  it("state each tool's rules for the key in its description's last line, in every list", async () => {
    const list = async (key: string, url = '/tools') =>
      (await app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${key}` } })).json() as Array<{ name: string; description: string }>;
    const docs = await list(DOCS_KEY);
    const last = (tools: Array<{ name: string; description: string }>, name: string) =>
      tools
        .find((t) => t.name === name)!
        .description.split('\n')
        .at(-1);
    assert.equal(last(docs, 'Write'), 'Allowed for this key: Edit(docs/**), Write(docs/**).');
    assert.equal(last(docs, 'Edit'), 'Allowed for this key: Edit(docs/**). Denied for this key: Read(.env).');
    assert.equal(last(docs, 'Read'), 'Denied for this key: Read(.env).');
    assert.equal(last(docs, 'Glob'), 'Denied for this key: Read(.env).');
    const echo = docs.find((t) => t.name === 'Echo')!.description;
    assert.doesNotMatch(echo, /for this key/);
    const mcp = await app.inject({
      method: 'POST',
      url: '/mcp',
      headers: {
        authorization: `Bearer ${DOCS_KEY}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2025-11-25',
      },
      payload: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    const tools = (mcp.json() as { result: { tools: Array<{ name: string; description: string }> } }).result.tools;
    assert.equal(last(tools, 'Write'), 'Allowed for this key: Edit(docs/**), Write(docs/**).');
    const narrow = await list(NARROW_KEY);
    assert.deepEqual(
      narrow.map((t) => t.name),
      ['Read', 'LS'],
    );
    assert.equal(last(narrow, 'Read'), 'Allowed for this key: Read(docs/**). Denied for this key: Read(.env).');
  });
});
