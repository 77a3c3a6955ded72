import { spawn, type ChildProcess } from 'node:child_process';
import { access, constants } from 'node:fs/promises';
import path from 'node:path';
import type { JSONRPCMessage, Transport } from '@modelcontextprotocol/client';
import type { Logger } from 'pino';
import type { StdioUpstream } from '../config.js';
import type { ConfinedLaunch, UpstreamConfinement } from '../confinement.js';
import { CLOSE_SLACK_MS, killProcessGroup, trackGroup } from '../../os/proc/process.js';
import { AnswerLedger, type ReadCounters } from '../answer-ledger.js';
import { DEFAULT_MAX_RESULT_BYTES } from '../message-bounds.js';
import { StdioMessageReader } from './reader.js';
import { forwardStderr } from './stderr.js';

const MiB = 1024 * 1024;
/** Output the process has not read yet past which it is taken as not reading its input at all. */
export const MAX_UNSENT_BYTES = 8 * MiB;
/**
 * A line begun on stdout that gets no byte for this long never ends: writers write a message in
 * one go. Every message after it waits behind it, so the upstream is broken then, or sooner when a
 * request sent while the line was open is given up after the line has been open this long.
 */
export const LINE_STALL_MS = 10_000;

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
  /**
   * The supervisor it runs under, confined or not (see `UpstreamConfinement`), or why there is
   * none here (no Perl): then it runs with the server's rights, and what it starts with `setsid`
   * is out of reach; `network: false` needs the confined supervisor.
   */
  confinement?: UpstreamConfinement | string;
  /** It may open sockets (default true). */
  network?: boolean;
  /** The most a call's answer may take (the upstream's `maxResultBytes`; default {@link DEFAULT_MAX_RESULT_BYTES}). */
  maxResultBytes?: number;
  /** Where what reading costs is counted (the upstream's, over its connections). */
  counters?: ReadCounters;
  /** See {@link LINE_STALL_MS} (its default). */
  lineStallMs?: number;
}

/**
 * The transport that starts `spec`'s process: its environment is its own `env` over PATH and HOME
 * from `baseEnv` (the server's), and nothing else of the server's.
 */
export function stdioTransport(
  spec: StdioUpstream,
  baseEnv: Record<string, string | undefined>,
  log: Logger,
  redact: (text: string) => string,
  confinement?: UpstreamConfinement | string,
  reading: Pick<StdioTransportOptions, 'counters' | 'lineStallMs'> = {},
): StdioProcessTransport {
  const env: Record<string, string> = {};
  for (const name of ['PATH', 'HOME']) if (baseEnv[name] !== undefined) env[name] = baseEnv[name];
  return new StdioProcessTransport({
    command: spec.command,
    args: spec.args,
    env: { ...env, ...spec.env },
    cwd: spec.cwd,
    log,
    redact,
    confinement,
    network: spec.network,
    maxResultBytes: spec.maxResultBytes,
    ...reading,
  });
}

/**
 * MCP's stdio transport for an upstream process, with what the SDK's own transport lacks for a
 * server: the process leads its own process group, so stopping it ends whatever it started too
 * (and so does the leader's own exit, and the server's, through `trackGroup`); confined, the
 * leader is the reaper's supervisor, which also ends what left the group; it gets only the
 * environment given; its stderr goes to the log line by line, bounded; what it writes is read by a
 * {@link StdioMessageReader}, each message bounded by what toolport awaits (`answers`) before it is
 * kept; a message past its bound, a line that never ends (see {@link LINE_STALL_MS}), or more than
 * {@link MAX_UNSENT_BYTES} of input it does not read, ends it.
 */
