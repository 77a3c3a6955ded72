import assert from 'node:assert/strict';
import { mkdir, realpath, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import { FS_ALL, FS_FILE, FS_READ_EXEC, NET_TCP } from '#src/os/sandbox/landlock.js';
import { UpstreamProfile } from '#src/os/sandbox/upstream-profile.js';
import { temporaryDirectory } from '../../support/workspace.js';

/** The `path ACCESS PATH` fields as [path, access], and the ruleset's line. */
function rulesOf(fields: readonly string[]): { ruleset: string; rules: Map<string, number> } {
  const rules = new Map<string, number>();
  for (const field of fields) {
    const rule = /^path (\d+) (.*)$/s.exec(field);
    if (rule !== null) rules.set(rule[2]!, (rules.get(rule[2]!) ?? 0) | Number(rule[1]));
  }
  return { ruleset: fields[0]!, rules };
}

/** Everything the rules grant on `p`: the union of the rules on it and on each directory above it. */
function accessTo(rules: Map<string, number>, p: string): number {
  let access = 0;
  for (const [rulePath, rights] of rules) if (p === rulePath || p.startsWith(rulePath === '/' ? '/' : `${rulePath}/`)) access |= rights;
  return access;
}

test('an upstream reads what the user can but the hidden paths and the private directories, and writes only its places', async (t) => {
  const root = await realpath(await temporaryDirectory(t, 'toolport-upstream-profile-'));
  const temporary = path.join(root, 'tmp');
  const config = path.join(root, 'config');
  const cwd = path.join(root, 'cwd');
  const home = path.join(root, 'home');
  const server = path.join(home, 'toolport');
  const tmp = path.join(temporary, 'toolport-calls-1-a', 'call-b');
  for (const dir of [config, cwd, server, tmp, path.join(temporary, 'other'), path.join(root, 'elsewhere')]) await mkdir(dir, { recursive: true });
  await writeFile(path.join(home, 'notes'), '');
  const keys = path.join(config, 'keys.json');
  await writeFile(keys, '[]');
  await writeFile(path.join(config, 'settings.json'), '{}');
  const profile = new UpstreamProfile([keys], [server], temporary);
  const { ruleset, rules } = rulesOf(await profile.fieldsFor({ cwd, home, tmp, network: true }));

  assert.equal(accessTo(rules, keys), 0, 'the keys file is not readable');
  assert.equal(accessTo(rules, path.join(config, 'settings.json')), FS_READ_EXEC & FS_FILE, 'a file beside it is');
  assert.equal(accessTo(rules, path.join(temporary, 'toolport-calls-1-a')), 0, 'the private directories of calls are hidden');
  assert.equal(accessTo(rules, tmp), FS_ALL, 'but its own is writable');
  assert.equal(accessTo(rules, path.join(temporary, 'other')) & FS_READ_EXEC, FS_READ_EXEC, 'the rest of the temporary directory is readable');
  assert.equal(accessTo(rules, cwd), FS_ALL, 'its cwd is writable');
  assert.equal(accessTo(rules, path.join(home, 'notes')) & FS_FILE, FS_FILE, 'its HOME is writable (entry by entry, since it holds the server)');
  assert.equal(accessTo(rules, server), FS_READ_EXEC, "the server's directory below HOME is read-only");
  assert.equal(accessTo(rules, path.join(root, 'elsewhere')), FS_READ_EXEC, 'elsewhere is read-only');
  assert.ok(profile.hidden.includes('/run/secrets') && profile.hidden.includes('/var/run/secrets'), "the orchestrators' secrets are hidden where they exist");
  assert.match(ruleset, /^landlock 6 \d+ 0 3$/, 'no TCP restriction with the network');
});

test('"network": false handles TCP in the ruleset', async (t) => {
  const root = await realpath(await temporaryDirectory(t, 'toolport-upstream-profile-'));
  const profile = new UpstreamProfile([], [], path.join(root, 'tmp'));
  const fields = await profile.fieldsFor({ cwd: undefined, home: undefined, tmp: root, network: false });
  assert.equal(fields[0], `landlock 6 ${FS_ALL} ${NET_TCP} 3`);
  assert.match(fields.at(-1)!, /^seccomp [0-9a-f]+$/);
});
