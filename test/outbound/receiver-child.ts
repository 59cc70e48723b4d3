/** The receiver process of receiver-process.ts: a receiver.ts receiver, told what to do over IPC. */

import { startReceiver } from './receiver.ts';
import type { ReceiverCommand } from './receiver-process.ts';

const receiver = await startReceiver();
// Gone with the test that started it.
process.on('disconnect', () => process.exit(0));
process.on('message', (command: ReceiverCommand) => {
  if (command.type === 'verifyWith') receiver.verifyWith(...command.secrets);
  if (command.type === 'answerAlways') receiver.answerAlways(command.answer);
  process.send!(command.type === 'received' ? receiver.received : {});
});
process.send!({ url: receiver.url });
