import { ToolRegistry } from '#src/core/registry.js';

/** A registry that counts the listeners on it: one is there while a client's stream or subscription is open. */
export class WatchedRegistry extends ToolRegistry {
  listeners = 0;

  override onChange(listener: () => void): () => void {
    this.listeners++;
    const off = super.onChange(listener);
    return () => {
      this.listeners--;
      off();
    };
  }
}
