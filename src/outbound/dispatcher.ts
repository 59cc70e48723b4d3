import type { JobLogger } from '../jobs/queue.ts';
import type { OutboundService } from './outbound.service.ts';

export interface DispatcherOptions {
  /** Messages sent at once by this process (16). */
  concurrency?: number;
  /** Pause between looks for due messages while none were found (250 ms). */
  idlePollMs?: number;
}

/**
 * Sends due outbound messages from the workers: claims them (leased, skipping rows other
 * processes hold), sends with bounded concurrency, and writes each attempt. It looks again at
 * once while it finds work, after messages were written on this node, and every `idlePollMs`.
 */
export function createDispatcher(
  outbound: OutboundService,
  logger: JobLogger,
  options: DispatcherOptions = {},
) {
  const concurrency = options.concurrency ?? 16;
  const idlePollMs = options.idlePollMs ?? 250;
  const running = new Set<Promise<unknown>>();
  let timer: NodeJS.Timeout | null = null;
  let started = false;
  let pumping = false;
  let again = false;
  let failures = 0;

  async function pump(): Promise<void> {
    if (!started) return;
    if (pumping) {
      again = true;
      return;
    }
    pumping = true;
    try {
      do {
        again = false;
        const free = concurrency - running.size;
        if (free <= 0) break;
        const { claimId, messages } = await outbound.claimDue(free);
        failures = 0;
        for (const message of messages) {
          const sending: Promise<unknown> = outbound
            .deliver(message, claimId)
            .catch((error: unknown) =>
              // The attempt is not written; the lease runs out and the message is tried again.
              logger.error({ err: error, messageId: message.id }, 'outbound message attempt not recorded'),
            )
            .finally(() => {
              running.delete(sending);
              // Refilled in batches: one claim for several free places, not one per finished send.
              if (running.size <= concurrency / 2) setImmediate(() => void pump());
            });
          running.add(sending);
        }
        if (messages.length === free) again = true;
      } while (again && started);
    } catch (error) {
      failures++;
      // One line per outage, not one per poll.
      if (failures === 1) logger.warn({ err: error }, 'outbound dispatcher could not claim messages');
    } finally {
      pumping = false;
    }
  }

  function schedule() {
    timer = setTimeout(async () => {
      await pump();
      if (started) schedule();
    }, idlePollMs);
    timer.unref();
  }

  return {
    start() {
      if (started) return;
      started = true;
      // Written on this node: look at once, and once more shortly after, when the writing
      // transaction has most likely committed.
      outbound.setEnqueuedListener(() => {
        setImmediate(() => void pump());
        setTimeout(() => void pump(), 20).unref();
      });
      schedule();
      void pump();
    },

    /** Takes no new messages and waits up to `timeoutMs` for attempts under way. */
    async stop(timeoutMs = 10_000) {
      started = false;
      outbound.setEnqueuedListener(() => {});
      if (timer) clearTimeout(timer);
      if (running.size === 0) return;
      let expired: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.allSettled([...running]),
        new Promise((resolve) => {
          expired = setTimeout(resolve, timeoutMs);
        }),
      ]);
      clearTimeout(expired);
    },

    /** Attempts under way in this process. */
    get inFlight() {
      return running.size;
    },
  };
}

export type Dispatcher = ReturnType<typeof createDispatcher>;
