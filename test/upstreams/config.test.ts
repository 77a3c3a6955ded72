import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { loadUpstreams, parseUpstreams, secretValues, UpstreamConfigError, type UpstreamSpec } from '#src/upstreams/config.js';
import { temporaryDirectory } from '../support/workspace.js';

const TOKEN = 'ghp_secret_token_0123456789';

function parse(servers: Record<string, unknown>, env: Record<string, string | undefined> = {}): UpstreamSpec[] {
  return parseUpstreams(JSON.stringify({ mcpServers: servers }), env);
}

/** The message of the error parsing `text` raises; fails when it parses, or when the message shows a secret. */
function failure(text: string, env: Record<string, string | undefined> = {}): string {
  let message: string | undefined;
  try {
    parseUpstreams(text, env);
  } catch (err) {
    assert.ok(err instanceof UpstreamConfigError, String(err));
    message = err.message;
  }
  assert.ok(message !== undefined, 'the file parsed');
  for (const secret of [TOKEN, ...Object.values(env)]) if (secret !== undefined && secret.length > 3) assert.ok(!message.includes(secret), message);
  return message;
}

const serverFailure = (server: unknown, env: Record<string, string | undefined> = {}): string =>
  failure(JSON.stringify({ mcpServers: { github: server } }), env);

