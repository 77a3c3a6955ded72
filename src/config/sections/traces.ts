import { boolean, ConfigError, integer, oneOf, raw, type Env } from '../parse.js';
import { optionalSetting, type ConfigVariable } from '../variables.js';

const MORE = 'operations.md#tracing';

/** The samplers of the OpenTelemetry specification's `OTEL_TRACES_SAMPLER`. */
export const TRACE_SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;
export type TraceSampler = (typeof TRACE_SAMPLERS)[number];

const EXPORTERS = ['otlp', 'console', 'none'] as const;
const PROTOCOLS = ['http/protobuf', 'http/json'] as const;

/** Traces on: where they go and which are kept (the OTEL_* variables, read once). */
export interface TracingSettings {
  exporter: 'otlp' | 'console';
  /** The OTLP/HTTP traces URL (for `otlp`). */
  endpoint: string;
  protocol: (typeof PROTOCOLS)[number];
  /** Sent with every export (an authorization header, say): never logged. */
  headers: Record<string, string>;
  serviceName: string;
  resourceAttributes: Record<string, string>;
  sampler: TraceSampler;
  /** The ratio of the `traceidratio` samplers, 0 to 1. */
  ratio: number;
  /** How long finished spans wait to be sent together, in milliseconds. */
  batchDelayMs: number;
}

const variables: ConfigVariable[] = [
  {
    name: 'OTEL_TRACES_EXPORTER',
    default: 'none',
    meaning:
      '`otlp` or `console` switches tracing on, `none` off; unset, tracing is on exactly when an OTLP endpoint below is set. Nothing of OpenTelemetry is loaded while tracing is off',
    see: MORE,
  },
  { name: 'OTEL_EXPORTER_OTLP_ENDPOINT', default: '`http://localhost:4318`', meaning: 'the OTLP/HTTP collector; traces go to its `/v1/traces`', see: MORE },
  {
    name: 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
    default: 'none',
    meaning: 'the full URL traces are sent to, taken as it is (wins over the one above)',
    see: MORE,
  },
  { name: 'OTEL_EXPORTER_OTLP_PROTOCOL', default: '`http/protobuf`', meaning: '`http/protobuf` or `http/json`', see: MORE },
  {
    name: 'OTEL_EXPORTER_OTLP_HEADERS',
    default: 'none',
    meaning: 'headers sent with each export, `key=value,...` (values URL-encoded); never logged',
    see: MORE,
  },
  { name: 'OTEL_SERVICE_NAME', default: '`toolport`', meaning: 'the `service.name` of the traces', see: MORE },
  { name: 'OTEL_RESOURCE_ATTRIBUTES', default: 'none', meaning: 'more resource attributes, `key=value,...` (`deployment.environment.name=prod`)', see: MORE },
  {
    name: 'OTEL_TRACES_SAMPLER',
    default: '`parentbased_always_on`',
    meaning: '`always_on`, `always_off`, `traceidratio`, `parentbased_always_on`, `parentbased_always_off` or `parentbased_traceidratio`',
    see: MORE,
  },
  { name: 'OTEL_TRACES_SAMPLER_ARG', default: '`1`', meaning: 'the ratio of the `traceidratio` samplers, from 0 to 1', see: MORE },
  { name: 'OTEL_BSP_SCHEDULE_DELAY', default: '`5000`', meaning: 'milliseconds finished spans wait to be exported together', see: MORE },
  { name: 'OTEL_SDK_DISABLED', default: '`false`', meaning: '`true` switches tracing off whatever the variables above say', see: MORE },
];

/** `key=value,...` with URL-encoded values (the OTEL_* list format); a secret's value never goes into an error. */
function pairs(env: Env, name: string, secret: boolean): Record<string, string> {
  const value = raw(env, name);
  const out: Record<string, string> = {};
  if (value === undefined) return out;
  for (const item of value.split(',')) {
    if (item.trim() === '') continue;
    const at = item.indexOf('=');
    const key = at < 0 ? '' : item.slice(0, at).trim();
    let decoded: string | undefined;
    try {
      decoded = at < 0 ? undefined : decodeURIComponent(item.slice(at + 1).trim());
    } catch {
      decoded = undefined;
    }
    if (key === '' || decoded === undefined)
      throw new ConfigError(name, 'a comma-separated list of key=value pairs (values URL-encoded)', secret ? '(hidden)' : value);
    out[key] = decoded;
  }
  return out;
}

function tracesUrl(env: Env): string {
  const own = raw(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  const base = raw(env, 'OTEL_EXPORTER_OTLP_ENDPOINT');
  const [name, url] =
    own !== undefined
      ? ['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', own]
      : ['OTEL_EXPORTER_OTLP_ENDPOINT', `${(base ?? 'http://localhost:4318').replace(/\/+$/, '')}/v1/traces`];
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {
    parsed = undefined;
  }
  if (parsed === undefined || !['http:', 'https:'].includes(parsed.protocol)) throw new ConfigError(name, 'an http or https URL', own ?? base ?? url);
  return parsed.href;
}

/**
 * Reads the OTEL_* variables; undefined while tracing is off. Off is the default: OpenTelemetry's
 * own default exporter is `otlp`, which would send to localhost from every server that never
 * asked for traces, so here an exporter must be named or an endpoint given.
 */
function readTracing(env: Env): TracingSettings | undefined {
  const disabled = boolean(env, 'OTEL_SDK_DISABLED', false);
  const named = raw(env, 'OTEL_TRACES_EXPORTER');
  const exporter = oneOf(env, 'OTEL_TRACES_EXPORTER', EXPORTERS, 'none');
  const protocol = oneOf(env, 'OTEL_EXPORTER_OTLP_PROTOCOL', PROTOCOLS, 'http/protobuf');
  const endpoint = tracesUrl(env);
  const headers = pairs(env, 'OTEL_EXPORTER_OTLP_HEADERS', true);
  const resourceAttributes = pairs(env, 'OTEL_RESOURCE_ATTRIBUTES', false);
  const sampler = oneOf(env, 'OTEL_TRACES_SAMPLER', TRACE_SAMPLERS, 'parentbased_always_on');
  const arg = raw(env, 'OTEL_TRACES_SAMPLER_ARG');
  const ratio = arg === undefined ? 1 : Number(arg);
  if (!(arg === undefined || (arg.trim() !== '' && ratio >= 0 && ratio <= 1))) throw new ConfigError('OTEL_TRACES_SAMPLER_ARG', 'a number from 0 to 1', arg);
  const batchDelayMs = integer(env, 'OTEL_BSP_SCHEDULE_DELAY', 5000, 0, 600_000);
  const endpointGiven = raw(env, 'OTEL_EXPORTER_OTLP_ENDPOINT') !== undefined || raw(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT') !== undefined;
  const on = named === undefined ? endpointGiven : exporter !== 'none';
  const serviceName = raw(env, 'OTEL_SERVICE_NAME') ?? resourceAttributes['service.name'] ?? 'toolport';
  if (disabled || !on) return undefined;
  return { exporter: exporter === 'console' ? 'console' : 'otlp', endpoint, protocol, headers, serviceName, resourceAttributes, sampler, ratio, batchDelayMs };
}

/** The tracing field: absent from the configuration while tracing is off (`'tracing' in config`). */
export const TRACING = optionalSetting(variables, readTracing);
