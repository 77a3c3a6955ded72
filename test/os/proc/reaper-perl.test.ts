import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

const SRC = path.resolve(import.meta.dirname, '../../../src');

// The Perl helpers are source files of their own, checked here as an editor cannot: perl -c with
// warnings on. Perl is required: on a machine without it these tests fail, never skip.
for (const script of ['os/proc/reaper.pl', 'os/fs/flock.pl']) {
  test(`${script} compiles under perl -wc, and loads no module but strict`, () => {
    const file = path.join(SRC, script);
    const checked = spawnSync('perl', ['-wc', file], { encoding: 'utf8' });
    assert.equal(checked.error, undefined, `perl is required to check ${script}: ${checked.error?.message}`);
    // Anything else on stderr is a compile-time warning: a failure too.
    assert.equal(checked.stderr, `${file} syntax OK\n`);
    assert.equal(checked.status, 0);
    // Both start once per server, and perl-base (the Perl every Debian system has) holds strict.
    assert.deepEqual(readFileSync(file, 'utf8').match(/^\s*(use|require) .*$/gm), ['use strict;']);
  });
}
