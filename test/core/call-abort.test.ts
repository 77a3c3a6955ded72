import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CallAbort } from '#src/core/call-abort.js';

test('a CallAbort makes no AbortSignal until asked, and one asked for late is aborted already', () => {
  const abort = new CallAbort();
  const reason = new Error('the client disconnected');
  abort.abort(reason);
  assert.equal(abort.aborted, true);
  assert.equal(abort.reason, reason);
  assert.equal(abort.signal.aborted, true);
  assert.equal(abort.signal.reason, reason);
});

test('a CallAbort aborts the signal it handed out, and runs each listener once, on the first abort only', () => {
  const abort = new CallAbort();
  const signal = abort.signal;
  const heard: string[] = [];
  abort.addEventListener('abort', () => heard.push('a'));
  const removed = (): number => heard.push('removed');
  abort.addEventListener('abort', removed);
  abort.removeEventListener('abort', removed);
  abort.abort('first');
  abort.abort('second');
  assert.deepEqual(heard, ['a']);
  assert.equal(signal.reason, 'first');
  assert.equal(abort.reason, 'first');
  abort.addEventListener('abort', () => heard.push('late'));
  assert.deepEqual(heard, ['a'], 'a listener added after the abort never runs, as on an AbortSignal');
});

test('follow aborts with the source, at once when it is aborted already, and stops following when told', () => {
  const source = new AbortController();
  const following = new CallAbort();
  const stop = following.follow(source.signal);
  source.abort('gone');
  assert.equal(following.reason, 'gone');

  const done = new AbortController();
  done.abort('before');
  const late = new CallAbort();
  assert.equal(late.follow(done.signal), undefined);
  assert.equal(late.reason, 'before');

  const kept = new AbortController();
  const stopped = new CallAbort();
  stopped.follow(kept.signal)!();
  kept.abort('after');
  assert.equal(stopped.aborted, false);
  stop?.();
});
