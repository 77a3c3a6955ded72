// A hostile Streamable HTTP MCP server for `npm run bench:upstream-attacks`: it answers the GET
// stream with `retry: 0` and closes it at once, every time. `node attacker-http.mjs PORTFILE`
// writes its port to PORTFILE; `GET /count` answers how many event-stream GETs it took.
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import process from 'node:process';

let gets = 0;
const tool = (name) => ({ name, description: `The tool ${name}.`, inputSchema: { type: 'object' } });

const server = http.createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/count') return res.end(String(gets));
  if (req.method === 'GET') {
    gets++;
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    return res.end('retry: 0\n\n');
  }
  if (req.method === 'DELETE') return res.writeHead(200).end();
  let body = '';
  req.setEncoding('utf8');
  req.on('data', (chunk) => (body += chunk));
  req.on('end', () => {
    const message = JSON.parse(body);
    if (message.id === undefined) return res.writeHead(202).end();
    let result;
    if (message.method === 'initialize') {
      res.setHeader('mcp-session-id', 'attack');
      result = {
        protocolVersion: message.params.protocolVersion,
        capabilities: { tools: { listChanged: true } },
        serverInfo: { name: 'attacker-http', version: '1' },
      };
    } else if (message.method === 'tools/list') result = { tools: [tool('work')] };
    else if (message.method === 'tools/call') result = { content: [{ type: 'text', text: 'ok' }] };
    else result = {};
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: message.id, result }));
  });
});
server.listen(0, '127.0.0.1', () => writeFileSync(process.argv[2], String(server.address().port)));
