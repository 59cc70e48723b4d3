// Builds the web console (console/) into console/dist when it is missing or older than its
// sources. `npm start` runs it first (prestart) and the test run from its global setup, so a
// fresh clone needs nothing but `npm ci && npm start`. Up to date, it only hashes the sources.
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { brotliCompress, constants, gzip } from 'node:zlib';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const CONSOLE_DIR = path.join(ROOT, 'console');
export const CONSOLE_DIST = path.join(CONSOLE_DIR, 'dist');
const STAMP = path.join(CONSOLE_DIST, '.sources-hash');

async function listFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const files = await Promise.all(
    entries.map(async (entry) => {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) return listFiles(full);
      return entry.isFile() ? [full] : [];
    }),
  );
  return files.flat();
}

/** The service's import-free modules the console imports (field types, events, weekdays). */
const SHARED_WITH_SERVICE = [
  'src/modules/entities/entities.model.ts',
  'src/outbound/events.ts',
  'src/modules/booking/booking.rules.ts',
];

/** One hash over every input of the build: the console's sources, its config and the lock file. */
export async function sourcesHash(): Promise<string> {
  const inputs = [
    ...(await listFiles(path.join(CONSOLE_DIR, 'src'))),
    path.join(CONSOLE_DIR, 'index.html'),
    path.join(CONSOLE_DIR, 'vite.config.ts'),
    path.join(ROOT, 'package-lock.json'),
    ...SHARED_WITH_SERVICE.map((file) => path.join(ROOT, file)),
    // The build's own recipe: a change to it (the compressed copies, say) builds again.
    fileURLToPath(import.meta.url),
  ].sort();
  const hash = createHash('sha256');
  for (const file of inputs) {
    hash.update(path.relative(ROOT, file));
    hash.update('\0');
    hash.update(await readFile(file));
    hash.update('\0');
  }
  return hash.digest('hex');
}

export async function consoleIsCurrent(): Promise<boolean> {
  if (!existsSync(path.join(CONSOLE_DIST, 'index.html')) || !existsSync(STAMP)) return false;
  return (await readFile(STAMP, 'utf8')).trim() === (await sourcesHash());
}

/** Assets worth sending compressed: text, from 1 KiB (smaller ones gain less than the headers cost). */
const COMPRESSIBLE = /\.(?:js|mjs|css|html|svg|json|txt|map)$/;
const MIN_COMPRESSED_BYTES = 1024;

/**
 * Writes a Brotli (`.br`) and a gzip (`.gz`) copy beside each compressible asset, compressed
 * once at their best settings, so that the service sends them to browsers that accept them
 * (`@fastify/static`'s `preCompressed`) without compressing on every request: the console's
 * script is about 990 kB as built and 230 kB with Brotli.
 */
export async function precompressAssets(dir: string): Promise<void> {
  for (const file of await listFiles(dir)) {
    if (!COMPRESSIBLE.test(file)) continue;
    const content = await readFile(file);
    if (content.length < MIN_COMPRESSED_BYTES) continue;
    const [brotli, gzipped] = await Promise.all([
      promisify(brotliCompress)(content, {
        params: {
          [constants.BROTLI_PARAM_QUALITY]: constants.BROTLI_MAX_QUALITY,
          [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT,
          [constants.BROTLI_PARAM_SIZE_HINT]: content.length,
        },
      }),
      promisify(gzip)(content, { level: constants.Z_BEST_COMPRESSION }),
    ]);
    await writeFile(`${file}.br`, brotli);
    await writeFile(`${file}.gz`, gzipped);
  }
}

/** Builds the console unless console/dist is current; answers whether it built. */
export async function ensureConsoleBuilt(options: { quiet?: boolean } = {}): Promise<boolean> {
  if (await consoleIsCurrent()) return false;
  const hash = await sourcesHash();
  if (!options.quiet) process.stderr.write('building the web console (console/dist)…\n');
  const { build } = await import('vite');
  // Vite bundles for the NODE_ENV it finds: the test run's `test` gave React's development
  // build (1.3 MB against 1.0), which `npm start` then served, the sources being unchanged.
  const nodeEnv = process.env.NODE_ENV;
  process.env.NODE_ENV = 'production';
  try {
    await build({
      root: CONSOLE_DIR,
      configFile: path.join(CONSOLE_DIR, 'vite.config.ts'),
      logLevel: options.quiet ? 'error' : 'warn',
    });
  } finally {
    if (nodeEnv === undefined) delete process.env.NODE_ENV;
    else process.env.NODE_ENV = nodeEnv;
  }
  await precompressAssets(path.join(CONSOLE_DIST, 'assets'));
  await writeFile(STAMP, `${hash}\n`);
  return true;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    await ensureConsoleBuilt();
  } catch (error) {
    process.stderr.write(`the web console could not be built: ${(error as Error).message}\n`);
    process.exit(1);
  }
}
