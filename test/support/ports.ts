import { createServer } from 'node:net';

/** A loopback port free a moment ago, for a server that must be told its port (it cannot report one it chose). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}
