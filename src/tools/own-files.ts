import { randomBytes } from 'node:crypto';

/**
 * The files the server itself creates inside the workspace: lock files that order the writes of
 * one file across processes, `.toolport-<key>.lock`, and the temporary files a write renames over
 * its target, `.toolport-<key>.<random>.tmp`, named after the lock held while they exist (`<key>`:
 * 16 hex digits naming the target). Listings and searches leave them out, Write and Edit refuse
 * the names, and start-up removes what a crash left behind, never a client's file.
 */
const OWN_NAME = /^\.toolport-[0-9a-f]{16}(\.lock|\.[0-9a-f]{8}\.tmp)$/;
const TEMP_NAME = /^\.toolport-([0-9a-f]{16})\.[0-9a-f]{8}\.tmp$/;

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

/** The name of the lock file for the target with key `key` (a hex digest) in one directory. */
export function lockFileName(key: string): string {
  return `.toolport-${key.slice(0, 16)}.lock`;
}

/** For a temporary file's name, the name of the lock its writer held; undefined for other names. */
export function lockOfTempFile(name: string): string | undefined {
  const key = TEMP_NAME.exec(name)?.[1];
  return key === undefined ? undefined : lockFileName(key);
}
