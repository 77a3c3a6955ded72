import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import { ApiKeysError, loadApiKeys } from '#src/config/api-keys.js';
import { temporaryDirectory } from '../support/workspace.js';

const KEYS = path.resolve(import.meta.dirname, '../fixtures/keys');
const SERVED = ['Read', 'Glob', 'Grep', 'Echo'];

/** Loads a fixture file and returns the error; fails if it loads, or if the message shows any key in the file. */
async function fileError(name: string, served = SERVED): Promise<string> {
  const file = path.join(KEYS, name);
  const error = await loadApiKeys({ apiKeys: [], apiKeysFile: file }, served).then(
    () => assert.fail(`${name} loaded`),
    (err: unknown) => err,
  );
  assert.ok(error instanceof ApiKeysError);
  const secrets = [...(await readFile(file, 'utf8')).matchAll(/"key": "([^"]+)"/g)].map((m) => m[1]!);
  for (const secret of secrets) assert.ok(!error.message.includes(secret), `the message for ${name} shows a key`);
  return error.message.replace(`"${file}"`, '"FILE"');
}

async function envError(apiKeys: string[]): Promise<string> {
  const error = await loadApiKeys({ apiKeys, apiKeysFile: undefined }, SERVED).then(
    () => assert.fail('the keys loaded'),
    (err: unknown) => err,
  );
  assert.ok(error instanceof ApiKeysError);
  for (const key of apiKeys) assert.ok(!error.message.includes(key), 'the message shows a key');
  return error.message;
}

test('TOOLPORT_API_KEYS keys are labelled key-1, key-2, ... and may use every tool', async () => {
  const keys = await loadApiKeys({ apiKeys: ['first-secret-0123456789', 'second-secret-0123456789'], apiKeysFile: undefined }, SERVED);
  assert.deepEqual(keys, [
    { label: 'key-1', key: 'first-secret-0123456789' },
    { label: 'key-2', key: 'second-secret-0123456789' },
  ]);
});

test('no keys configured loads no keys', async () => {
  assert.deepEqual(await loadApiKeys({ apiKeys: [], apiKeysFile: undefined }, SERVED), []);
});

test('a keys file gives scoped keys after the TOOLPORT_API_KEYS keys; no tools means every tool', async () => {
  const keys = await loadApiKeys({ apiKeys: ['env-secret-0123456789abc'], apiKeysFile: path.join(KEYS, 'valid.json') }, SERVED);
  assert.deepEqual(keys, [
    { label: 'key-1', key: 'env-secret-0123456789abc' },
    { label: 'ci-bot', key: 'ci-bot-secret-0123456789abcdef', tools: ['Read', 'Glob', 'Grep'] },
    { label: 'admin', key: 'admin-secret-0123456789abcdef' },
  ]);
});

test('a TOOLPORT_API_KEYS key shorter than 16 characters stops start-up without showing it', async () => {
  assert.equal(
    await envError(['long-enough-secret-0123', 'short-secret']),
    'Invalid TOOLPORT_API_KEYS: key 2 (key-2) is shorter than 16 characters (use a long random secret, e.g. `openssl rand -hex 32`).',
  );
});

test('a TOOLPORT_API_KEYS key given twice stops start-up', async () => {
  assert.equal(
    await envError(['same-secret-0123456789', 'other-secret-0123456789', 'same-secret-0123456789']),
    'Invalid TOOLPORT_API_KEYS: key 3 (key-3) is the same as key 1 (key-1).',
  );
});

test('a key with characters a Bearer token cannot carry stops start-up', async () => {
  assert.equal(
    await envError(['secret;with;semicolons;0123']),
    'Invalid TOOLPORT_API_KEYS: key 1 (key-1) must consist of letters, digits and - . _ ~ + / (then = padding): the characters of a Bearer token.',
  );
  assert.equal(
    await fileError('bad-characters.json'),
    'Invalid TOOLPORT_API_KEYS_FILE "FILE": entry 1 ("ci-bot"): the key must consist of letters, digits and - . _ ~ + / (then = padding): the characters of a Bearer token.',
  );
});

test('a keys file that does not exist stops start-up naming it', async () => {
  const file = path.join(KEYS, 'no-such-file.json');
  await assert.rejects(loadApiKeys({ apiKeys: [], apiKeysFile: file }, SERVED), {
    name: 'ApiKeysError',
    message: `Cannot read TOOLPORT_API_KEYS_FILE "${file}": no such file.`,
  });
});

test('a keys file that is not JSON stops start-up with the place, not the text, of the error', async () => {
  assert.equal(await fileError('not-json.json'), 'Invalid TOOLPORT_API_KEYS_FILE "FILE": it is not valid JSON (line 2, column 65).');
});

test('a keys file that is not an array stops start-up', async () => {
  assert.equal(
    await fileError('not-array.json'),
    'Invalid TOOLPORT_API_KEYS_FILE "FILE": it must be a JSON array of {"label", "key", "tools"?, "workspace"?} objects.',
  );
});

test('an empty keys file stops start-up rather than leaving the server open', async () => {
  assert.equal(await fileError('empty.json'), 'Invalid TOOLPORT_API_KEYS_FILE "FILE": it holds no keys; list at least one {"label": ..., "key": ...} entry.');
});

test('an entry without a label stops start-up naming the entry', async () => {
  assert.equal(await fileError('missing-label.json'), 'Invalid TOOLPORT_API_KEYS_FILE "FILE": entry 2: "label" is required.');
});

test('an empty label or an empty key stops start-up naming the entry', async () => {
  assert.equal(
    await fileError('empty-fields.json'),
    'Invalid TOOLPORT_API_KEYS_FILE "FILE": entry 1: "label" must not be empty; entry 2 ("ci-bot"): "key" must not be empty.',
  );
});

