import assert from 'node:assert/strict';
import { test } from 'node:test';
import { seccompFilter, seccompSupported } from '#src/os/sandbox/seccomp.js';

/** The filter's instructions: [code, jt, jf, k]. */
function instructions(filter: Buffer): Array<[number, number, number, number]> {
  const out: Array<[number, number, number, number]> = [];
  for (let i = 0; i < filter.length; i += 8) out.push([filter.readUInt16LE(i), filter[i + 2]!, filter[i + 3]!, filter.readUInt32LE(i + 4)]);
  return out;
}

test('the filter first kills a system call of another architecture, and allows what it does not name last', () => {
  const program = instructions(seccompFilter({ network: false, arch: 'x64' }));
  assert.deepEqual(program.slice(0, 3), [
    [0x20, 0, 0, 4],
    [0x15, 1, 0, 0xc000003e],
    [0x06, 0, 0, 0x80000000],
  ]);
  assert.deepEqual(program.at(-1), [0x06, 0, 0, 0x7fff0000]);
  // Every jump lands inside the program.
  program.forEach(([code, jt, jf], i) => {
    if ((code & 0x07) === 0x05) assert.ok(i + 1 + Math.max(jt, jf) < program.length, `jump at ${i}`);
  });
});

test('the filter refuses socket() with EACCES only while the network is closed, and clone3 with ENOSYS always', () => {
  const refusal = (network: boolean, nr: number): number | undefined => {
    const program = instructions(seccompFilter({ network, arch: 'x64' }));
    const at = program.findIndex(([code, , , k]) => code === 0x15 && k === nr);
    return at < 0 ? undefined : program[at + 1]![3];
  };
  assert.equal(refusal(false, 41), 0x00050000 | 13);
  assert.equal(refusal(true, 41), undefined);
  assert.equal(refusal(true, 435), 0x00050000 | 38);
});

test('the filter knows x64 and arm64, and refuses to guess another architecture', () => {
  assert.equal(seccompSupported('x64'), true);
  assert.equal(seccompSupported('arm64'), true);
  assert.equal(seccompSupported('riscv64'), false);
  assert.throws(() => seccompFilter({ network: false, arch: 'riscv64' }), { message: 'the seccomp filter does not know the system calls of riscv64' });
  assert.notDeepEqual(seccompFilter({ network: false, arch: 'arm64' }), seccompFilter({ network: false, arch: 'x64' }));
});
