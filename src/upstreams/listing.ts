import type { Client, StandardSchemaV1 } from '@modelcontextprotocol/client';
import type { Logger } from 'pino';
import type { UpstreamSpec } from './config.js';
import { DEFINITION_LIMITS } from './definitions.js';
import { isRecord } from '../core/json.js';

/** Most of a tool list read, all pages together (as JSON): past it, or past DEFINITION_LIMITS.tools tools, the rest is not read. */
const LIST_BUDGET_CHARS = 16 * 1024 * 1024;
/** Most pages of a tool list read (the SDK's own default). */
const LIST_MAX_PAGES = 64;
/**
 * The spacing between the end of one listing and the start of the next (for a list_changed, or the
 * periodic re-list): at least the first, doubled while demands keep coming within it, up to the
 * second, and back to the first after one spacing passed without a demand. An upstream that
 * announces without pause is listed about 6 times a minute (each listing up to 16 MiB to read),
 * and a change still reaches toolport within 10 s.
 */
export const RELIST_SPACING_MS = { min: 300, max: 10_000 } as const;

/** A page of `tools/list` as received: its entries untouched, for toolport's own checks to judge one by one. */
export interface ToolsPage {
  tools: unknown[];
  nextCursor?: string;
}

/**
 * The result schemas toolport asks the SDK to hold upstream answers to: only the shape it needs,
 * every entry and key kept as received. The SDK's own (Zod) schemas refuse a whole list for one
 * bad entry, and drop keys they do not know from what the lock's digest must cover.
 */
export const PERMISSIVE = {
  toolsPage: permissive<ToolsPage>((value) => {
    if (!isRecord(value) || !Array.isArray(value['tools'])) return 'the result has no "tools" array';
    if (value['nextCursor'] !== undefined && typeof value['nextCursor'] !== 'string') return 'its "nextCursor" is not a string';
    return undefined;
  }),
  // fromMCPCallResult reads any object tolerantly.
  callResult: permissive<Record<string, unknown>>((value) => (isRecord(value) ? undefined : 'the result is not an object')),
};

/** A tool list as read: what passed the upstream's `tools` filter, and what was read when the list was cut short. */
export interface ToolListing {
  tools: unknown[];
  cut?: { tools: number; pages: number; chars: number };
}

/**
 * Reads the upstream's tool list page by page, and reads no further page past DEFINITION_LIMITS.tools tools
 * (those its `tools` filter leaves out do not count), past LIST_BUDGET_CHARS or past
 * LIST_MAX_PAGES: what a hostile upstream lists is bounded before anything checks it. An
 * upstream that does not offer tools lists none.
 */
export async function listTools(client: Client, filter: UpstreamSpec['tools'], timeout: number): Promise<ToolListing> {
  if (client.getServerCapabilities()?.tools === undefined) return { tools: [] };
  const tools: unknown[] = [];
  let chars = 0;
  let pages = 0;
  let cursor: string | undefined;
  do {
    const request = cursor === undefined ? { method: 'tools/list' } : { method: 'tools/list', params: { cursor } };
    const page = await client.request(request, PERMISSIVE.toolsPage, { timeout });
    pages++;
    chars += JSON.stringify(page.tools).length;
    for (const tool of page.tools) if (selected(tool, filter)) tools.push(tool);
    cursor = page.nextCursor;
    // The pages read are checked whole: the checks count and name the tools past the bound.
    if (cursor !== undefined && (tools.length > DEFINITION_LIMITS.tools || chars > LIST_BUDGET_CHARS || pages >= LIST_MAX_PAGES)) {
      return { tools, cut: { tools: tools.length, pages, chars } };
    }
  } while (cursor !== undefined);
  return { tools };
}

/** Lists one upstream's tools (see {@link listTools}), and warns of a list cut short once until a listing is whole again. */
export class ToolLister {
  readonly #filter: UpstreamSpec['tools'];
  readonly #timeoutMs: number;
  readonly #log: Logger;
  #cut = false;

  constructor(filter: UpstreamSpec['tools'], timeoutMs: number, log: Logger) {
    this.#filter = filter;
    this.#timeoutMs = timeoutMs;
    this.#log = log;
  }

  async list(client: Client): Promise<unknown[]> {
    const { tools, cut } = await listTools(client, this.#filter, this.#timeoutMs);
    if (cut !== undefined && !this.#cut) {
      this.#log.warn(
        { ...cut, maxTools: DEFINITION_LIMITS.tools, maxChars: LIST_BUDGET_CHARS, maxPages: LIST_MAX_PAGES },
        'upstream tool list too long: the rest of it is not read',
      );
    }
    this.#cut = cut !== undefined;
    return tools;
  }
}

/**
 * Runs `list` on demand (list_changed, the periodic re-list): one listing at a time, and the next
 * one a spacing after it ends (see RELIST_SPACING_MS), whenever the demand came: any number of
 * demands during a listing or its spacing make one more listing. None once `live()` is false (the
 * connection it lists is gone). `pending()` says the connection's first listing, made without
 * it, just ended: its spacing starts, and a demand that came meanwhile is listed after it. `list`
 * handles its own failures; a failed listing is spaced as any other.
 */
export function relister(
  list: () => Promise<void>,
  live: () => boolean,
  spacing: { min: number; max: number } = RELIST_SPACING_MS,
): (() => void) & { pending(): void } {
  let interval = spacing.min;
  // Listing, or waiting out the spacing after a listing: a demand now only sets `again`.
  let busy = false;
  let again = false;
  const run = (): void => {
    busy = true;
    again = false;
    void list().finally(space);
  };
  const space = (): void => {
    if (!live()) {
      busy = false;
      return;
    }
    busy = true;
    setTimeout(() => {
      if (again && live()) {
        // Demanded again within the spacing: the upstream keeps announcing, so it waits longer next time.
        interval = Math.min(interval * 2, spacing.max);
        run();
      } else {
        busy = false;
        interval = spacing.min;
      }
    }, interval).unref();
  };
  const relist = (): void => {
    again = true;
    if (busy || !live()) return;
    run();
  };
  return Object.assign(relist, {
    pending: () => {
      if (!busy) space();
    },
  });
}

/** Whether the tool list entry `tool` passes the upstream's `tools` filter (an entry without a name string passes, to be refused by the checks). */
function selected(tool: unknown, filter: UpstreamSpec['tools']): boolean {
  const name = isRecord(tool) ? tool['name'] : undefined;
  if (filter === undefined || typeof name !== 'string') return true;
  return (filter.include?.includes(name) ?? true) && !(filter.exclude?.includes(name) ?? false);
}

/** A Standard Schema that passes a value through as it is, or fails with what `problem` says of it. */
function permissive<T>(problem: (value: unknown) => string | undefined): StandardSchemaV1<unknown, T> {
  return {
    '~standard': {
      version: 1,
      vendor: 'toolport',
      validate: (value) => {
        const message = problem(value);
        return message === undefined ? { value: value as T } : { issues: [{ message }] };
      },
    },
  };
}
