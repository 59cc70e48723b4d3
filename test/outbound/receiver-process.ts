import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Answer, Received } from './receiver.ts';

/** What the test asks of the receiver in the child process, and what it answers. */
export type ReceiverCommand =
  | { type: 'verifyWith'; secrets: string[] }
  | { type: 'answerAlways'; answer: Answer }
  | { type: 'received' };

const CHILD = fileURLToPath(new URL('./receiver-child.ts', import.meta.url));

/**
 * The webhook receiver of receiver.ts in a process of its own: the times it notes (arrival, and
 * when an unanswered request's sender gave up) are not held back by the service's work, which
 * shares the test's event loop (an embedded database's queries run on it). On a loaded machine a
 * receiver in the test's process noted arrivals up to 1.2 s late, and requests that did not
 * overlap as overlapping.
 */
export async function startReceiverProcess() {
  // No inherited flags: the test runner's worker flags are not the receiver's.
  const child: ChildProcess = fork(CHILD, [], {
    execArgv: [],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const replies: ((value: unknown) => void)[] = [];
  const ready = new Promise<string>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`the receiver process ended (${code})`)));
    child.once('message', (message) => resolve((message as { url: string }).url));
  });
  const url = await ready;
  // Answers come back in the order the commands went.
  child.on('message', (message) => replies.shift()?.(message));

  function ask<T>(command: ReceiverCommand): Promise<T> {
    return new Promise<T>((resolve) => {
      replies.push(resolve as (value: unknown) => void);
      child.send(command);
    });
  }

  return {
    url,
    /** Every secret given must verify each request, as in receiver.ts. */
    verifyWith: (...secrets: string[]) => ask<void>({ type: 'verifyWith', secrets }),
    answerAlways: (answer: Answer) => ask<void>({ type: 'answerAlways', answer }),
    /** The verified requests so far. */
    received: () => ask<Received[]>({ type: 'received' }),
    async close() {
      // Ended already (by an exit code or a signal): nothing to wait for.
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill();
      await exited;
    },
  };
}

export type ReceiverProcess = Awaited<ReturnType<typeof startReceiverProcess>>;