describe('parseUpstreams', () => {
  it('reads a pasted Claude Desktop file as it is, other top-level keys ignored', () => {
    const specs = parseUpstreams(
      JSON.stringify({
        globalShortcut: 'Ctrl+Space',
        preferences: { quickEntry: true },
        mcpServers: {
          github: { command: 'npx', args: ['-y', '@modelcontextprotocol/server-github'], env: { GITHUB_PERSONAL_ACCESS_TOKEN: TOKEN } },
          remote: { type: 'http', url: 'https://mcp.example.com/mcp', headers: { Authorization: 'Bearer ${API_TOKEN}' } },
        },
      }),
      { API_TOKEN: 'api-token-abcdefgh' },
    );
    assert.deepEqual(specs, [
      {
        name: 'github',
        prefix: 'github',
        separator: '__',
        startup: 'eager',
        timeoutMs: undefined,
        maxConcurrency: 8,
        maxResultBytes: 8 * 1024 * 1024,
        tools: undefined,
        variableValues: [],
        transport: 'stdio',
        command: 'npx',
        args: ['-y', '@modelcontextprotocol/server-github'],
        env: { GITHUB_PERSONAL_ACCESS_TOKEN: TOKEN },
        cwd: undefined,
        network: true,
      },
      {
        name: 'remote',
        prefix: 'remote',
        separator: '__',
        startup: 'eager',
        timeoutMs: undefined,
        maxConcurrency: 8,
        maxResultBytes: 8 * 1024 * 1024,
        tools: undefined,
        variableValues: ['api-token-abcdefgh'],
        transport: 'http',
        url: 'https://mcp.example.com/mcp',
        headers: { Authorization: 'Bearer api-token-abcdefgh' },
      },
    ]);
  });

  it("takes toolport's own keys, keeps the file's order and leaves disabled servers out", () => {
    const specs = parse({
      zeta: {
        command: 'z',
        prefix: 'z',
        separator: '-',
        startup: 'lazy',
        timeoutMs: 5000,
        maxConcurrency: 2,
        maxResultBytes: 1024,
        tools: { include: ['a', 'b'], exclude: ['b'] },
      },
      off: { command: 'x', disabled: true, env: { MISSING: '${NOT_SET}' } },
      alpha: { type: 'streamable-http', url: 'http://127.0.0.1:9/mcp', prefix: 'al', disabled: false },
    });
    assert.deepEqual(
      specs.map((s) => [s.name, s.prefix, s.separator, s.startup, s.timeoutMs, s.maxConcurrency, s.maxResultBytes, s.tools]),
      [
        ['zeta', 'z', '-', 'lazy', 5000, 2, 1024, { include: ['a', 'b'], exclude: ['b'] }],
        ['alpha', 'al', '__', 'eager', undefined, 8, 8 * 1024 * 1024, undefined],
      ],
    );
  });

  it('takes "network": false for a stdio server, which may use the network without it', () => {
    const specs = parse({ closed: { command: 'x', network: false }, open: { command: 'y', prefix: 'o' } });
    assert.deepEqual(
      specs.map((s) => [s.name, s.transport === 'stdio' && s.network]),
      [
        ['closed', false],
        ['open', true],
      ],
    );
  });

  it('expands ${VAR} and ${VAR:-default} in command, args, env, cwd, url and headers; a lone $ stays', () => {
    const env = { HOME_DIR: '/home/me', TOKEN, EMPTY: '' };
    const [stdio, http] = parse(
      {
        s: {
          command: '${HOME_DIR}/bin/server',
          args: ['--token=${TOKEN}', '${MISSING:-fallback}', '${EMPTY:-used-when-empty}', 'cost: $5', '${EMPTY}'],
          env: { T: '${TOKEN}' },
          cwd: '${HOME_DIR}',
        },
        h: { url: 'https://${HOST:-mcp.example.com}/mcp', headers: { 'X-Api-Key': '${TOKEN}' } },
      },
      env,
    );
    assert.ok(stdio?.transport === 'stdio' && http?.transport === 'http');
    assert.equal(stdio.command, '/home/me/bin/server');
    assert.deepEqual(stdio.args, [`--token=${TOKEN}`, 'fallback', 'used-when-empty', 'cost: $5', '']);
    assert.deepEqual(stdio.env, { T: TOKEN });
    assert.equal(stdio.cwd, '/home/me');
    assert.equal(http.url, 'https://mcp.example.com/mcp');
    assert.deepEqual(http.headers, { 'X-Api-Key': TOKEN });
  });

  it('keeps keys such as __proto__ as plain keys', () => {
    const [spec] = parseUpstreams('{"mcpServers": {"s": {"command": "x", "env": {"__proto__": "value-of-proto"}}}}', {});
    assert.ok(spec?.transport === 'stdio');
    assert.deepEqual(Object.keys(spec.env), ['__proto__']);
    assert.equal(Object.getPrototypeOf(spec.env), Object.prototype);
  });

  it('refuses a file that is not JSON, saying where, without quoting it', () => {
    assert.equal(failure(`{"mcpServers": {"github": {"env": {"T": `), 'The upstreams file is not valid JSON (it ends too early).');
    assert.equal(
      failure(`{"mcpServers": {\n  "github": {"env": {"T": "${TOKEN}",}}}}`),
      'The upstreams file is not valid JSON: expected double-quoted property name (line 2, column 57).',
    );
    assert.equal(failure(`{"mcpServers": {"github": {"env": {"T": ${TOKEN}}}}}`), 'The upstreams file is not valid JSON.');
  });

  it('refuses a file without an mcpServers object', () => {
    assert.equal(failure('[]'), 'The upstreams file must hold a JSON object with an "mcpServers" object.');
    assert.equal(failure('{"servers": {}}'), 'The upstreams file has no "mcpServers" object.');
    assert.equal(failure('{"mcpServers": []}'), 'The upstreams file: "mcpServers" must be an object of servers by name.');
  });

  it('refuses a file over 1 MiB', () => {
    assert.equal(failure(`{"mcpServers": {}, "pad": "${'x'.repeat(1024 * 1024)}"}`), 'The upstreams file is larger than 1 MiB.');
  });

  it('refuses more than 64 servers', () => {
    const servers = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`s${i}`, { command: 'x' }]));
    assert.equal(failure(JSON.stringify({ mcpServers: servers })), 'The upstreams file names 65 servers; at most 64 are supported.');
  });

  it('refuses a server with an empty name, or an entry that is not an object', () => {
    assert.equal(failure('{"mcpServers": {"": {"command": "x"}}}'), 'The upstreams file: a server in "mcpServers" has an empty name.');
    assert.equal(serverFailure('npx server'), 'Upstream "github": the entry must be an object.');
  });

  it('refuses an unknown key, naming it and the accepted ones', () => {
    assert.equal(
      serverFailure({ command: 'x', autoApprove: [] }),
      'Upstream "github": unknown key "autoApprove" (accepted: type, command, args, env, cwd, url, headers, disabled, prefix, separator, startup, timeoutMs, maxConcurrency, maxResultBytes, tools, network).',
    );
  });

  it('refuses the legacy SSE transport and an unknown type', () => {
    assert.equal(
      serverFailure({ type: 'sse', url: 'https://x.example/sse' }),
      'Upstream "github": "type" is "sse": the legacy SSE transport is not supported; use the server\'s Streamable HTTP endpoint ("type": "http").',
    );
    assert.equal(serverFailure({ type: 'ws', url: 'https://x.example' }), 'Upstream "github": "type" must be "stdio", "http" or "streamable-http".');
  });

  it('needs exactly one of command and url, agreeing with type', () => {
    assert.equal(serverFailure({}), 'Upstream "github": give "command" (a stdio server) or "url" (a Streamable HTTP server).');
    assert.equal(serverFailure({ command: 'x', url: 'https://x.example' }), 'Upstream "github": "command" and "url" exclude each other; give one.');
    assert.equal(
      serverFailure({ type: 'stdio', url: 'https://x.example' }),
      'Upstream "github": "type" is "stdio" but the entry has "url"; a stdio server has "command".',
    );
    assert.equal(serverFailure({ type: 'http', command: 'x' }), 'Upstream "github": "type" is "http" but the entry has "command"; an HTTP server has "url".');
  });

  it('refuses keys of the other transport', () => {
    assert.equal(serverFailure({ url: 'https://x.example', env: {} }), 'Upstream "github": "env" applies to a "command" server only.');
    assert.equal(serverFailure({ command: 'x', headers: {} }), 'Upstream "github": "headers" applies to a "url" server only.');
    assert.equal(
      serverFailure({ url: 'https://x.example', startup: 'lazy' }),
      'Upstream "github": "startup": "lazy" applies to a "command" server only (an HTTP server is listed at start-up).',
    );
  });

  it('refuses fields of the wrong type, naming the field', () => {
    const cases: Array<[unknown, string]> = [
      [{ command: '' }, '"command" must be a non-empty string'],
      [{ command: 7 }, '"command" must be a non-empty string'],
      [{ command: 'x', args: 'a b' }, '"args" must be an array of strings'],
      [{ command: 'x', args: [1] }, '"args" must be an array of strings'],
      [{ command: 'x', env: [] }, '"env" must be an object of strings'],
      [{ command: 'x', env: { PORT: 80 } }, 'env.PORT must be a string'],
      [{ command: 'x', env: { 'A=B': 'c' } }, '"env" has "A=B", which is not a variable name (non-empty, without "=" or NUL)'],
      [{ command: 'x', args: ['a\u0000b'] }, 'args[0] must not contain a NUL character'],
      [{ command: 'x', cwd: '' }, '"cwd" must be a non-empty string'],
      [{ command: 'x', disabled: 'yes' }, '"disabled" must be true or false'],
      [{ command: 'x', network: 'none' }, '"network" must be true or false'],
      [{ url: 'https://x.example', network: false }, '"network" applies to a "command" server only'],
      [{ url: '' }, '"url" must be a non-empty string'],
      [{ url: 'https://x.example', headers: { 'Bad Name': 'v' } }, '"headers" has "Bad Name", which is not a header name'],
      [{ url: 'https://x.example', headers: { 'X-Key': 'a\r\nInjected: 1' } }, 'headers.X-Key must not contain line breaks or NUL'],
      [{ command: 'x', startup: 'later' }, '"startup" must be "eager" or "lazy"'],
      [{ command: 'x', timeoutMs: 0 }, '"timeoutMs" must be a whole number of milliseconds from 1 to 3600000'],
      [{ command: 'x', timeoutMs: 1.5 }, '"timeoutMs" must be a whole number of milliseconds from 1 to 3600000'],
      [{ command: 'x', maxConcurrency: 0 }, '"maxConcurrency" must be a whole number from 1 to 1024'],
      [{ command: 'x', maxResultBytes: 1023 }, '"maxResultBytes" must be a whole number of bytes from 1024 to 33554432 (32 MiB)'],
      [{ url: 'https://x.example', maxResultBytes: 32 * 1024 * 1024 + 1 }, '"maxResultBytes" must be a whole number of bytes from 1024 to 33554432 (32 MiB)'],
      [{ command: 'x', maxResultBytes: '8 MiB' }, '"maxResultBytes" must be a whole number of bytes from 1024 to 33554432 (32 MiB)'],
      [{ command: 'x', tools: ['a'] }, '"tools" must be an object with "include" and/or "exclude", each an array of tool names'],
      [{ command: 'x', tools: { only: ['a'] } }, '"tools" must be an object with "include" and/or "exclude", each an array of tool names'],
      [{ command: 'x', tools: { exclude: [''] } }, '"tools" must be an object with "include" and/or "exclude", each an array of tool names'],
      [{ command: 'x', tools: { include: [] } }, '"tools.include" is empty, so no tool would be served; to turn the server off, set "disabled": true'],
    ];
    for (const [server, problem] of cases) assert.equal(serverFailure(server), `Upstream "github": ${problem}.`, JSON.stringify(server));
  });

  it('refuses a URL that is malformed or not http(s), without showing it', () => {
    assert.equal(serverFailure({ url: 'https://${TOKEN}:443:x/' }, { TOKEN }), 'Upstream "github": "url" is not a valid URL.');
    assert.equal(serverFailure({ url: 'ftp://files.example/mcp' }), 'Upstream "github": "url" must use http: or https: (it uses ftp:).');
  });

  it('stops at a variable that is not set, naming the field and the variable, never a value', () => {
    assert.equal(
      serverFailure({ command: 'x', env: { GITHUB_TOKEN: '${GITHUB_TOKEN}' } }, { OTHER: TOKEN }),
      'Upstream "github": env.GITHUB_TOKEN names the variable GITHUB_TOKEN, which is not set.',
    );
    assert.equal(serverFailure({ command: 'x', args: ['a', '${ARG}'] }), 'Upstream "github": args[1] names the variable ARG, which is not set.');
    assert.equal(
      serverFailure({ url: 'https://x.example', headers: { Authorization: 'Bearer ${KEY}' } }),
      'Upstream "github": headers.Authorization names the variable KEY, which is not set.',
    );
    assert.equal(serverFailure({ command: '${BIN}' }), 'Upstream "github": "command" names the variable BIN, which is not set.');
  });

  it('refuses a name that cannot be a prefix, suggesting "prefix"', () => {
    assert.equal(
      failure(JSON.stringify({ mcpServers: { 'my server': { command: 'x' } } })),
      'Upstream "my server": the name is not a valid tool-name prefix (letters, digits, _ and - only); set "prefix", e.g. "prefix": "my_server".',
    );
    assert.equal(parse({ 'my server': { command: 'x', prefix: 'mine' } })[0]?.prefix, 'mine');
  });

  it('refuses a prefix or separator with other characters, or too long to leave room for a tool name', () => {
    assert.equal(
      serverFailure({ command: 'x', prefix: 'git.hub' }),
      'Upstream "github": "prefix" may hold only letters, digits, _ and - (tool names must match ^[a-zA-Z0-9_-]{1,64}$).',
    );
    assert.equal(serverFailure({ command: 'x', separator: '.' }), 'Upstream "github": "separator" must be a string of letters, digits, _ and - only.');
    assert.equal(
      serverFailure({ command: 'x', prefix: 'p'.repeat(62) }),
      'Upstream "github": "prefix" and "separator" together are 64 characters; tool names are at most 64, so they may take at most 63.',
    );
  });

  it('refuses two servers with the same prefix', () => {
    assert.equal(
      failure(JSON.stringify({ mcpServers: { a: { command: 'x', prefix: 'gh' }, b: { command: 'y', prefix: 'gh' } } })),
      'Upstreams "a" and "b" both use the prefix "gh"; give one of them another "prefix".',
    );
    assert.equal(
      failure(JSON.stringify({ mcpServers: { gh: { command: 'x' }, b: { command: 'y', prefix: 'gh' } } })),
      'Upstreams "gh" and "b" both use the prefix "gh"; give one of them another "prefix".',
    );
    assert.equal(
      failure(JSON.stringify({ mcpServers: { a: { command: 'x', prefix: 'gh', separator: '_' }, b: { command: 'y', prefix: 'gh' } } })),
      'Upstreams "a" and "b" both use the prefix "gh"; give one of them another "prefix".',
    );
  });

  it("refuses a server without a prefix beside any other, since its tools may take names in the other's namespace", () => {
    const message = (bare: string, first: string, second: string) =>
      `Upstreams "${first}" and "${second}" overlap: "${bare}" has "prefix": "", so any of its tools may take a name that belongs to the other; ` +
      `an upstream without a prefix must be the only one, so give "${bare}" a "prefix".`;
    assert.equal(failure(JSON.stringify({ mcpServers: { github: { command: 'x' }, misc: { command: 'y', prefix: '' } } })), message('misc', 'github', 'misc'));
    assert.equal(failure(JSON.stringify({ mcpServers: { misc: { command: 'y', prefix: '' }, github: { command: 'x' } } })), message('misc', 'misc', 'github'));
    assert.equal(failure(JSON.stringify({ mcpServers: { a: { command: 'x', prefix: '' }, b: { command: 'y', prefix: '' } } })), message('a', 'a', 'b'));
    assert.deepEqual(
      parse({ misc: { command: 'y', prefix: '', separator: '-' } }).map((spec) => [spec.prefix, spec.separator]),
      [['', '']],
      'alone, it is served without a prefix or separator',
    );
    assert.equal(parse({ misc: { command: 'y', prefix: '' }, off: { command: 'z', disabled: true } }).length, 1, 'a disabled server does not count');
  });

  it("refuses servers whose namespace (prefix + separator) begins another's, whichever comes first", () => {
    const message = (first: string, second: string) =>
      `Upstreams "${first}" and "${second}" overlap: every tool name of "gh_admin" ("gh_admin__…") begins with "gh_", ` +
      'the namespace of "gh" (prefix "gh" and separator "_"), so either could list the other\'s names; ' +
      'change the "prefix" or "separator" of one so that neither namespace begins the other.';
    const gh = { command: 'x', separator: '_' };
    const admin = { command: 'y' };
    assert.equal(failure(JSON.stringify({ mcpServers: { gh, gh_admin: admin } })), message('gh', 'gh_admin'));
    assert.equal(failure(JSON.stringify({ mcpServers: { gh_admin: admin, gh } })), message('gh_admin', 'gh'));
    assert.equal(
      failure(JSON.stringify({ mcpServers: { a: { command: 'x', prefix: 'git', separator: 'hub' }, b: { command: 'y', prefix: 'github', separator: '-' } } })),
      'Upstreams "a" and "b" overlap: every tool name of "b" ("github-…") begins with "github", the namespace of "a" (prefix "git" and separator "hub"), ' +
        'so either could list the other\'s names; change the "prefix" or "separator" of one so that neither namespace begins the other.',
    );
    // Prefixes that merely begin one another are fine while the separators keep the namespaces apart.
    assert.equal(parse({ gh: { command: 'x' }, gh_admin: { command: 'y' }, ghx: { command: 'z' }, g: { command: 'w', separator: '-' } }).length, 4);
  });

  it('compares every pair of the most servers a file may name, and names the pair that overlaps', () => {
    const servers: Record<string, unknown> = Object.fromEntries(Array.from({ length: 64 }, (_, i) => [`s${i}`, { command: 'x' }]));
    assert.equal(parseUpstreams(JSON.stringify({ mcpServers: servers }), {}).length, 64);
    servers['s63'] = { command: 'x', prefix: 's4', separator: '2_' };
    assert.equal(
      failure(JSON.stringify({ mcpServers: servers })),
      'Upstreams "s42" and "s63" overlap: every tool name of "s42" ("s42__…") begins with "s42_", the namespace of "s63" (prefix "s4" and separator "2_"), ' +
        'so either could list the other\'s names; change the "prefix" or "separator" of one so that neither namespace begins the other.',
    );
  });

  it('never puts a variable value into a message, whatever the value', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 4 }), (value) => {
        const env = { SECRET: `${value}-secret` };
        for (const server of [
          { url: '${SECRET}' },
          { url: 'https://x.example/${SECRET}', headers: { 'X-A': '${SECRET}\n' } },
          { command: 'x', args: ['${SECRET}\u0000'] },
        ]) {
          try {
            parse({ s: server }, env);
          } catch (err) {
            assert.ok(err instanceof UpstreamConfigError);
            assert.ok(!err.message.includes(env.SECRET), err.message);
          }
        }
      }),
    );
  });
});

