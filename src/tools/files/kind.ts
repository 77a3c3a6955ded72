/** The image types every provider takes, and the only ones Read reports as images. */
export type ImageMediaType = 'image/png' | 'image/jpeg' | 'image/gif' | 'image/webp';

/** How much of a file's start decides whether it is text. */
export const SNIFF_BYTES = 8 * 1024;

const startsWith = (data: Uint8Array, bytes: readonly number[], at = 0): boolean =>
  data.length >= at + bytes.length && bytes.every((b, i) => data[at + i] === b);

const ascii = (text: string): number[] => [...text].map((c) => c.charCodeAt(0));

/** The image type of a file, decided by its magic bytes (never by its name). */
export function imageMediaType(data: Uint8Array): ImageMediaType | undefined {
  if (startsWith(data, [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) return 'image/png';
  if (startsWith(data, [0xff, 0xd8, 0xff])) return 'image/jpeg';
  if (startsWith(data, ascii('GIF87a')) || startsWith(data, ascii('GIF89a'))) return 'image/gif';
  if (startsWith(data, ascii('RIFF')) && startsWith(data, ascii('WEBP'), 8)) return 'image/webp';
  return undefined;
}

/**
 * True when the first `SNIFF_BYTES` of a file hold a NUL byte or are not valid UTF-8. A multi-byte
 * character cut by the end of the window is not counted against the file.
 */
export function looksBinary(data: Uint8Array): boolean {
  const head = data.subarray(0, SNIFF_BYTES);
  if (head.includes(0)) return true;
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(head, { stream: head.length < data.length });
    return false;
  } catch {
    return true;
  }
}
