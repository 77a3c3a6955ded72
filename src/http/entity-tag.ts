import { createHash } from 'node:crypto';

// Made once per body: the bodies that get one are the tool lists, each made once.
const tags = new WeakMap<Buffer, string>();

/**
 * A strong entity tag for a body that never changes (RFC 9110 section 8.8.3): 128 bits of its
 * SHA-256, so two bodies that differ in any byte get different tags. Computed once per Buffer.
 */
export function entityTag(body: Buffer): string {
  let tag = tags.get(body);
  if (tag === undefined) {
    tag = `"${createHash('sha256').update(body).digest().subarray(0, 16).toString('base64url')}"`;
    tags.set(body, tag);
  }
  return tag;
}

/**
 * Whether an `If-None-Match` header names `tag` (or is `*`), so a GET may answer 304. The
 * comparison is the weak one RFC 9110 section 13.1.2 asks for here: `W/"x"` matches `"x"`.
 */
export function noneMatch(header: string | undefined, tag: string): boolean {
  if (header === undefined) return false;
  if (header === tag) return true;
  for (const given of header.split(',')) {
    const trimmed = given.trim();
    if (trimmed === '*' || trimmed === tag || trimmed === `W/${tag}`) return true;
  }
  return false;
}