export class StdioProcessTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  /** The requests sent and what their answers may take. */
  readonly answers: AnswerLedger;
  readonly #options: StdioTransportOptions;
  readonly #reader: StdioMessageReader;
  readonly #lineStallMs: number;
  #stallTimer: NodeJS.Timeout | undefined;
  #child: ChildProcess | undefined;
  #closed = false;
  #groupKilled = false;
  #closeTimer: NodeJS.Timeout | undefined;
  /** How the process ended, for the error results of calls it took with it. */
  exit: string | undefined;

  constructor(options: StdioTransportOptions) {
    this.#options = options;
    this.answers = new AnswerLedger(options.maxResultBytes ?? DEFAULT_MAX_RESULT_BYTES, options.counters);
    this.#lineStallMs = options.lineStallMs ?? LINE_STALL_MS;
    this.#reader = new StdioMessageReader(this.answers, {
      message: (message) => {
        if (!this.#closed) this.onmessage?.(message);
      },
      broken: (why) => this.#broken(why),
    });
  }

  get pid(): number | undefined {
    return this.#child?.pid;
  }

  async start(): Promise<void> {
    const { command, args, env, log, redact, confinement } = this.#options;
    let launch: ConfinedLaunch | undefined;
    if (typeof confinement === 'string' && this.#options.network === false) {
      this.exit = 'could not start: "network": false needs the sandbox';
      this.#ended();
      throw new Error(`cannot run ${JSON.stringify(command)}: it has "network": false, and the sandbox that would hold it cannot run here (${confinement})`);
    }
    if (typeof confinement === 'object') {
      const cwd = this.#options.cwd === undefined ? undefined : path.resolve(this.#options.cwd);
      // The supervisor would start and then fail to run it: said here, as spawn says it unconfined.
      if (!(await runnable(command, env['PATH'] ?? '', cwd ?? process.cwd()))) {
        this.exit = 'could not start: ENOENT';
        this.#ended();
        throw new Error(`cannot run ${JSON.stringify(command)}: no such command`);
      }
      launch = await confinement.launch(command, args, { cwd, env, network: this.#options.network ?? true });
    }
    return new Promise((resolve, reject) => {
      const child = launch
        ? spawn(launch.file, launch.args, { env: launch.env, cwd: this.#options.cwd, stdio: ['pipe', 'pipe', 'pipe'], detached: true, windowsHide: true })
        : spawn(command, [...args], { env, cwd: this.#options.cwd, stdio: ['pipe', 'pipe', 'pipe'], detached: true, windowsHide: true });
      this.#child = child;
      child.once('error', (err) => {
        this.exit = `could not start: ${(err as NodeJS.ErrnoException).code ?? err.message}`;
        reject(new Error(`cannot run ${JSON.stringify(command)}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such command' : err.message}`));
        void launch?.release();
        this.#ended();
      });
      child.once('spawn', () => {
        // The supervisor gets SIGTERM when the server exits, and ends what left the group before
        // it goes: SIGKILL would end it first.
        if (child.pid !== undefined) trackGroup(child.pid, launch ? 'SIGTERM' : 'SIGKILL');
        resolve();
      });
      child.once('exit', (code, signal) => {
        void launch?.release();
        this.exit ??= signal !== null ? `killed by ${signal}` : `exited with status ${code}`;
        // The leader is gone: what it started in its group goes too (helpers would outlive every
        // restart), and a process that left the group and holds the pipes open cannot keep the
        // connection alive; what the leader wrote before it exited is read in the meantime.
        this.#killGroup();
        this.#closeTimer = setTimeout(() => {
          child.stdout?.destroy();
          child.stderr?.destroy();
          this.#ended();
        }, CLOSE_SLACK_MS);
        this.#closeTimer.unref();
      });
      child.once('close', () => this.#ended());
      child.stdout!.on('data', (chunk: Buffer) => this.#read(chunk));
      child.stdin!.on('error', (err) => this.onerror?.(err));
      // The supervisor says so when it stopped the upstream past a bound (the upstream could print
      // the same line: it would only change the reason shown for its own restart).
      const onLine = launch
        ? (line: string): void => {
            const bound = /^toolport supervisor: (went past its bound of \w+)$/.exec(line)?.[1];
            // It may come after the exit, whose status it explains.
            if (bound !== undefined && (this.exit === undefined || /^(killed by|exited with) /.test(this.exit))) this.exit = bound;
          }
        : undefined;
      forwardStderr(child, log, redact, onLine);
    });
  }

  #read(chunk: Buffer): void {
    if (this.#closed) return;
    this.#reader.push(chunk);
    if (this.#reader.lineOpenSince !== undefined && this.#stallTimer === undefined && !this.#closed) this.#watchStall(this.#lineStallMs);
  }

  /** Checks in `ms` that the line begun then has grown since, and again until it ends (a timer per line, not per chunk). */
  #watchStall(ms: number): void {
    this.#stallTimer = setTimeout(() => {
      this.#stallTimer = undefined;
      if (this.#closed || this.#reader.lineOpenSince === undefined) return;
      const quiet = performance.now() - this.#reader.lastProgress;
      if (quiet >= this.#lineStallMs) return this.#broken('sent a line that never ended');
      this.#watchStall(this.#lineStallMs - quiet);
    }, ms);
    this.#stallTimer.unref();
  }

  /** The upstream broke the protocol or a bound: the stream cannot be trusted further. */
  #broken(why: string): void {
    this.exit ??= why;
    this.onerror?.(new Error(`the upstream process ${why}`));
    void this.close();
  }

  /**
   * Writes at once and never waits for 'drain' (a listener per message is what a process that
   * does not read would pile up); the bound on what it has not read yet is the backpressure.
   */
  send(message: JSONRPCMessage): Promise<void> {
    const stdin = this.#child?.stdin;
    if (stdin === undefined || stdin === null || this.#closed || !stdin.writable) return Promise.reject(new Error('the upstream process is not running'));
    if ('method' in message && message.method === 'notifications/cancelled' && this.#givingUp(message.params?.['requestId'])) {
      return Promise.reject(new Error(`the upstream process ${this.exit}`));
    }
    this.answers.sent(message);
    if (stdin.writableLength > MAX_UNSENT_BYTES) {
      this.exit ??= `did not read its input (more than ${MAX_UNSENT_BYTES / MiB} MiB waited for it)`;
      // What it will never read is let go of now, not when the process is gone.
      stdin.destroy();
      void this.close();
      return Promise.reject(new Error(`the upstream process ${this.exit}`));
    }
    stdin.write(`${JSON.stringify(message)}\n`);
    return Promise.resolve();
  }

  /**
   * A request is given up (timed out or aborted): when a line that was open before it was sent
   * still is, and has been for the stall time, its answer could never come past that line.
   */
  #givingUp(id: unknown): boolean {
    const sentAt = typeof id === 'string' || typeof id === 'number' ? this.answers.sentAt(id) : undefined;
    const openSince = this.#reader.lineOpenSince;
    if (sentAt === undefined || openSince === undefined || openSince > sentAt || performance.now() - openSince < this.#lineStallMs) return false;
    this.#broken('sent a line that never ended');
    return true;
  }

  async close(): Promise<void> {
    const child = this.#child;
    if (child?.pid !== undefined && child.exitCode === null && child.signalCode === null) {
      this.exit ??= 'stopped by toolport';
      child.stdin?.end();
      this.#killGroup();
    }
    this.#ended();
  }

  /** Why connecting through this transport failed with `err`, in words safe to log and show: the process's exit, or the error's first line. */
  describeFailure(err: unknown): string {
    const message = (err as Error)?.message ?? String(err);
    if (this.exit !== undefined) return message.startsWith('cannot run') ? message : `the process ${this.exit} before it answered`;
    const cause = err instanceof Error && err.cause instanceof Error ? `: ${(err.cause as NodeJS.ErrnoException).code ?? err.cause.message}` : '';
    return `${message.split('\n')[0]}${cause}`.slice(0, 300);
  }

  /** SIGTERM to the group, SIGKILL later if any of it is left; `killProcessGroup` stops tracking the group once it is empty. */
  #killGroup(): void {
    const pid = this.#child?.pid;
    if (pid === undefined || this.#groupKilled) return;
    this.#groupKilled = true;
    killProcessGroup(pid);
  }

  #ended(): void {
    clearTimeout(this.#closeTimer);
    if (this.#closed) return;
    this.#closed = true;
    clearTimeout(this.#stallTimer);
    this.#reader.stop();
    this.onclose?.();
  }
}

/** True when `command` names an executable file, by its path or found on `PATH` (as execvp finds it). */
async function runnable(command: string, PATH: string, cwd: string): Promise<boolean> {
  const candidates = command.includes('/') ? [path.resolve(cwd, command)] : PATH.split(':').map((dir) => path.resolve(cwd, dir || '.', command));
  for (const candidate of candidates) {
    try {
      await access(candidate, constants.X_OK);
      return true;
    } catch {
      // Not this one.
    }
  }
  return false;
}
