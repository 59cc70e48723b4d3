import { mkdir, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Transporter } from 'nodemailer';
import { type AttemptResult, clip } from './attempt.ts';

type Nodemailer = typeof import('nodemailer')['default'];

/**
 * nodemailer is loaded when the first message is sent or written, not with the service: most
 * processes send no email for a long while, and the library is about 2 MB of heap.
 */
let nodemailerLoading: Promise<Nodemailer> | undefined;
function loadNodemailer(): Promise<Nodemailer> {
  nodemailerLoading ??= import('nodemailer').then((module) => module.default);
  return nodemailerLoading;
}

/** An email as modules hand it to the engine (stored as the message's payload). */
export interface EmailContent {
  to: string[];
  subject: string;
  text?: string;
  html?: string;
  replyTo?: string;
  attachments?: { filename: string; contentType: string; contentBase64: string }[];
}

export interface MailSenderOptions {
  /** `smtp://user:pass@host:port` or `smtps://…`; without it messages go to `outboxDir` as .eml files. */
  smtpUrl: string | undefined;
  from: string;
  outboxDir: string;
  /** Bound of connecting, the greeting and each wait for the server (ms). */
  timeoutMs?: number;
}

interface SmtpFailure {
  code?: string;
  responseCode?: number;
  response?: string;
  message?: string;
}

/**
 * Sends email through SMTP (pooled connections), or writes each message to the outbox directory
 * as `<id>.eml` when no SMTP server is configured. The message id is the engine's, so that a
 * retry writes the same file and carries the same Message-ID.
 */
export function createMailSender(options: MailSenderOptions) {
  const timeoutMs = options.timeoutMs ?? 15_000;
  /** The SMTP transport, made with the first message (see `loadNodemailer`). */
  let smtp: Transporter | undefined;
  let closed = false;
  async function smtpTransport(smtpUrl: string): Promise<Transporter> {
    const nodemailer = await loadNodemailer();
    smtp ??= nodemailer.createTransport({
      url: smtpUrl,
      pool: true,
      maxConnections: 5,
      connectionTimeout: timeoutMs,
      greetingTimeout: timeoutMs,
      socketTimeout: timeoutMs * 2,
    });
    // A message sent while the sender was being closed must not leave a pool open behind it.
    if (closed) smtp.close();
    return smtp;
  }
  let composer: Transporter | undefined;
  async function fileComposer(): Promise<Transporter> {
    const nodemailer = await loadNodemailer();
    composer ??= nodemailer.createTransport({ streamTransport: true, buffer: true, newline: 'unix' });
    return composer;
  }
  const domain = options.from.match(/@([^>\s]+)/)?.[1] ?? 'leadline.invalid';

  function mailOf(id: string, content: EmailContent) {
    return {
      from: options.from,
      to: content.to,
      subject: content.subject,
      text: content.text,
      html: content.html,
      replyTo: content.replyTo,
      messageId: `<${id}@${domain}>`,
      attachments: content.attachments?.map((attachment) => ({
        filename: attachment.filename,
        contentType: attachment.contentType,
        content: Buffer.from(attachment.contentBase64, 'base64'),
      })),
    };
  }

  return {
    /** Where messages go: the SMTP server's host, or the outbox directory. */
    describe(): string {
      return options.smtpUrl ? `SMTP ${new URL(options.smtpUrl!).host}` : `files in ${options.outboxDir}`;
    },

    async send(id: string, content: EmailContent): Promise<AttemptResult> {
      const started = performance.now();
      const elapsed = () => Math.round(performance.now() - started);
      if (!options.smtpUrl) {
        const info = await (await fileComposer()).sendMail(mailOf(id, content));
        await mkdir(options.outboxDir, { recursive: true });
        const target = path.join(options.outboxDir, `${id}.eml`);
        await writeFile(`${target}.tmp`, info.message as Buffer);
        await rename(`${target}.tmp`, target);
        return {
          ok: true,
          statusCode: null,
          reply: `written to ${target}`,
          error: null,
          retry: false,
          gone: false,
          retryAfterMs: null,
          durationMs: elapsed(),
        };
      }
      try {
        const info = await (await smtpTransport(options.smtpUrl)).sendMail(mailOf(id, content));
        const reply = String(info.response ?? '');
        return {
          ok: true,
          statusCode: Number(reply.slice(0, 3)) || 250,
          reply: clip(reply),
          error: null,
          retry: false,
          gone: false,
          retryAfterMs: null,
          durationMs: elapsed(),
        };
      } catch (caught) {
        const error = caught as SmtpFailure;
        const code = error.responseCode ?? null;
        // A 5xx answer is permanent (unknown mailbox, refused sender); 4xx and broken connections pass.
        const permanent = code !== null && code >= 500;
        return {
          ok: false,
          statusCode: code,
          reply: clip(String(error.response ?? error.message ?? '')),
          error: code !== null ? `smtp_${code}` : error.code === 'ETIMEDOUT' ? 'timeout' : 'network_error',
          retry: !permanent,
          gone: false,
          retryAfterMs: null,
          durationMs: elapsed(),
        };
      }
    },

    close(): void {
      closed = true;
      smtp?.close();
    },
  };
}

export type MailSender = ReturnType<typeof createMailSender>;
