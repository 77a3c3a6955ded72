import { constants } from 'node:fs';
import { open } from 'node:fs/promises';

/** Largest file Read and Edit load; bigger ones are refused before any byte is read. */
export const MAX_FILE_BYTES = 10 * 1024 * 1024;

export type LoadedFile =
  | { kind: 'file'; data: Buffer; mode: number }
  | { kind: 'directory' }
  | { kind: 'special' }
  | { kind: 'too-large'; size: number };

/**
 * Loads a regular file whole. The checks run on the opened descriptor, so what is checked is what
 * is read: a directory, a FIFO, socket or device (which could block or never end) and a file over
 * `MAX_FILE_BYTES` are reported instead of read. The last part of the path is not followed if it
 * is a symbolic link (callers pass canonical paths; a link there means it changed since).
 * File-system errors are thrown.
 */
export async function loadRegularFile(absolute: string, signal?: AbortSignal): Promise<LoadedFile> {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
  const flags = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
  const handle = await open(absolute, flags);
  try {
    const stats = await handle.stat();
    if (stats.isDirectory()) return { kind: 'directory' };
    if (!stats.isFile()) return { kind: 'special' };
    if (stats.size > MAX_FILE_BYTES) return { kind: 'too-large', size: stats.size };
    const data = await handle.readFile({ signal });
    // The file may have grown between the check and the read.
    if (data.length > MAX_FILE_BYTES) return { kind: 'too-large', size: data.length };
    return { kind: 'file', data, mode: stats.mode & 0o7777 };
  } finally {
    await handle.close();
  }
}
