// The trace of the log line being written, when tracing is on: the logger asks here (a pino
// mixin) and src/telemetry/ answers, so the logger never loads OpenTelemetry itself.

type TraceFields = () => { trace_id: string; span_id: string } | undefined;

let current: TraceFields | undefined;

/** Set by tracing when it starts (undefined again when it stops). */
export function setTraceFields(fields: TraceFields | undefined): void {
  current = fields;
}

/** The pino mixin of a traced process: `trace_id` and `span_id` of the active span, or nothing. */
export function traceMixin(): object {
  return current?.() ?? {};
}
