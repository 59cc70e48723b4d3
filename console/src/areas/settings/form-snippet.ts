// The copy-paste HTML form of a source (decisions §13): posts to the source's intake address,
// one labelled control per field of the chosen entity, the trap field hidden from people.
import type { FieldDef } from './api.ts';

function escapeHtml(text: string): string {
  return text.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!);
}

const INPUT_TYPES: Record<string, string> = {
  email: 'email',
  phone: 'tel',
  url: 'url',
};
const AUTOCOMPLETE: Record<string, string> = {
  email: 'email',
  phone: 'tel',
  first_name: 'given-name',
  last_name: 'family-name',
  company: 'organization',
};

function control(field: FieldDef): string | null {
  const name = `fields[${field.key}]`;
  const required = field.required ? ' required' : '';
  const label = escapeHtml(field.label);
  const auto = field.role && AUTOCOMPLETE[field.role] ? ` autocomplete="${AUTOCOMPLETE[field.role]}"` : '';
  switch (field.type) {
    case 'file':
    case 'files':
      // Files are taken by address only (interface rule 4), never from a form.
      return null;
    case 'textarea':
      return `  <label>${label} <textarea name="${name}"${required}></textarea></label>`;
    case 'boolean':
      return `  <label><input type="checkbox" name="${name}" value="true"${required}> ${label}</label>`;
    case 'select': {
      const options = (field.options ?? []).map((o) => `<option>${escapeHtml(o)}</option>`).join('');
      return `  <label>${label}\n    <select name="${name}"${required}><option value=""></option>${options}</select>\n  </label>`;
    }
    case 'multiselect': {
      const boxes = (field.options ?? [])
        .map(
          (o) =>
            `    <label><input type="checkbox" name="${name}" value="${escapeHtml(o)}"> ${escapeHtml(o)}</label>`,
        )
        .join('\n');
      return `  <fieldset>\n    <legend>${label}</legend>\n${boxes}\n  </fieldset>`;
    }
    case 'number':
      return `  <label>${label} <input type="number" step="any" name="${name}"${required}></label>`;
    case 'date':
      return `  <label>${label} <input type="date" name="${name}"${required}></label>`;
    case 'datetime':
      return `  <label>${label} <input type="datetime-local" name="${name}"${required}></label>`;
    default: {
      const type = field.format && INPUT_TYPES[field.format] ? ` type="${INPUT_TYPES[field.format]}"` : '';
      return `  <label>${label} <input${type} name="${name}"${auto}${required}></label>`;
    }
  }
}

/**
 * A browser sends a `datetime-local` control's wall-clock time without its offset, which a
 * `datetime` field needs (entities guide): as the form's data is put together, each such value
 * is sent as the instant it names in the visitor's time zone (UTC, ISO 8601). The page keeps what
 * the person typed. Without scripts the value goes as typed and is refused (422, `error_url`),
 * never stored as another time.
 */
const DATETIME_SCRIPT = [
  '<script>',
  '  // Date-time fields: the browser leaves out the time zone, which the service needs.',
  "  document.currentScript.previousElementSibling.addEventListener('formdata', function (event) {",
  `    event.target.querySelectorAll('input[type="datetime-local"][name]').forEach(function (input) {`,
  '      if (input.value) event.formData.set(input.name, new Date(input.value).toISOString());',
  '    });',
  '  });',
  '</script>',
];

export function formSnippet(options: {
  action: string;
  entity: string;
  fields: readonly FieldDef[];
  honeypot: string | null;
  submitLabel: string;
}): string {
  const parts = [
    `<form method="post" action="${escapeHtml(options.action)}">`,
    `  <input type="hidden" name="entity" value="${escapeHtml(options.entity)}">`,
    ...options.fields.map(control).filter((line): line is string => line !== null),
  ];
  if (options.honeypot) {
    parts.push(
      '  <!-- The trap: people never see it, bots fill it. Keep it empty and out of sight. -->',
      '  <div style="position:absolute;left:-10000px" aria-hidden="true">',
      `    <label>Leave this empty <input name="${escapeHtml(options.honeypot)}" tabindex="-1" autocomplete="off"></label>`,
      '  </div>',
    );
  }
  parts.push(`  <button type="submit">${escapeHtml(options.submitLabel)}</button>`, '</form>');
  if (options.fields.some((field) => field.type === 'datetime')) parts.push(...DATETIME_SCRIPT);
  return parts.join('\n');
}
