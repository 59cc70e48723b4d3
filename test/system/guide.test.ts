import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GUIDE_DIR, loadGuide } from '../../src/modules/system/guide.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

async function guidePages(): Promise<string[]> {
  return (await readdir(GUIDE_DIR)).filter((name) => name.endsWith('.md')).sort();
}

describe.each(TEST_DATABASES)('the root address and the guide on %s', (kind) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(kind);
  });
  afterAll(async () => t?.close());

  describe('happy path', () => {
    it('answers / with the web console, for GET and HEAD', async () => {
      for (const method of ['GET', 'HEAD'] as const) {
        const response = await t.app.inject({ method, url: '/' });
        expect(response.statusCode, method).toBe(200);
        expect(response.headers['content-type'], method).toBe('text/html; charset=utf-8');
      }
    });

    it('serves every page of docs/guide as Markdown, exactly as written', async () => {
      const pages = await guidePages();
      expect(pages).toContain('README.md');
      for (const page of pages) {
        const response = await t.app.inject({ method: 'GET', url: `/docs/guide/${page}` });
        expect(response.statusCode, page).toBe(200);
        expect(response.headers['content-type'], page).toBe('text/markdown; charset=utf-8');
        expect(response.headers['x-content-type-options'], page).toBe('nosniff');
        expect(response.body, page).toBe(await readFile(path.join(GUIDE_DIR, page), 'utf8'));
      }
      const head = await t.app.inject({ method: 'HEAD', url: '/docs/guide/README.md' });
      expect(head.statusCode).toBe(200);
      expect(head.headers['content-type']).toBe('text/markdown; charset=utf-8');
    });

    it('leads /docs/guide to the guide index', async () => {
      const response = await t.app.inject({ method: 'GET', url: '/docs/guide' });
      expect(response.statusCode).toBe(302);
      expect(response.headers.location).toBe('/docs/guide/README.md');
    });

    it('links the guide from the OpenAPI document shown at /docs, and hides its own routes there', async () => {
      const doc = (await t.app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).json();
      expect(doc.info.description).toContain('(/docs/guide/README.md)');
      expect(doc.info.description).toContain('docs/guide/');
      for (const hidden of ['/', '/docs/guide', '/docs/guide/{page}']) {
        expect(Object.keys(doc.paths)).not.toContain(hidden);
      }
    });
  });

  describe('errors', () => {
    it('answers an unknown page with 404 unknown_endpoint', async () => {
      for (const url of ['/docs/guide/nothing.md', '/docs/guide/readme.md', '/docs/guide/README']) {
        const response = await t.app.inject({ method: 'GET', url });
        expect(response.statusCode, url).toBe(404);
        expect(response.json(), url).toEqual({ error: 'unknown_endpoint' });
      }
    });
  });

  describe('security', () => {
    it('never serves a file outside the guide, however the path is spelled', async () => {
      for (const url of [
        '/docs/guide/../decisions.md',
        '/docs/guide/..%2Fdecisions.md',
        '/docs/guide/%2e%2e%2fdecisions.md',
        '/docs/guide/..%2F..%2Fpackage.json',
        '/docs/guide/..%5C..%5Cpackage.json',
        '/docs/guide/%2Fetc%2Fpasswd',
      ]) {
        const response = await t.app.inject({ method: 'GET', url });
        expect(response.statusCode, url).toBe(404);
        expect(response.body, url).not.toContain('Decisions of this project');
        expect(response.body, url).not.toContain('"devDependencies"');
      }
      // A NUL in a path parameter is refused at the edge, before any route sees it.
      for (const url of ['/docs/guide/README.md%00.txt', '/docs/guide/..%2Fdecisions.md%00']) {
        const response = await t.app.inject({ method: 'GET', url });
        expect(response.statusCode, url).toBe(422);
        expect(response.json().details[0].reason, url).toBe('invalid_characters');
        expect(response.body, url).not.toContain('Decisions of this project');
        expect(response.body, url).not.toContain('"devDependencies"');
      }
    });

    it('serves only files read at start whose names fit the allow-list', async () => {
      const pages = await loadGuide(path.join(REPO_ROOT, 'docs'));
      expect([...pages.keys()]).toEqual(['decisions.md']);
      expect((await loadGuide(path.join(REPO_ROOT, 'no-such-folder'))).size).toBe(0);
      const root = await loadGuide(REPO_ROOT);
      expect([...root.keys()]).toEqual(['README.md']);
    });

    it('needs no credential and meters nothing', async () => {
      const response = await t.app.inject({
        method: 'GET',
        url: '/docs/guide/README.md',
        headers: { authorization: 'Bearer lk_not_a_key' },
      });
      expect(response.statusCode).toBe(200);
      expect(response.headers['ratelimit-limit']).toBeUndefined();
    });
  });
});

