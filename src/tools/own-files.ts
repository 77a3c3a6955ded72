import { randomBytes } from 'node:crypto';

/**
 * The files the server itself creates inside the workspace: temporary files that an atomic write
 * renames over its target, and lock files that order writes to one file across processes. Their
 * names follow one pattern, so listings and searches can leave them out and start-up can remove
 * the ones a crash left behind, without ever touching a client's file.
 */
const OWN_NAME = /^\.toolport-[0-9a-f]{16}\.(tmp|lock)$/;

/** Globs (for rg and picomatch) that match the server's own files. */
export const OWN_FILE_GLOBS = ['.toolport-*.tmp', '.toolport-*.lock'] as const;

/** True for a name the server gave one of its own files. */
export function isOwnFileName(name: string): boolean {
  return OWN_NAME.test(name);
}

/** A fresh name for a temporary file: short, so it never passes the 255-byte name limit. */
export function tempFileName(): string {
  return `.toolport-${randomBytes(8).toString('hex')}.tmp`;
}

/** The name of the lock file for the entry `key` (a hex digest) of one directory. */
export function lockFileName(key: string): string {
  return `.toolport-${key.slice(0, 16)}.lock`;
}
