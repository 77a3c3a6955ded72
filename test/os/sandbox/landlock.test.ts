import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import { confineFields, FS, FS_ALL, FS_FILE, FS_READ_EXEC, grantExcept, NET_TCP, SCOPE_ALL } from '#src/os/sandbox/landlock.js';
import { temporaryDirectory } from '../../support/workspace.js';

test('grantExcept grants a root that holds no hidden path with one rule', async (t) => {
  const root = await temporaryDirectory(t, 'toolport-landlock-');
  await mkdir(path.join(root, 'a'));
  assert.deepEqual(await grantExcept([root], FS_READ_EXEC, []), [{ path: root, access: FS_READ_EXEC }]);
});

test('grantExcept replaces a root that holds a hidden file by its entries, descending to the file and leaving it out', async (t) => {
  const root = await temporaryDirectory(t, 'toolport-landlock-');
  await mkdir(path.join(root, 'etc', 'toolport'), { recursive: true });
  await mkdir(path.join(root, 'etc', 'ssl'));
  await writeFile(path.join(root, 'etc', 'hosts'), '');
  await writeFile(path.join(root, 'etc', 'toolport', 'keys.json'), '[]');
  await writeFile(path.join(root, 'etc', 'toolport', 'config.json'), '{}');
  await mkdir(path.join(root, 'usr'));
  const rules = await grantExcept([path.join(root, 'etc'), path.join(root, 'usr')], FS_READ_EXEC, [path.join(root, 'etc', 'toolport', 'keys.json')]);
  assert.deepEqual(rules, [
    // A file may be granted only the rights of a file.
    { path: path.join(root, 'etc', 'hosts'), access: FS_READ_EXEC & FS_FILE },
    { path: path.join(root, 'etc', 'ssl'), access: FS_READ_EXEC },
    { path: path.join(root, 'etc', 'toolport', 'config.json'), access: FS_READ_EXEC & FS_FILE },
    { path: path.join(root, 'usr'), access: FS_READ_EXEC },
  ]);
});

test('grantExcept leaves out a hidden directory whole, roots that do not exist, and a root below another', async (t) => {
  const root = await temporaryDirectory(t, 'toolport-landlock-');
  await mkdir(path.join(root, 'srv', 'other', 'deep'), { recursive: true });
  await mkdir(path.join(root, 'srv', 'mine'));
  const rules = await grantExcept([path.join(root, 'srv'), path.join(root, 'srv', 'mine'), path.join(root, 'missing')], FS.READ_FILE, [
    path.join(root, 'srv', 'other'),
  ]);
  assert.deepEqual(rules, [{ path: path.join(root, 'srv', 'mine'), access: FS.READ_FILE }]);
});

test('confineFields asks for every right of ABI 6, no TCP unless the network is open, both scopes, then the rules and the filter', () => {
  const fields = confineFields([{ path: '/usr', access: FS_READ_EXEC }], Buffer.from([1, 2]), false);
  assert.deepEqual(fields, [`landlock 6 ${FS_ALL} ${NET_TCP} ${SCOPE_ALL}`, `path ${FS_READ_EXEC} /usr`, 'seccomp 0102']);
  assert.equal(confineFields([], Buffer.alloc(0), true)[0], `landlock 6 ${FS_ALL} 0 ${SCOPE_ALL}`);
});
