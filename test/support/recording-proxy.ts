import { createServer, request as forward, type IncomingHttpHeaders } from 'node:http';
import type { Cleanup } from './workspace.js';

/** One request the proxy passed on: its headers and, for a JSON body, the body parsed. */
export interface ProxiedRequest {
  method: string;
  headers: IncomingHttpHeaders;
  body: unknown;
}

/**
 * A proxy in front of an HTTP server (an upstream MCP server) that records each request's headers
 * and JSON body before passing it on, and streams the answer back as it comes (event streams too).
 */
export async function recordingProxy(t: Cleanup, target: string): Promise<{ url: string; requests: ProxiedRequest[] }> {
  const requests: ProxiedRequest[] = [];
  const to = new URL(target);
  const server = createServer((incoming, outgoing) => {
    const chunks: Buffer[] = [];
    incoming.on('data', (chunk: Buffer) => chunks.push(chunk));
    incoming.on('end', () => {
      const raw = Buffer.concat(chunks);
      let body: unknown;
      try {
        body = raw.length === 0 ? undefined : JSON.parse(raw.toString('utf8'));
      } catch {
        body = undefined;
      }
      requests.push({ method: incoming.method ?? '', headers: incoming.headers, body });
      const upstream = forward(
        { host: to.hostname, port: to.port, path: incoming.url, method: incoming.method, headers: { ...incoming.headers, host: to.host } },
        (answer) => {
          outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(outgoing);
        },
      );
      upstream.on('error', () => outgoing.destroy());
      outgoing.on('close', () => upstream.destroy());
      upstream.end(raw);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}${to.pathname}`, requests };
}
