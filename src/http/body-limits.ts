import { AppError } from './errors.ts';

/** JSON nesting deeper than this is refused (decisions §4). */
export const MAX_JSON_DEPTH = 32;
export const SINGLE_BODY_LIMIT = 1024 * 1024;
export const BULK_BODY_LIMIT = 16 * 1024 * 1024;

/** Depth of nested objects and arrays, stopping as soon as the limit is passed. */
export function exceedsDepth(value: unknown, limit = MAX_JSON_DEPTH): boolean {
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [current, depth] = stack.pop()!;
    if (current === null || typeof current !== 'object') continue;
    if (depth > limit) return true;
    for (const child of Object.values(current)) {
      if (child !== null && typeof child === 'object') stack.push([child, depth + 1]);
    }
  }
  return false;
}

export function assertDepth(body: unknown): void {
  if (exceedsDepth(body)) {
    throw new AppError('invalid_body', { message: `JSON nesting deeper than ${MAX_JSON_DEPTH} levels` });
  }
}
