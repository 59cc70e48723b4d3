import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningServer, startServer } from '../../src/start/server.ts';
import { LEAD_ENTITY } from '../helpers/fixtures.ts';
import { callApi, inProcessServerConfig } from '../helpers/server-process.ts';

const ADMIN_TOKEN = 'adm_public_url_test_token_0123456789';
const OFFER = Buffer.from('%PDF-1.4 an offer');

describe('PORT=0: links carry the port the server was given', () => {
  let dataDir: string;
  let files: http.Server;
  let filesUrl: string;
  let server: RunningServer | undefined;

  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'leads-public-url-'));
    files = http.createServer((_, response) => {
      response.writeHead(200, { 'content-type': 'application/pdf' }).end(OFFER);
    });
    await new Promise<void>((resolve) => files.listen(0, '127.0.0.1', resolve));
    filesUrl = `http://127.0.0.1:${(files.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await server?.stop();
    await new Promise((resolve) => files.close(resolve));
    await rm(dataDir, { recursive: true, force: true });
  });

  it('signs document addresses with the bound port, and they download', async () => {
    server = await startServer(
      inProcessServerConfig({ LEADS_DATA_DIR: dataDir, LEADS_ADMIN_TOKEN: ADMIN_TOKEN }),
    );
    const port = Number(new URL(server.url).port);
    expect(port).toBeGreaterThan(0);
    expect(server.url).toBe(`http://127.0.0.1:${port}`);

    const account = await callApi(`${server.url}/admin/v1/accounts`, ADMIN_TOKEN, 'POST', {
      name: 'Links',
      modules: [],
    });
    const key = account.body.api_key.key as string;
    expect(
      (await callApi(`${server.url}/api/v1/settings/entities/lead`, key, 'PUT', LEAD_ENTITY)).status,
    ).toBe(200);
    const created = await callApi(`${server.url}/api/v1/records`, key, 'POST', {
      entity: 'lead',
      fields: { email: 'links@public-url.test' },
      documents: [{ url: `${filesUrl}/offer.pdf` }],
    });
    expect(created.status).toBe(201);
    const record = await callApi(`${server.url}/api/v1/records/${created.body.id}`, key, 'GET');
    const [document] = record.body.documents;
    const signed = await callApi(`${server.url}${document.url}/signed-url`, key, 'POST');
    expect(signed.status).toBe(200);
    expect(signed.body.url.startsWith(`${server.url}/api/v1/documents/${document.id}?`)).toBe(true);

    const download = await fetch(signed.body.url);
    expect(download.status).toBe(200);
    expect(Buffer.from(await download.arrayBuffer())).toEqual(OFFER);
  }, 90_000);
});
