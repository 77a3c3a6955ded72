import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import type { Cleanup } from './workspace.js';

/** The reference MCP server that exercises every protocol feature (a dev dependency): `node EVERYTHING stdio|streamableHttp`. */
export const EVERYTHING = createRequire(import.meta.url).resolve('@modelcontextprotocol/server-everything/dist/index.js');

/** The everything server in its Streamable HTTP mode on `port`, killed when `t` ends; resolves once it listens. */
export async function everythingOverHttp(t: Cleanup, port: number): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, [EVERYTHING, 'streamableHttp'], {
    env: { PATH: process.env.PATH, PORT: String(port) },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  t.after(() => void child.kill('SIGKILL'));
  let stderr = '';
  await new Promise<void>((resolve, reject) => {
    child.stderr!.on('data', (chunk) => {
      stderr += String(chunk);
      if (stderr.includes('listening on port')) resolve();
    });
    child.once('exit', () => reject(new Error(`the everything server exited: ${stderr}`)));
  });
  return { child, url: `http://127.0.0.1:${port}/mcp` };
}