/** GitHub's heading anchors: lower case, punctuation dropped, spaces as dashes, repeats numbered. */
function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of withoutFences(markdown).split('\n')) {
    const heading = /^#{1,6}\s+(.+?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const base = heading[1]!
      .replace(/`/g, '')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    anchors.add(count === 0 ? base : `${base}-${count}`);
  }
  return anchors;
}

function withoutFences(markdown: string): string {
  return markdown.replace(/^```[^\n]*\n[\s\S]*?^```\s*$/gm, '');
}

/** Markdown without fenced blocks and inline code, so that examples are not read as links. */
function withoutCode(markdown: string): string {
  return withoutFences(markdown).replace(/`[^`\n]*`/g, '');
}

function linksOf(markdown: string): string[] {
  return [...withoutCode(markdown).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)].map((match) => match[1]!);
}

describe('links of the README and the guide', () => {
  it('point to files and headings that exist', async () => {
    const files = [
      path.join(REPO_ROOT, 'README.md'),
      path.join(REPO_ROOT, 'docs', 'decisions.md'),
      ...(await guidePages()).map((page) => path.join(GUIDE_DIR, page)),
    ];
    const dangling: string[] = [];
    let checked = 0;
    for (const file of files) {
      const text = await readFile(file, 'utf8');
      for (const link of linksOf(text)) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(link)) continue; // https:, mailto: and the like
        checked++;
        const where = `${path.relative(REPO_ROOT, file)} → ${link}`;
        if (link.startsWith('/')) {
          dangling.push(`${where} (absolute; links in the repository must be relative)`);
          continue;
        }
        const [target = '', anchor] = link.split('#');
        const targetFile =
          target === '' ? file : path.resolve(path.dirname(file), decodeURIComponent(target));
        if (!existsSync(targetFile)) {
          dangling.push(`${where} (no such file)`);
          continue;
        }
        if (anchor && targetFile.endsWith('.md')) {
          if (!anchorsOf(await readFile(targetFile, 'utf8')).has(anchor))
            dangling.push(`${where} (no such heading)`);
        }
      }
    }
    expect(dangling).toEqual([]);
    expect(checked).toBeGreaterThan(50);
  });

  it('finds a dangling link or heading when there is one', () => {
    expect(linksOf('See [a](missing.md) and `[b](code.md)` and\n```\n[c](fenced.md)\n```\n')).toEqual([
      'missing.md',
    ]);
    expect(anchorsOf('# The `leads` command\n## S1: the lead\n## Notes\n## Notes\n')).toEqual(
      new Set(['the-leads-command', 's1-the-lead', 'notes', 'notes-1']),
    );
  });

  it('lists every page of the guide in its index, and mentions no files outside the repository', async () => {
    const index = await readFile(path.join(GUIDE_DIR, 'README.md'), 'utf8');
    const linked = new Set(linksOf(index).map((link) => link.split('#')[0]));
    for (const page of await guidePages()) {
      if (page !== 'README.md') expect(linked, page).toContain(page);
    }
    for (const file of [path.join(REPO_ROOT, 'README.md'), path.join(REPO_ROOT, 'docs', 'decisions.md')]) {
      expect(await readFile(file, 'utf8'), file).not.toMatch(/\.\.\/shared\//);
    }
    for (const page of await guidePages()) {
      expect(await readFile(path.join(GUIDE_DIR, page), 'utf8'), page).not.toMatch(/\.\.\/shared\//);
    }
  });
});
