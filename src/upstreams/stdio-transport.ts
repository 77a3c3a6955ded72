import { spawn, type ChildProcess } from 'node:child_process';
import { ReadBuffer, serializeMessage, type JSONRPCMessage, type Transport } from '@modelcontextprotocol/client';
import type { Logger } from 'pino';
import { forgetGroup, killProcessGroup, trackGroup } from '../os/proc/process.js';

/** Longest stderr line kept whole in the log; the rest of a longer one is cut. */
const MAX_STDERR_LINE = 4096;
/** Most stderr lines logged per second; past it, lines are counted and the count logged. */
const MAX_STDERR_LINES_PER_SECOND = 50;
/** Largest message an upstream may send on stdout before it is taken as broken. */
const MAX_MESSAGE_BYTES = 64 * 1024 * 1024;

export interface StdioTransportOptions {
  command: string;
  args: readonly string[];
  /** The whole environment the process gets: the caller decides what goes in (never toolport's own). */
  env: Record<string, string>;
  cwd: string | undefined;
  /** Where the process's stderr goes, line by line. */
  log: Logger;
  /** Hides the upstream's secrets in what goes to the log. */
  redact: (text: string) => string;
}

/**
 * MCP's stdio transport for an upstream process, with what the SDK's own transport lacks for a
 * server: the process leads its own process group, so stopping it ends whatever it started too
 * (and the server's exit does, through `trackGroup`); it gets only the environment given; its
 * stderr goes to the log line by line, bounded; a message stream that grows past a bound ends it.
 */
export class StdioProcessTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  readonly #options: StdioTransportOptions;
  readonly #buffer = new ReadBuffer({ maxBufferSize: MAX_MESSAGE_BYTES });
  #child: ChildProcess | undefined;
  #closed = false;
  /** How the process ended, for the error results of calls it took with it. */
  exit: string | undefined;

  constructor(options: StdioTransportOptions) {
    this.#options = options;
  }

  get pid(): number | undefined {
    return this.#child?.pid;
  }

  start(): Promise<void> {
    const { command, args, env, cwd, log, redact } = this.#options;
    return new Promise((resolve, reject) => {
      const child = spawn(command, [...args], { env, cwd, stdio: ['pipe', 'pipe', 'pipe'], detached: true, windowsHide: true });
      this.#child = child;
      child.once('error', (err) => {
        this.exit = `could not start: ${(err as NodeJS.ErrnoException).code ?? err.message}`;
        reject(new Error(`cannot run ${JSON.stringify(command)}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such command' : err.message}`));
        this.#ended();
      });
      child.once('spawn', () => {
        if (child.pid !== undefined) trackGroup(child.pid, 'SIGKILL');
        resolve();
      });
      child.once('close', (code, signal) => {
        this.exit ??= signal !== null ? `killed by ${signal}` : `exited with status ${code}`;
        if (child.pid !== undefined) forgetGroup(child.pid);
        this.#ended();
      });
      child.stdout!.on('data', (chunk: Buffer) => this.#read(chunk));
      child.stdin!.on('error', (err) => this.onerror?.(err));
      forwardStderr(child, log, redact);
    });
  }

  #read(chunk: Buffer): void {
    try {
      this.#buffer.append(chunk);
      for (let message = this.#buffer.readMessage(); message !== null; message = this.#buffer.readMessage()) this.onmessage?.(message);
    } catch (err) {
      // A line that is not JSON-RPC, or one past the bound: the stream cannot be trusted further.
      this.exit = `sent what is not a JSON-RPC message (${(err as Error).message.split('\n')[0]})`;
      this.onerror?.(err as Error);
      void this.close();
    }
  }

  send(message: JSONRPCMessage): Promise<void> {
    return new Promise((resolve, reject) => {
      const stdin = this.#child?.stdin;
      if (stdin === undefined || stdin === null || this.#closed) {
        reject(new Error('the upstream process is not running'));
        return;
      }
      if (stdin.write(serializeMessage(message))) resolve();
      else stdin.once('drain', resolve);
    });
  }

  async close(): Promise<void> {
    const child = this.#child;
    if (child?.pid !== undefined && child.exitCode === null && child.signalCode === null) {
      this.exit ??= 'stopped by toolport';
      child.stdin?.end();
      killProcessGroup(child.pid);
    }
    this.#ended();
  }

  #ended(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#buffer.clear();
    this.onclose?.();
  }
}

/** The process's stderr in the log, a line per entry, cut and rate-bounded so a chatty process cannot flood it. */
function forwardStderr(child: ChildProcess, log: Logger, redact: (text: string) => string): void {
  let partial = '';
  let windowStart = 0;
  let inWindow = 0;
  let dropped = 0;
  const emit = (line: string): void => {
    const now = Date.now();
    if (now - windowStart >= 1000) {
      if (dropped > 0) log.warn({ dropped }, 'upstream stderr lines dropped (more than 50 a second)');
      windowStart = now;
      inWindow = 0;
      dropped = 0;
    }
    if (++inWindow > MAX_STDERR_LINES_PER_SECOND) {
      dropped++;
      return;
    }
    log.info({ stderr: redact(line.length > MAX_STDERR_LINE ? `${line.slice(0, MAX_STDERR_LINE)}…` : line) }, 'upstream stderr');
  };
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (chunk: string) => {
    const lines = (partial + chunk).split('\n');
    partial = lines.pop() ?? '';
    if (partial.length > MAX_STDERR_LINE) {
      emit(partial);
      partial = '';
    }
    for (const line of lines) if (line.trim() !== '') emit(line.replace(/\r$/, ''));
  });
  child.stderr!.on('end', () => {
    if (partial.trim() !== '') emit(partial);
  });
}
