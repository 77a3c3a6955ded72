import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ConfigError, loadConfig } from '#src/config/config.js';

const tracing = (env: Record<string, string>) => loadConfig(env, '/srv/toolport').tracing;

/** Asserts that loading `env` throws a ConfigError naming `variable`, with exactly this message. */
function refuses(env: Record<string, string>, variable: string, message: string): void {
  assert.throws(
    () => loadConfig(env, '/srv/toolport'),
    (err: unknown) => {
      assert.ok(err instanceof ConfigError, `expected ConfigError, got ${String(err)}`);
      assert.equal(err.variable, variable);
      assert.equal(err.message, message);
      return true;
    },
  );
}

describe('the OTEL_* variables', () => {
  test('tracing is off by default: the configuration has no tracing field', () => {
    assert.equal('tracing' in loadConfig({}, '/srv/toolport'), false);
  });

  test('an OTLP endpoint alone switches it on, with the defaults of the specification', () => {
    assert.deepEqual(tracing({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' }), {
      exporter: 'otlp',
      endpoint: 'http://collector:4318/v1/traces',
      protocol: 'http/protobuf',
      headers: {},
      serviceName: 'toolport',
      resourceAttributes: {},
      sampler: 'parentbased_always_on',
      ratio: 1,
      batchDelayMs: 5000,
    });
  });

  test('the traces endpoint is taken as it is, and wins over the general one', () => {
    assert.equal(
      tracing({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://b/otlp/traces' })?.endpoint,
      'https://b/otlp/traces',
    );
  });

  test('OTEL_TRACES_EXPORTER=otlp switches it on towards localhost; none switches it off whatever the endpoint', () => {
    assert.equal(tracing({ OTEL_TRACES_EXPORTER: 'otlp' })?.endpoint, 'http://localhost:4318/v1/traces');
    assert.equal(tracing({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318' }), undefined);
    assert.equal(tracing({ OTEL_TRACES_EXPORTER: 'console' })?.exporter, 'console');
  });

  test('OTEL_SDK_DISABLED=true switches it off', () => {
    assert.equal(tracing({ OTEL_SDK_DISABLED: 'true', OTEL_TRACES_EXPORTER: 'otlp' }), undefined);
  });

  test('headers and resource attributes are key=value lists with URL-encoded values; the service name has its own variable', () => {
    const settings = tracing({
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20abc, x-tenant=t1',
      OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=prod,service.name=ignored',
      OTEL_SERVICE_NAME: 'gateway-a',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.01',
    });
    assert.deepEqual(settings?.headers, { authorization: 'Bearer abc', 'x-tenant': 't1' });
    assert.deepEqual(settings?.resourceAttributes, { 'deployment.environment.name': 'prod', 'service.name': 'ignored' });
    assert.equal(settings?.serviceName, 'gateway-a');
    assert.equal(settings?.protocol, 'http/json');
    assert.equal(settings?.sampler, 'parentbased_traceidratio');
    assert.equal(settings?.ratio, 0.01);
  });

  test('service.name from OTEL_RESOURCE_ATTRIBUTES names the service when OTEL_SERVICE_NAME is unset', () => {
    assert.equal(tracing({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_RESOURCE_ATTRIBUTES: 'service.name=from-resource' })?.serviceName, 'from-resource');
  });

  test('a bad value stops start-up with an error naming its variable, even while tracing is off', () => {
    refuses({ OTEL_TRACES_EXPORTER: 'jaeger' }, 'OTEL_TRACES_EXPORTER', 'Invalid OTEL_TRACES_EXPORTER: expected one of otlp, console, none, got "jaeger"');
    refuses(
      { OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' },
      'OTEL_EXPORTER_OTLP_PROTOCOL',
      'Invalid OTEL_EXPORTER_OTLP_PROTOCOL: expected one of http/protobuf, http/json, got "grpc"',
    );
    refuses(
      { OTEL_TRACES_SAMPLER: 'sometimes' },
      'OTEL_TRACES_SAMPLER',
      'Invalid OTEL_TRACES_SAMPLER: expected one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio, got "sometimes"',
    );
    refuses({ OTEL_TRACES_SAMPLER_ARG: '1.5' }, 'OTEL_TRACES_SAMPLER_ARG', 'Invalid OTEL_TRACES_SAMPLER_ARG: expected a number from 0 to 1, got "1.5"');
    refuses({ OTEL_SDK_DISABLED: 'maybe' }, 'OTEL_SDK_DISABLED', 'Invalid OTEL_SDK_DISABLED: expected true or false, got "maybe"');
    refuses(
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' },
      'OTEL_EXPORTER_OTLP_ENDPOINT',
      'Invalid OTEL_EXPORTER_OTLP_ENDPOINT: expected an http or https URL, got "collector:4318"',
    );
    refuses(
      { OTEL_RESOURCE_ATTRIBUTES: 'novalue' },
      'OTEL_RESOURCE_ATTRIBUTES',
      'Invalid OTEL_RESOURCE_ATTRIBUTES: expected a comma-separated list of key=value pairs (values URL-encoded), got "novalue"',
    );
  });

  test('a malformed headers list is refused without showing its value, which may hold a secret', () => {
    refuses(
      { OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%zz' },
      'OTEL_EXPORTER_OTLP_HEADERS',
      'Invalid OTEL_EXPORTER_OTLP_HEADERS: expected a comma-separated list of key=value pairs (values URL-encoded), got "(hidden)"',
    );
  });
});
