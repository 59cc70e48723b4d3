/**
 * Summary of a V8 CPU profile (`node --cpu-prof`): self time by function and by origin (a package
 * under node_modules, a source file of the project, Node's internals, garbage collection, idle).
 * Used by `BENCH_PROFILE=1 npm run bench`; also runs alone: `node bench/profile.ts FILE [TOP]`.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

function originOf(url: string, name: string): string {
  if (name === '(garbage collector)') return '(garbage collector)';
  if (name === '(idle)' || name === '(program)' || name === '(root)') return name;
  if (!url) return '(native)';
  const modules = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (modules) return modules[1]!;
  if (url.startsWith('node:')) return 'node internals';
  const project = /\/(src|bench|bin)\/(.+)$/.exec(url);
  if (project) return `${project[1]}/${project[2]}`;
  return url;
}

export function summarizeProfile(file: string, top = 20): string {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const selfMicros = new Map<number, number>();
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i]!;
    selfMicros.set(id, (selfMicros.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  }
  const byFunction = new Map<string, number>();
  const byOrigin = new Map<string, number>();
  let total = 0;
  let idle = 0;
  for (const [id, micros] of selfMicros) {
    const node = byId.get(id);
    if (!node) continue;
    const { functionName, url, lineNumber } = node.callFrame;
    const name = functionName || '(anonymous)';
    total += micros;
    if (name === '(idle)') idle += micros;
    const origin = originOf(url, name);
    const key = `${name} ${url ? `${origin}:${lineNumber + 1}` : ''}`.trim();
    byFunction.set(key, (byFunction.get(key) ?? 0) + micros);
    byOrigin.set(origin, (byOrigin.get(origin) ?? 0) + micros);
  }
  const busy = total - idle;
  const share = (micros: number) => `${((micros / Math.max(busy, 1)) * 100).toFixed(1).padStart(5)}%`;
  const rank = (map: Map<string, number>) =>
    [...map.entries()]
      .filter(([key]) => !key.startsWith('(idle)'))
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([key, micros]) => `  ${share(micros)}  ${key}`);
  return [
    `busy ${(busy / 1e6).toFixed(1)} s of ${(total / 1e6).toFixed(1)} s profiled; shares of busy time`,
    'self time by origin:',
    ...rank(byOrigin),
    'self time by function:',
    ...rank(byFunction),
  ].join('\n');
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const file = process.argv[2];
  if (!file) {
    console.error('usage: node bench/profile.ts FILE.cpuprofile [TOP]');
    process.exit(2);
  }
  console.log(summarizeProfile(file, Number(process.argv[3] ?? 20)));
}
