import type { TestAccount, TestApp } from '../helpers/app.ts';

/** What a browser sends with a plain form post. */
export const BROWSER_ACCEPT = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8';
export const FORM = 'application/x-www-form-urlencoded';

export interface Part {
  name: string;
  value: string | Buffer;
  /** Makes it a file part. */
  filename?: string;
  contentType?: string;
}

/** A multipart/form-data body as a browser writes it: names as raw UTF-8 bytes. */
export function multipart(parts: Part[], boundary = '----leadlineTestBoundary7MA4YWxkTrZu0gW') {
  const chunks: Buffer[] = [];
  for (const part of parts) {
    const name = part.name.replaceAll('"', '%22');
    let head = `--${boundary}\r\nContent-Disposition: form-data; name="${name}"`;
    if (part.filename !== undefined) head += `; filename="${part.filename}"`;
    head += '\r\n';
    if (part.contentType) head += `Content-Type: ${part.contentType}\r\n`;
    else if (part.filename !== undefined) head += 'Content-Type: application/octet-stream\r\n';
    chunks.push(Buffer.from(`${head}\r\n`, 'utf8'), Buffer.from(part.value), Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { payload: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${boundary}` };
}

export async function createSource(
  t: TestApp,
  account: TestAccount,
  settings: Record<string, unknown> = {},
): Promise<{ id: string; token: string; url: string }> {
  const response = await t.request({
    method: 'POST',
    url: '/api/v1/settings/sources',
    key: account.apiKey,
    body: { name: `Website ${Math.random().toString(36).slice(2)}`, ...settings },
  });
  if (response.statusCode !== 201) throw new Error(`source: ${response.body}`);
  const { id, token } = response.json();
  return { id, token, url: `/api/v1/in/${token}` };
}

/** The account's records, newest first (only tests read them whole). */
export async function recordsOf(t: TestApp, account: TestAccount) {
  return t.db
    .selectFrom('records')
    .selectAll()
    .where('account_id', '=', account.id)
    .orderBy('created_at', 'desc')
    .execute();
}

export async function readRecord(t: TestApp, account: TestAccount, id: string) {
  const response = await t.request({ method: 'GET', url: `/api/v1/records/${id}`, key: account.apiKey });
  if (response.statusCode !== 200) throw new Error(`record ${id}: ${response.statusCode} ${response.body}`);
  return response.json();
}

export async function intakeLog(t: TestApp, account: TestAccount) {
  const response = await t.request({ method: 'GET', url: '/api/v1/intake-log', key: account.apiKey });
  return response.json().entries as {
    outcome: string;
    status_code: number;
    record_id: string | null;
    endpoint: string;
    entity: string | null;
    warnings: { key: string; reason: string }[];
  }[];
}
