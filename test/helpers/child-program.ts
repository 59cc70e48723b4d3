import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const run = promisify(execFile);

/**
 * Runs a program (an ES module's text) in a child Node process started with `nodeFlags`, in the
 * project's directory, with `root` (the project's file URL) defined before it; returns what it
 * printed. In a child process where the test needs the process to itself: V8's flags are the
 * process's, and the test runner's worker also runs other files' leftover work (timers, sockets)
 * that a measurement of the event loop would count.
 */
export async function runProgram(program: string, nodeFlags: string[] = []): Promise<string> {
  const { stdout } = await run(
    process.execPath,
    [
      ...nodeFlags,
      '--input-type=module',
      '-e',
      `const root = ${JSON.stringify(pathToFileURL(`${ROOT}/`).href)};\n${program}`,
    ],
    { cwd: ROOT, timeout: 60_000, maxBuffer: 64 * 1024 * 1024 },
  );
  return stdout;
}
