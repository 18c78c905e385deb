/**
 * A minimal typed event emitter (no Node `events` in browsers). Listener
 * failures never break the SDK: they are passed to `onListenerError`.
 */

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type EventMap = Record<string, (...args: any[]) => void>;

export class Emitter<E extends EventMap> {
  private readonly listeners = new Map<keyof E, Set<E[keyof E]>>();

  constructor(private readonly onListenerError: (e: unknown) => void = (e) => console.error("herald: listener failed", e)) {}

  /** Adds a listener; returns a function that removes it. */
  on<K extends keyof E>(event: K, fn: E[K]): () => void {
    let set = this.listeners.get(event);
    if (set === undefined) {
      set = new Set();
      this.listeners.set(event, set);
    }
    set.add(fn);
    return () => this.off(event, fn);
  }

  off<K extends keyof E>(event: K, fn: E[K]): void {
    this.listeners.get(event)?.delete(fn);
  }

  protected emit<K extends keyof E>(event: K, ...args: Parameters<E[K]>): void {
    const set = this.listeners.get(event);
    if (set === undefined) return;
    for (const fn of [...set]) {
      try {
        fn(...args);
      } catch (e) {
        this.onListenerError(e);
      }
    }
  }
}
