import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { test } from 'node:test';
import type { FastifyRequest } from 'fastify';
import { whenClientGoes } from '#src/http/client-gone.js';

/** A request on `socket`, as far as whenClientGoes looks. */
const on = (socket: EventEmitter & { destroyed?: boolean }): FastifyRequest => ({ raw: { socket } }) as unknown as FastifyRequest;

test('the requests of one connection share one close listener; a request that answered is not told', () => {
  const socket = new EventEmitter();
  const heard: string[] = [];
  const stopFirst = whenClientGoes(on(socket), () => heard.push('first'));
  whenClientGoes(on(socket), () => heard.push('second'));
  assert.equal(socket.listenerCount('close'), 1);
  stopFirst();
  socket.emit('close');
  assert.deepEqual(heard, ['second']);
});

test('a connection that is closed already runs the callback at once', () => {
  const socket = Object.assign(new EventEmitter(), { destroyed: true });
  let gone = 0;
  whenClientGoes(on(socket), () => gone++);
  assert.equal(gone, 1);
  assert.equal(socket.listenerCount('close'), 0);
});
