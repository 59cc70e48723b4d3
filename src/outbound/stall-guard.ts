/**
 * Endpoints that stopped answering (docs/decisions.md, Outbound messages, "A stalled endpoint
 * holds one sending place"). An attempt holds one of a process's sending places until its answer
 * or its timeout, so a receiver that never answers, fed faster than one message a timeout, would
 * hold every place and delay every account's messages. Once an attempt to an endpoint has run
 * into the timeout, the endpoint counts as stalled on this process: one attempt at a time goes
 * out to it (the probe), and its other messages fail at once without a request
 * (`endpoint_unresponsive`), each retried on its schedule as a timed-out attempt would be. Any
 * answer, or any failure other than a timeout, ends the stall.
 *
 * The measure is the timeout alone: a slow answer is not one, since CPU load on the sending
 * machine stretches answers (a local receiver's took over a second under the benchmark's load)
 * and must not make a healthy endpoint's messages fail.
 */

/**
 * How an attempt was let out: as usual, as the one probe of a stalled endpoint, or not at all.
 * Each admission has a number, in the order they were made: an attempt's outcome counts only if
 * it was let out after the attempt whose outcome set the endpoint's state (a probe sent before an
 * owner's answered test, timing out after it, is old news).
 */
export type Admission = { kind: 'send' | 'probe'; number: number } | { kind: 'refuse' };

/** Endpoints remembered at most; the oldest is forgotten first (a stalled one then times out once more). */
const MAX_ENDPOINTS = 10_000;

const REFUSE: Admission = { kind: 'refuse' };

interface EndpointState {
  stalled: boolean;
  /** The number of its probe while one is out. */
  probe: number | null;
  /** The number of the attempt whose outcome set `stalled`. */
  decidedBy: number;
}

export function createStallGuard(maxEndpoints = MAX_ENDPOINTS) {
  /** Endpoints that have stalled at some time (only those: a healthy one costs nothing). */
  const endpoints = new Map<string, EndpointState>();
  let admissions = 0;

  return {
    /** Whether an attempt to the endpoint may go out; `always` lets it out whatever the state. */
    admit(key: string, always = false): Admission {
      const number = ++admissions;
      const state = endpoints.get(key);
      if (!state?.stalled || always) return { kind: 'send', number };
      if (state.probe !== null) return REFUSE;
      state.probe = number;
      return { kind: 'probe', number };
    },

    /** After an admitted attempt: whether it ran into the timeout. */
    settle(key: string, admission: Admission, timedOut: boolean): void {
      if (admission.kind === 'refuse') return;
      const state = endpoints.get(key);
      if (state && admission.kind === 'probe' && state.probe === admission.number) state.probe = null;
      if (!state) {
        // A healthy endpoint's answers cost nothing; its first timeout marks it.
        if (!timedOut) return;
        if (endpoints.size >= maxEndpoints) endpoints.delete(endpoints.keys().next().value!);
        endpoints.set(key, { stalled: true, probe: null, decidedBy: admission.number });
        return;
      }
      if (admission.number < state.decidedBy) return;
      // A timeout stalls it; an answer (or a quick failure) shows it holds no places.
      state.stalled = timedOut;
      state.decidedBy = admission.number;
      if (!timedOut) state.probe = null;
    },
  };
}

export type StallGuard = ReturnType<typeof createStallGuard>;
