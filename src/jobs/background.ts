import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * Marks the work the workers do (job handlers, the outbound dispatcher's attempts and their
 * hooks), so that code it calls can tell it apart from a request's work: the dispatcher paces
 * its sends while requests write messages, not while the workers' own work does (it would hold
 * back its own messages).
 */
const background = new AsyncLocalStorage<true>();

/** Runs `work` as the workers' own. */
export function runInBackground<T>(work: () => Promise<T>): Promise<T> {
  return background.run(true, work);
}

/** Whether the caller runs inside the workers' own work. */
export function inBackground(): boolean {
  return background.getStore() === true;
}
