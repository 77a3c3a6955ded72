import type { Transport } from '@modelcontextprotocol/client';
import type { Logger } from 'pino';
import type { Agent } from 'undici';
import type { AnswerLedger, ReadCounters } from './answer-ledger.js';
import type { UpstreamSpec } from './config.js';
import type { UpstreamConfinement } from './confinement.js';
import type { StreamableHttpTransport } from './http/client.js';
import { describeHttpFailure, httpTransport } from './http/transport.js';
import { bytesText, LIST_BUDGET_BYTES } from './message-bounds.js';
import { StdioProcessTransport, stdioTransport } from './stdio/transport.js';
import type { ReconnectTiming } from './http/stream-backoff.js';

/** A transport of toolport's own: it knows what each answer may take (`answers`). */
export type BoundedTransport = StdioProcessTransport | StreamableHttpTransport;

export interface UpstreamTransportOptions {
  log: Logger;
  redact: (text: string) => string;
  baseEnv: Record<string, string | undefined>;
  confinement?: UpstreamConfinement | string | undefined;
  /** The connection pool of an HTTP upstream. */
  agent(): Agent;
  counters: ReadCounters;
  lineStallMs?: number | undefined;
  streamReconnect?: Partial<ReconnectTiming> | undefined;
  /** Hears why an HTTP transport gave the upstream up, before it closes. */
  onBroken(transport: Transport, why: string): void;
  /** Hears that an HTTP transport's GET stream was given up. */
  onEventStreamLost(transport: Transport, why: string): void;
}

/** The transport of one connection to `spec`: its process (stdio) or its URL (HTTP). */
export function upstreamTransport(spec: UpstreamSpec, options: UpstreamTransportOptions): BoundedTransport {
  const { log, redact, baseEnv, confinement, counters, lineStallMs, streamReconnect } = options;
  if (spec.transport === 'stdio')
    return stdioTransport(spec, baseEnv, log, redact, confinement, { counters, ...(lineStallMs !== undefined ? { lineStallMs } : {}) });
  const transport = httpTransport(spec, options.agent(), {
    onBroken: options.onBroken,
    onEventStreamLost: (why) => options.onEventStreamLost(transport, why),
    counters,
    ...(streamReconnect !== undefined ? { reconnect: streamReconnect } : {}),
  });
  return transport;
}

/**
 * Why connecting through `transport` failed with `err`, in words safe to show (`/readyz`): a
 * refused answer, why the transport gave the upstream up (`brokenBy`), the process's exit, or the
 * HTTP failure.
 */
export function connectFailure(transport: BoundedTransport, err: unknown, brokenBy: string | undefined): string {
  return (
    refusalReason(transport.answers, err) ??
    brokenBy ??
    (transport instanceof StdioProcessTransport ? transport.describeFailure(err) : describeHttpFailure(err))
  );
}

/** Why a connection that was ready ended: the process's exit, or why the transport gave the upstream up. */
export function lostReason(transport: BoundedTransport, brokenBy: string | undefined): string {
  return transport instanceof StdioProcessTransport ? `the process ${transport.exit ?? 'ended'}` : (brokenBy ?? 'the connection closed');
}

/** What a refused answer (`err`, when it is one of `answers`' refusals) says of a listing or handshake: larger than toolport reads. */
export function refusalReason(answers: AnswerLedger, err: unknown): string | undefined {
  const refused = answers.refusal(err);
  if (refused === undefined) return undefined;
  if (refused.method === 'tools/list') return `its tool list is larger than ${bytesText(LIST_BUDGET_BYTES)}, the most toolport reads of one listing`;
  return `its answer to ${refused.method} was larger than ${bytesText(refused.maxBytes)}`;
}
