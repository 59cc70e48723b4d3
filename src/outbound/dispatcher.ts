import { runInBackground } from '../jobs/background.ts';
import type { JobLogger } from '../jobs/queue.ts';
import { createCpuPressureGauge, createEventLoopGauge, type LoadGauge } from './cpu-pressure.ts';
import type { ClaimedMessage } from './outbound.repo.ts';
import type { OutboundService } from './outbound.service.ts';

export interface DispatcherOptions {
  /** Messages sent at once by this process (16). */
  concurrency?: number;
  /**
   * Messages claimed and not yet written back (4 × concurrency): those waiting for a place to
   * be sent, being sent, and sent with their attempt not yet written. Claims take up to half of
   * this at once, and a sent message's place is free for the next send while its attempt is
   * written with others in one statement.
   */
  maxUnwritten?: number;
  /** Pause between looks for due messages while none were found (250 ms). */
  idlePollMs?: number;
  /**
   * While requests on this node write messages and the machine's CPUs are contended (see
   * `cpuPressure`): at most `contendedClaim` messages (1) claimed per `busyIntervalMs`
   * (100 ms), so that intake keeps the cores and the backlog is sent once the writes stop,
   * unless the oldest message claimed waited longer than `maxPacedLagMs` (30 s). With spare CPU
   * claims are not paced. Where there is no pressure gauge, claims are paced to `busyClaim`
   * (32) per interval whenever requests write messages.
   */
  busyClaim?: number;
  contendedClaim?: number;
  busyIntervalMs?: number;
  maxPacedLagMs?: number;
  /**
   * The CPU pressure gauge (Linux PSI; null: none, the fixed pace applies) and the stall share
   * from which the CPUs count as contended (0.2: some task waited for a CPU a fifth of the time).
   */
  cpuPressure?: LoadGauge | null;
  contendedPressure?: number;
  /**
   * This process's event-loop utilization (null: not read) and the share from which it counts
   * as saturated (0.9): then claims are paced like on contended CPUs, whatever the machine's
   * pressure (the embedded database runs on the event loop's thread).
   */
  eventLoop?: LoadGauge | null;
  saturatedEventLoop?: number;
}

/** How long after this node last wrote messages it counts as writing. */
const WRITERS_ACTIVE_MS = 500;
/**
 * Retries this node wrote are woken for on a grid of this many ms (a due time is rounded up to
 * it): at most this late, and retries due close together are claimed by one look.
 */
const WAKE_GRAIN_MS = 5;
/** Due times of retries remembered at most; later ones are found by the regular look. */
const MAX_KNOWN_DUE = 1_000;
/** The longest single wait of the wake-up timer (Node's timers hold at most about 24 days). */
const MAX_WAKE_WAIT_MS = 86_400_000;

/**
 * Sends due outbound messages from the workers: claims them (leased, skipping rows other
 * processes hold), sends with bounded concurrency, and writes each attempt. It looks again at
 * once while it finds work, after messages were written on this node, when a retry written on
 * this node is due (one timer, for the earliest), and every `idlePollMs`.
 */