test('two entries with the same label stop start-up', async () => {
  assert.equal(await fileError('duplicate-label.json'), 'Invalid TOOLPORT_API_KEYS_FILE "FILE": entries 1 and 2 have the same label "ci-bot".');
});

test('two entries with the same key stop start-up without showing it', async () => {
  assert.equal(await fileError('duplicate-key.json'), 'Invalid TOOLPORT_API_KEYS_FILE "FILE": entry 2 ("deploy-bot") has the same key as entry 1 ("ci-bot").');
});

test('a key in the file that is also in TOOLPORT_API_KEYS, or takes one of its labels, stops start-up', async () => {
  const file = path.join(KEYS, 'valid.json');
  await assert.rejects(loadApiKeys({ apiKeys: ['other-secret-0123456789', 'ci-bot-secret-0123456789abcdef'], apiKeysFile: file }, SERVED), {
    message: `Invalid TOOLPORT_API_KEYS_FILE "${file}": entry 1 ("ci-bot") has the same key as TOOLPORT_API_KEYS key 2 (key-2).`,
  });
  const clash = path.join(KEYS, 'label-key-1.json');
  await assert.rejects(loadApiKeys({ apiKeys: ['env-secret-0123456789abc'], apiKeysFile: clash }, SERVED), {
    message: `Invalid TOOLPORT_API_KEYS_FILE "${clash}": entry 1 ("key-1") uses the label of TOOLPORT_API_KEYS key 1 (key-1).`,
  });
});

test('a key shorter than 16 characters in the file stops start-up without showing it', async () => {
  assert.equal(
    await fileError('short-key.json'),
    'Invalid TOOLPORT_API_KEYS_FILE "FILE": entry 1 ("ci-bot"): the key is shorter than 16 characters (use a long random secret, e.g. `openssl rand -hex 32`).',
  );
});

test('an unknown property in an entry stops start-up naming it', async () => {
  assert.equal(
    await fileError('unknown-property.json'),
    'Invalid TOOLPORT_API_KEYS_FILE "FILE": entry 1 ("ci-bot"): unknown property "scope" (allowed: label, key, tools, workspace, permissions).',
  );
});

test('a scope naming a tool that is not served stops start-up naming the tool and the served ones', async () => {
  assert.equal(
    await fileError('unknown-tool.json'),
    'Invalid TOOLPORT_API_KEYS_FILE "FILE": entry 1 ("ci-bot"): "tools" names "Bash", which is not served (served tools: Read, Glob, Grep, Echo).',
  );
});

test('tools that are not a list, an empty list or a list with repeats stop start-up, each named', async () => {
  assert.equal(
    await fileError('bad-tools.json'),
    'Invalid TOOLPORT_API_KEYS_FILE "FILE": entry 1 ("ci-bot"): "tools" must be an array of tool names; ' +
      'entry 2 ("no-tools"): "tools" must name at least one tool (leave it out for every tool); ' +
      'entry 3 ("twice"): "tools" names a tool more than once.',
  );
});

test('an entry may name a workspace of its own, given as an absolute path', async () => {
  const keys = await loadApiKeys({ apiKeys: [], apiKeysFile: path.join(KEYS, 'workspace.json') }, SERVED);
  assert.deepEqual(keys, [
    { label: 'team-a', key: 'team-a-secret-0123456789abcdef', workspace: '/srv/workspaces/team-a' },
    { label: 'team-b', key: 'team-b-secret-0123456789abcdef', tools: ['Read'], workspace: '/srv/workspaces/team-b' },
    { label: 'admin', key: 'admin-secret-0123456789abcdef' },
  ]);
});

test('a workspace that is not a string, is empty or is relative stops start-up naming the entry', async () => {
  assert.equal(
    await fileError('bad-workspace.json'),
    'Invalid TOOLPORT_API_KEYS_FILE "FILE": entry 1 ("number"): "workspace" must be a string; ' + 'entry 2 ("empty"): "workspace" must not be empty.',
  );
  assert.equal(
    await fileError('relative-workspace.json'),
    'Invalid TOOLPORT_API_KEYS_FILE "FILE": entry 1 ("relative"): "workspace" must be an absolute path (relative paths would depend on the directory the server starts in).',
  );
});

test("a key's tools may name an upstream's tools by prefix, or one of them before it is listed; a pattern that matches nothing is refused", async (t) => {
  const dir = await temporaryDirectory(t);
  const file = path.join(dir, 'keys.json');
  const served = [...SERVED, 'github__*'];
  const entry = (tools: string[]) => JSON.stringify([{ label: 'agent', key: 'agent-secret-0123456789abcdef', tools }]);
  await writeFile(file, entry(['Read', 'github__*', 'github__create_issue', 'Gr*']));
  const [key] = await loadApiKeys({ apiKeys: [], apiKeysFile: file }, served);
  assert.deepEqual(key?.tools, ['Read', 'github__*', 'github__create_issue', 'Gr*']);
  for (const [tools, named] of [
    [['slack__*'], '"slack__*"'],
    [['slack__post'], '"slack__post"'],
    [['Re ad*'], '"Re ad*"'],
  ] as const) {
    await writeFile(file, entry([...tools]));
    await assert.rejects(loadApiKeys({ apiKeys: [], apiKeysFile: file }, served), {
      name: 'ApiKeysError',
      message: `Invalid TOOLPORT_API_KEYS_FILE ${JSON.stringify(file)}: entry 1 ("agent"): "tools" names ${named}, which is not served (served tools: Read, Glob, Grep, Echo, github__*).`,
    });
  }
});
