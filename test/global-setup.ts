import { ensureConsoleBuilt } from '../scripts/build-console.ts';

/** The browser tests and the serving tests always see the console built from current sources. */
export default async function setup(): Promise<void> {
  await ensureConsoleBuilt({ quiet: true });
}
