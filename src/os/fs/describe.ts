// Paths and sizes in words, for the messages the file machinery and the tools give.

/** A client's path, quoted for a message; long paths are cut so the message stays readable. */
export function quotePath(given: string): string {
  return JSON.stringify(given.length > 200 ? `${given.slice(0, 200)}...` : given);
}

/** A byte count for people: `512 bytes`, `3.2 KiB`, `10.0 MiB`, `2.0 GiB`. */
export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} bytes`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  if (bytes < 1024 ** 3) return `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
  return `${(bytes / 1024 ** 3).toFixed(1)} GiB`;
}
