// The cold-start baseline of `npm run bench`: a bare Fastify 5 server with one route, started the
// way `node dist/server.js` is (plain JavaScript, no loader), on `PORT`. JavaScript, not TypeScript:
// even Node's type stripping would add its own start-up cost to the figure it is compared with.
import process from 'node:process';
import Fastify from 'fastify';

const app = Fastify();
app.get('/healthz', async () => ({ status: 'ok' }));
await app.listen({ port: Number(process.env.PORT ?? 0), host: process.env.HOST ?? '127.0.0.1' });