describe('loadUpstreams', () => {
  it('reads the file relative to the working directory', async (t) => {
    const dir = await temporaryDirectory(t);
    await writeFile(path.join(dir, 'upstreams.json'), '\uFEFF{"mcpServers": {"s": {"command": "x"}}}');
    const specs = await loadUpstreams('upstreams.json', {}, dir);
    assert.deepEqual(
      specs.map((s) => s.name),
      ['s'],
    );
  });

  it('names the file in its messages', async (t) => {
    const dir = await temporaryDirectory(t);
    const file = path.join(dir, 'upstreams.json');
    await writeFile(file, '{"mcpServers": 1}');
    await assert.rejects(loadUpstreams(file, {}), {
      name: 'UpstreamConfigError',
      message: `The upstreams file ${JSON.stringify(file)}: "mcpServers" must be an object of servers by name.`,
    });
  });

  it('refuses a missing file, a directory and a file over 1 MiB', async (t) => {
    const dir = await temporaryDirectory(t);
    const missing = path.join(dir, 'missing.json');
    await assert.rejects(loadUpstreams(missing, {}), {
      name: 'UpstreamConfigError',
      message: `Cannot read the upstreams file ${JSON.stringify(missing)}: no such file.`,
    });
    await mkdir(path.join(dir, 'folder'));
    await assert.rejects(loadUpstreams('folder', {}, dir), {
      message: `Cannot read the upstreams file ${JSON.stringify(path.join(dir, 'folder'))}: it is a directory.`,
    });
    const big = path.join(dir, 'big.json');
    await writeFile(big, ' '.repeat(1024 * 1024 + 1));
    await assert.rejects(loadUpstreams(big, {}), { message: `Cannot read the upstreams file ${JSON.stringify(big)}: it is larger than 1 MiB.` });
  });
});

describe('secretValues', () => {
  it('lists env and header values, URL passwords and expanded variables, longest first, short ones left out', () => {
    const specs = parse(
      {
        s: { command: 'x', args: ['--key', '${ARG_KEY}'], env: { TOKEN, DEBUG: '1', SAME: TOKEN } },
        h: { url: 'https://user:p%40ssword-1@x.example/mcp', headers: { Authorization: 'Bearer header-secret' } },
      },
      { ARG_KEY: 'argument-secret-value' },
    );
    assert.deepEqual(secretValues(specs), [TOKEN, 'argument-secret-value', 'Bearer header-secret', 'p%40ssword-1', 'p@ssword-1']);
  });
});
