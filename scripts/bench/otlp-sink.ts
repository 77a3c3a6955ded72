import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** What the traced rows export to: an OTLP/HTTP endpoint that takes every batch and keeps none. */
export interface OtlpSink {
  /** The traces URL (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`). */
  url: string;
  /** Batches and bytes received so far: a traced row that sent nothing measured nothing. */
  received(): { batches: number; bytes: number };
  close(): Promise<void>;
}

/**
 * Answers each export 200 with an empty body, which is an empty ExportTraceServiceResponse in
 * both protobuf and JSON: a collector that is never the slow part, so that a traced row measures
 * what tracing costs the server.
 */
export async function startOtlpSink(): Promise<OtlpSink> {
  let batches = 0;
  let bytes = 0;
  const server = http.createServer((req, res) => {
    req.on('data', (chunk: Buffer) => (bytes += chunk.length));
    req.on('end', () => {
      if (req.url === '/v1/traces') batches++;
      res.writeHead(req.url === '/v1/traces' ? 200 : 404, { 'content-type': req.headers['content-type'] ?? 'application/x-protobuf', 'content-length': 0 });
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1/traces`,
    received: () => ({ batches, bytes }),
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
