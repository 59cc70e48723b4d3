import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The user guide in the repository (docs/guide), served read-only below /docs/guide/. */
export const GUIDE_DIR = fileURLToPath(new URL('../../../docs/guide/', import.meta.url));

/** Names a page may have; anything else in the folder (or outside it) is never served. */
const PAGE_NAME = /^(README|[a-z0-9][a-z0-9-]{0,80})\.md$/;

/**
 * Reads the guide's pages once, at start: the allow-list is what the folder held then, so no
 * request can name a file the service did not list itself. A checkout without the folder
 * serves no pages.
 */
export async function loadGuide(dir: string = GUIDE_DIR): Promise<Map<string, string>> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (error) {
    if ((error as { code?: string }).code === 'ENOENT') return new Map();
    throw error;
  }
  const pages = new Map<string, string>();
  for (const name of names.filter((candidate) => PAGE_NAME.test(candidate)).sort()) {
    pages.set(name, await readFile(path.join(dir, name), 'utf8'));
  }
  return pages;
}
