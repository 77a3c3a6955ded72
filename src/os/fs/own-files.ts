import { randomBytes } from 'node:crypto';

/**
 * The files the server itself creates inside the workspace: the temporary files a write renames
 * over its target, `.toolport-<key>.<random>.tmp` (`<key>`: 16 hex digits naming the target), and
 * the lock files of earlier versions, `.toolport-<key>.lock`, which are no longer taken (locks are
 * flocks now) but keep their name reserved. Listings and searches leave them out, Write and Edit
 * refuse the names, and start-up removes what a crash left behind, never a client's file.
 */
const OWN_NAME = /^\.toolport-[0-9a-f]{16}(\.lock|\.[0-9a-f]{8}\.tmp)$/;

/** Globs (for rg and picomatch) that match the server's own files. */
export const OWN_FILE_GLOBS = ['.toolport-*.tmp', '.toolport-*.lock'] as const;

/** True for a name the server gives its own files. */
export function isOwnFileName(name: string): boolean {
  return OWN_NAME.test(name);
}

/** A fresh name for a temporary file written under the lock of `key`: short, well under the 255-byte name limit. */
export function tempFileName(key: string): string {
  return `.toolport-${key.slice(0, 16)}.${randomBytes(4).toString('hex')}.tmp`;
}

/** The name earlier versions gave the lock file of the target with key `key` in one directory; one found is a leftover. */
export function lockFileName(key: string): string {
  return `.toolport-${key.slice(0, 16)}.lock`;
}
