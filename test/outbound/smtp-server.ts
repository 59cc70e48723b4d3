import type { AddressInfo } from 'node:net';
import { type ParsedMail, simpleParser } from 'mailparser';
import { SMTPServer } from 'smtp-server';

/** A real SMTP server in the test process: it takes user/secret, refuses mail to refused@…, keeps what it got. */
export async function startSmtpServer() {
  const received: ParsedMail[] = [];
  const envelopes: string[][] = [];
  const server = new SMTPServer({
    disabledCommands: ['STARTTLS'],
    allowInsecureAuth: true,
    onAuth(auth, _session, callback) {
      if (auth.username === 'user' && auth.password === 'secret') callback(null, { user: 'user' });
      else callback(new Error('Invalid username or password'));
    },
    onRcptTo(address, _session, callback) {
      if (address.address.startsWith('refused@')) {
        const error = Object.assign(new Error('No such mailbox'), { responseCode: 550 });
        callback(error);
        return;
      }
      callback();
    },
    onData(stream, session, callback) {
      simpleParser(stream).then((mail) => {
        received.push(mail);
        envelopes.push(session.envelope.rcptTo.map((rcpt) => rcpt.address));
        callback();
      }, callback);
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.server.address() as AddressInfo;
  return {
    url: `smtp://user:secret@127.0.0.1:${port}`,
    received,
    envelopes,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

export type SmtpServer = Awaited<ReturnType<typeof startSmtpServer>>;
