import { createServer, type IncomingMessage, type Server } from 'node:http';
import { createRequire } from 'node:module';
import { until } from './wait.js';
import type { Cleanup } from './workspace.js';

// An OTLP/HTTP traces receiver that decodes what an exporter really sends: protobuf through the
// code generated from the opentelemetry-proto definitions (shipped, with its protobufjs, by
// @opentelemetry/otlp-transformer 0.210, a dev dependency under the name `otlp-wire`), and JSON as
// the OTLP/JSON encoding writes it (ids in hex, 64-bit integers as strings or numbers).

interface Decoder {
  decode(bytes: Uint8Array): unknown;
  toObject(message: unknown, options: Record<string, unknown>): WireRequest;
}
const generated = createRequire(import.meta.url)('otlp-wire/build/src/generated/root.js') as {
  opentelemetry: { proto: { collector: { trace: { v1: { ExportTraceServiceRequest: Decoder } } } } };
};
const ExportTraceServiceRequest = generated.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;

type WireValue = {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: string | number;
  doubleValue?: number;
  arrayValue?: { values?: WireValue[] };
  kvlistValue?: { values?: WireKeyValue[] };
};
type WireKeyValue = { key: string; value?: WireValue };
type WireSpan = {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind?: number | string;
  attributes?: WireKeyValue[];
  startTimeUnixNano?: string | number;
  endTimeUnixNano?: string | number;
  events?: Array<{ name: string; timeUnixNano?: string | number; attributes?: WireKeyValue[] }>;
  links?: Array<{ traceId: string; spanId: string }>;
  status?: { code?: number | string; message?: string };
};
type WireRequest = {
  resourceSpans?: Array<{ resource?: { attributes?: WireKeyValue[] }; scopeSpans?: Array<{ scope?: { name?: string }; spans?: WireSpan[] }> }>;
};

/** A span as the receiver got it: ids in hex, attributes as plain values. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** Empty for a root span. */
  parentSpanId: string;
  name: string;
  /** 1 internal, 2 server, 3 client (the protobuf enum). */
  kind: number;
  attributes: Record<string, unknown>;
  /** Nanoseconds since the epoch, in decimal (fixed64 on the wire: compare them as BigInt). */
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  events: Array<{ name: string; timeUnixNano: string; attributes: Record<string, unknown> }>;
  links: Array<{ traceId: string; spanId: string }>;
  /** 0 unset, 1 ok, 2 error. */
  statusCode: number;
  resource: Record<string, unknown>;
  scope: string;
  /** How it came: `protobuf` or `json`. */
  encoding: 'protobuf' | 'json';
}

export interface OtlpReceiver {
  /** The base URL: OTEL_EXPORTER_OTLP_ENDPOINT. */
  url: string;
  spans: ReceivedSpan[];
  /** The first span, received or to come, for which `match` holds; fails after `deadlineMs`. */
  span(match: (span: ReceivedSpan) => boolean, what: string, deadlineMs?: number): Promise<ReceivedSpan>;
}

function valueOf(value: WireValue | undefined): unknown {
  if (value === undefined) return undefined;
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.boolValue !== undefined) return value.boolValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  if (value.arrayValue !== undefined) return (value.arrayValue.values ?? []).map(valueOf);
  if (value.kvlistValue !== undefined) return attributesOf(value.kvlistValue.values);
  return undefined;
}

function attributesOf(list: WireKeyValue[] | undefined): Record<string, unknown> {
  return Object.fromEntries((list ?? []).map((kv) => [kv.key, valueOf(kv.value)]));
}

const KINDS: Record<string, number> = { SPAN_KIND_INTERNAL: 1, SPAN_KIND_SERVER: 2, SPAN_KIND_CLIENT: 3 };
const STATUS: Record<string, number> = { STATUS_CODE_UNSET: 0, STATUS_CODE_OK: 1, STATUS_CODE_ERROR: 2 };

function spansOf(request: WireRequest, encoding: ReceivedSpan['encoding']): ReceivedSpan[] {
  return (request.resourceSpans ?? []).flatMap((rs) =>
    (rs.scopeSpans ?? []).flatMap((ss) =>
      (ss.spans ?? []).map((s) => ({
        traceId: s.traceId,
        spanId: s.spanId,
        parentSpanId: s.parentSpanId ?? '',
        name: s.name,
        kind: typeof s.kind === 'string' ? (KINDS[s.kind] ?? 0) : (s.kind ?? 0),
        attributes: attributesOf(s.attributes),
        startTimeUnixNano: String(s.startTimeUnixNano ?? 0),
        endTimeUnixNano: String(s.endTimeUnixNano ?? 0),
        events: (s.events ?? []).map((e) => ({ name: e.name, timeUnixNano: String(e.timeUnixNano ?? 0), attributes: attributesOf(e.attributes) })),
        links: (s.links ?? []).map((l) => ({ traceId: l.traceId, spanId: l.spanId })),
        statusCode: typeof s.status?.code === 'string' ? (STATUS[s.status.code] ?? 0) : (s.status?.code ?? 0),
        resource: attributesOf(rs.resource?.attributes),
        scope: ss.scope?.name ?? '',
        encoding,
      })),
    ),
  );
}

const hex = (bytes: unknown): string => (bytes instanceof Uint8Array ? Buffer.from(bytes).toString('hex') : '');

function decodeProtobuf(body: Buffer): WireRequest {
  const message = ExportTraceServiceRequest.decode(body);
  const request = ExportTraceServiceRequest.toObject(message, { longs: String, enums: Number, bytes: Uint8Array, defaults: false, arrays: true });
  for (const rs of request.resourceSpans ?? []) {
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        s.traceId = hex(s.traceId);
        s.spanId = hex(s.spanId);
        s.parentSpanId = hex(s.parentSpanId);
        for (const l of s.links ?? []) Object.assign(l, { traceId: hex(l.traceId), spanId: hex(l.spanId) });
      }
    }
  }
  return request;
}

async function bodyOf(request: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** Starts a receiver on a loopback port, closed when `t` ends. Answers 415 to any other content type, 404 to any other path. */
export async function otlpReceiver(t: Cleanup): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const server: Server = createServer((request, response) => {
    void (async () => {
      const body = await bodyOf(request);
      if (request.method !== 'POST' || request.url !== '/v1/traces') return void response.writeHead(404).end();
      const type = request.headers['content-type'] ?? '';
      if (type.startsWith('application/x-protobuf')) {
        spans.push(...spansOf(decodeProtobuf(body), 'protobuf'));
        return void response.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
      }
      if (type.startsWith('application/json')) {
        spans.push(...spansOf(JSON.parse(body.toString('utf8')) as WireRequest, 'json'));
        return void response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      }
      response.writeHead(415).end();
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    async span(match, what, deadlineMs = 15_000) {
      await until(() => spans.some(match), what, deadlineMs, 20);
      return spans.find(match)!;
    },
  };
}
