#!/usr/bin/env node
// The `leads` command. The sources are TypeScript that Node runs directly (type stripping),
// which needs Node 22.18 or newer; the project brings Node 24 for its npm scripts and npx.
const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 18)) {
  process.stderr.write(
    `leads needs Node.js 22.18 or newer (this is ${process.version}). Run it through npm (npx leads …, npm start), which uses the project's Node 24.\n`,
  );
  process.exit(1);
}
// Node keeps the stripped TypeScript and V8's compiled code of every module in an on-disk cache
// (os.tmpdir()/node-compile-cache; NODE_COMPILE_CACHE moves it, NODE_DISABLE_COMPILE_CACHE=1
// turns it off). A start that finds its modules there loads no type stripper: about 15 MB less
// resident memory for the life of the process, and a faster start. A changed file is compiled
// anew (entries are checked against the source).
const { enableCompileCache } = await import('node:module');
enableCompileCache?.();
const { main } = await import('../src/cli/main.ts');
const exitCode = await main(process.argv.slice(2));
// A service command that failed half-way may leave connections open (a database pool, the job
// queue's); they must not keep a failed command alive. Success ends on its own, once all is closed.
if (exitCode !== 0) process.exit(exitCode);
