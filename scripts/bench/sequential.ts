import http from 'node:http';
import type { RequestSpec } from './wrk.js';

/** Latencies of calls made one after another, and what went wrong with any of them. */
export interface SequentialResult {
  latenciesMs: number[];
  failures: string[];
}

/**
 * Sends `request` `calls` times, one after another, over one kept-alive connection (after
 * `warmUp` unmeasured calls), `pauseMs` apart, and times each from sending to the last byte of
 * the answer. A call counts as failed unless it answers 2xx with `"isError":false`.
 */
export async function sequentialLatencies(url: string, request: RequestSpec, calls: number, warmUp: number, pauseMs = 0): Promise<SequentialResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const latenciesMs: number[] = [];
  const failures: string[] = [];
  try {
    for (let i = 0; i < warmUp + calls; i++) {
      if (pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, pauseMs));
      const started = performance.now();
      const { status, body } = await send(agent, url, request);
      const ms = performance.now() - started;
      if (status < 200 || status > 299 || !body.includes('"isError":false')) {
        failures.push(`${request.method} ${request.path} answered ${status}: ${body.slice(0, 200)}`);
      }
      // Microseconds are as fine as a timer around a whole HTTP call can be.
      if (i >= warmUp) latenciesMs.push(Math.round(ms * 1000) / 1000);
    }
  } finally {
    agent.destroy();
  }
  return { latenciesMs, failures };
}

function send(agent: http.Agent, url: string, request: RequestSpec): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const body = request.body ?? '';
    const headers = { ...request.headers, 'content-length': String(Buffer.byteLength(body)) };
    const req = http.request(`${url}${request.path}`, { method: request.method, agent, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}
