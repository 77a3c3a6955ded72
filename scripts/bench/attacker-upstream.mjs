// A hostile stdio MCP server for `npm run bench:upstream-attacks`: raw JSON-RPC, so it can do what
// the MCP SDK would not. `node attacker-upstream.mjs <mode>`; it writes `listings N` (the tools/list
// it answered) to stderr every 500 ms, which toolport logs. Modes (each acts after `notifications/initialized`):
//   quiet          16 small tools; the baseline
//   churn          16 tools of about 50 KiB each, with patterns new at every listing (0.8 MiB in all,
//                  within every bound), and a list_changed right after each listing
//   bigpage        after its first listing, answers every tools/list with one 31 MiB page of
//                  200,000 tools, and announces list_changed every 200 ms
//   unknown        writes 30 MiB answers to ids toolport never sent, one every 200 ms
//   bigresult      its tool `big` answers 30 MiB of text
//   bigstructured  its tool `structured` answers about 28 MiB of structuredContent (250,000 objects)
import process from 'node:process';
import { setInterval } from 'node:timers';

const mode = process.argv[2] ?? 'quiet';
const MiB = 1024 * 1024;
const write = (text) => process.stdout.write(`${text}\n`);
const out = (message) => write(JSON.stringify(message));
const small = (name) => ({ name, description: `The tool ${name}.`, inputSchema: { type: 'object' } });

let generation = 0;
let listings = 0;

function churningTool(i) {
  const properties = {};
  for (let p = 0; p < 420; p++) properties[`p${p}`] = { type: 'string', pattern: `^g${generation}t${i}p${p}[a-z]{1,8}(x|y)+$` };
  return { name: `churn${i}`, description: `Churning tool ${i}.`, inputSchema: { type: 'object', properties } };
}

// One page of 200,000 tools, made once: about 31 MiB of JSON.
let bigPage;
function bigPageText(id) {
  bigPage ??= JSON.stringify(Array.from({ length: 200_000 }, (_, i) => ({ name: `t${i}`, description: 'd'.repeat(100), inputSchema: { type: 'object' } })));
  return `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":{"tools":${bigPage}}}`;
}

let bigText;
const thirtyMiB = () => (bigText ??= 'x'.repeat(30 * MiB));

let structured;
function structuredText(id) {
  structured ??= JSON.stringify({ rows: Array.from({ length: 250_000 }, (_, i) => ({ id: i, name: `row ${i}`, value: 'v'.repeat(80) })) });
  return `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":{"content":[{"type":"text","text":"ok"}],"structuredContent":${structured}}}`;
}

function onMessage(message) {
  if (message.method === 'initialize') {
    out({
      jsonrpc: '2.0',
      id: message.id,
      result: {
        protocolVersion: message.params.protocolVersion,
        capabilities: { tools: { listChanged: true } },
        serverInfo: { name: `attacker-${mode}`, version: '1' },
      },
    });
  } else if (message.method === 'notifications/initialized') {
    afterInitialized();
  } else if (message.method === 'tools/list') {
    listings++;
    if (mode === 'churn') {
      generation++;
      out({ jsonrpc: '2.0', id: message.id, result: { tools: Array.from({ length: 16 }, (_, i) => churningTool(i)) } });
      out({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' });
    } else if (mode === 'bigpage' && listings > 1) {
      write(bigPageText(message.id));
    } else {
      const tools = Array.from({ length: 16 }, (_, i) => small(`tool${i}`));
      if (mode === 'bigresult') tools.push(small('big'));
      if (mode === 'bigstructured') tools.push(small('structured'));
      out({ jsonrpc: '2.0', id: message.id, result: { tools } });
    }
  } else if (message.method === 'tools/call') {
    const name = message.params?.name;
    if (name === 'big') out({ jsonrpc: '2.0', id: message.id, result: { content: [{ type: 'text', text: thirtyMiB() }] } });
    else if (name === 'structured') write(structuredText(message.id));
    else out({ jsonrpc: '2.0', id: message.id, result: { content: [{ type: 'text', text: 'ok' }] } });
  } else if (message.method === 'ping' && message.id !== undefined) {
    out({ jsonrpc: '2.0', id: message.id, result: {} });
  }
}

setInterval(() => process.stderr.write(`listings ${listings}\n`), 500);

function afterInitialized() {
  if (mode === 'bigpage') setInterval(() => out({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' }), 200);
  if (mode === 'unknown') {
    let n = 0;
    setInterval(() => {
      if (process.stdout.writableLength > 64 * MiB) return;
      out({ jsonrpc: '2.0', id: 1_000_000_000 + n++, result: { content: [{ type: 'text', text: thirtyMiB() }] } });
    }, 200);
  }
}

let buffered = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
  buffered += chunk;
  for (let end = buffered.indexOf('\n'); end !== -1; end = buffered.indexOf('\n')) {
    const line = buffered.slice(0, end);
    buffered = buffered.slice(end + 1);
    if (line.trim() !== '') onMessage(JSON.parse(line));
  }
});
process.stdin.on('end', () => process.exit(0));
