import { escapeHtml } from './text.ts';

/**
 * A server-rendered page of the service (the booking page, the website-form answers): the same
 * head for every page, with what a page adds to it (`head`: its style or its stylesheet and
 * script) and its `main` element's content.
 */
export function htmlDocument(page: {
  language: string;
  title: string;
  head: string;
  main: string;
  mainId?: string;
}): string {
  return `<!doctype html>
<html lang="${page.language}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>${escapeHtml(page.title)}</title>
${page.head}</head>
<body>
<main${page.mainId ? ` id="${page.mainId}"` : ''}>
${page.main}
</main>
</body>
</html>
`;
}