export function createDispatcher(
  outbound: OutboundService,
  logger: JobLogger,
  options: DispatcherOptions = {},
) {
  const concurrency = options.concurrency ?? 16;
  const maxUnwritten = Math.max(concurrency, options.maxUnwritten ?? concurrency * 4);
  const idlePollMs = options.idlePollMs ?? 250;
  const busyClaim = options.busyClaim ?? 32;
  const contendedClaim = options.contendedClaim ?? 1;
  const cpuPressure = options.cpuPressure === undefined ? createCpuPressureGauge() : options.cpuPressure;
  const contendedPressure = options.contendedPressure ?? 0.2;
  const eventLoop = options.eventLoop === undefined ? createEventLoopGauge() : options.eventLoop;
  const saturatedEventLoop = options.saturatedEventLoop ?? 0.9;
  const busyIntervalMs = options.busyIntervalMs ?? 100;
  const maxPacedLagMs = options.maxPacedLagMs ?? 30_000;
  /** Claimed, waiting for a place to be sent. */
  const waiting: { message: ClaimedMessage; claimId: string }[] = [];
  /** Sent or being sent, until the attempt is written. */
  const running = new Set<Promise<unknown>>();
  let sending = 0;
  let timer: NodeJS.Timeout | null = null;
  let started = false;
  let pumping = false;
  let again = false;
  let failures = 0;
  let lastEnqueuedAt = 0;
  let lastClaimAt = 0;
  let paced: NodeJS.Timeout | null = null;
  /** How long the oldest message of the last claim had waited since it was written. */
  let claimedLagMs = 0;
  /**
   * Due times (rounded up to `WAKE_GRAIN_MS`, each once, earliest first) of the retries this
   * node wrote, and the one timer set for the first: without it a retry waited for the next
   * look, up to `idlePollMs` past its due time. Other nodes' retries are found by the looks.
   */
  const knownDue: number[] = [];
  let wake: NodeJS.Timeout | null = null;

  function retryWritten(dueAt: Date): void {
    if (!started) return;
    const slot = Math.ceil(dueAt.getTime() / WAKE_GRAIN_MS) * WAKE_GRAIN_MS;
    let low = 0;
    let high = knownDue.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (knownDue[middle]! < slot) low = middle + 1;
      else high = middle;
    }
    if (knownDue[low] === slot || low >= MAX_KNOWN_DUE) return;
    knownDue.splice(low, 0, slot);
    if (knownDue.length > MAX_KNOWN_DUE) knownDue.pop();
    if (low === 0) armWake();
  }

  function armWake(): void {
    if (wake) clearTimeout(wake);
    wake = null;
    const next = knownDue[0];
    if (next === undefined || !started) return;
    wake = setTimeout(woken, Math.min(Math.max(0, next - Date.now()), MAX_WAKE_WAIT_MS));
    wake.unref();
  }

  function woken(): void {
    wake = null;
    const now = Date.now();
    // A timer counts from the event loop's clock, which can lag: one that fires early (or a
    // long wait cut short) waits for the rest, since the claim takes only rows due by now.
    let passed = 0;
    while (passed < knownDue.length && knownDue[passed]! <= now) passed++;
    knownDue.splice(0, passed);
    armWake();
    if (passed > 0) void pump();
  }

  const unwritten = () => waiting.length + running.size;

  /**
   * How many claims per interval while this node writes messages (requests are served here),
   * or null for no pacing: with a pressure gauge, few while the CPUs are contended and no limit
   * while they have room; without one, the fixed pace. No pacing either once that lets messages
   * wait too long: a steady load the paced rate cannot follow is sent at full speed again.
   */
  function pace(now: number): number | null {
    if (now - lastEnqueuedAt > WRITERS_ACTIVE_MS || claimedLagMs > maxPacedLagMs) return null;
    if (eventLoop && eventLoop.current() >= saturatedEventLoop) return contendedClaim;
    if (!cpuPressure) return busyClaim;
    return cpuPressure.current() >= contendedPressure ? contendedClaim : null;
  }

  /** Claims paced while this node writes: how many may be claimed now, or null to look again later. */
  function claimAllowance(free: number): number | null {
    const now = Date.now();
    const perInterval = pace(now);
    if (perInterval === null) return free;
    const wait = lastClaimAt + busyIntervalMs - now;
    if (wait <= 0) return Math.min(free, perInterval);
    if (!paced) {
      paced = setTimeout(() => {
        paced = null;
        void pump();
      }, wait);
      paced.unref();
    }
    return null;
  }

  /** Starts waiting messages while places are free; keeps going during a stop, so that none is left claimed. */
  function sendWaiting(): void {
    while (sending < concurrency && waiting.length > 0) {
      const { message, claimId } = waiting.shift()!;
      sending++;
      let sent = false;
      const sendOver = () => {
        if (sent) return;
        sent = true;
        sending--;
        sendWaiting();
      };
      const attempt: Promise<unknown> = runInBackground(() => outbound.deliver(message, claimId, sendOver))
        .catch((error: unknown) =>
          // The attempt is not written; the lease runs out and the message is tried again.
          logger.error({ err: error, messageId: message.id }, 'outbound message attempt not recorded'),
        )
        .finally(() => {
          running.delete(attempt);
          sendOver();
          // Refilled in batches: one claim for many free places, not one per finished message.
          if (unwritten() <= maxUnwritten / 2) setImmediate(() => void pump());
        });
      running.add(attempt);
    }
  }

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
        const free = maxUnwritten - unwritten();
        if (free <= 0) break;
        const allowed = claimAllowance(free);
        if (allowed === null) break;
        lastClaimAt = Date.now();
        const { claimId, messages } = await outbound.claimDue(allowed);
        failures = 0;
        const now = Date.now();
        claimedLagMs = messages.reduce(
          (lag, message) => Math.max(lag, now - message.created_at.getTime()),
          0,
        );
        for (const message of messages) waiting.push({ message, claimId });
        sendWaiting();
        if (messages.length === allowed) again = true;
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
      // transaction has most likely committed. Only requests' writes pace the claims: a job's
      // messages (automation runs) are the workers' own work, to be sent as it comes.
      outbound.setEnqueuedListener((byRequest) => {
        if (byRequest) lastEnqueuedAt = Date.now();
        setImmediate(() => void pump());
        setTimeout(() => void pump(), 20).unref();
      });
      outbound.setRetryListener(retryWritten);
      schedule();
      void pump();
    },

    /** Takes no new messages and waits up to `timeoutMs` for the claimed ones to be sent and written. */
    async stop(timeoutMs = 10_000) {
      started = false;
      outbound.setEnqueuedListener(() => {});
      outbound.setRetryListener(() => {});
      if (timer) clearTimeout(timer);
      if (paced) clearTimeout(paced);
      if (wake) clearTimeout(wake);
      wake = null;
      knownDue.length = 0;
      let expired = false;
      const deadline = setTimeout(() => {
        expired = true;
      }, timeoutMs);
      while (!expired && running.size > 0) {
        await Promise.race([
          Promise.allSettled([...running]),
          new Promise((resolve) => setTimeout(resolve, 50)),
        ]);
      }
      clearTimeout(deadline);
    },

    /** Messages claimed by this process and not yet written back. */
    get inFlight() {
      return unwritten();
    },
  };
}

export type Dispatcher = ReturnType<typeof createDispatcher>;
