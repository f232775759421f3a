// Forms for setup: labelled fields, each with its own error line, filled from the API's 400
// `details` (which names the field by its path: `name`, `config.api_key`, `zone_occupancy.major_percent`).

import { ApiError } from './api.js';
import { h } from './dom.js';

export const REDACTED = '[REDACTED]';

export interface Field {
  /** The field's path in the request body, as the API names it in `details`. */
  name: string;
  label: string;
  kind?: 'text' | 'number' | 'select' | 'secret';
  options?: Array<[string, string]>;
  required?: boolean;
  value?: string | number | null;
  hint?: string;
  placeholder?: string;
  step?: string;
  /** For a secret in an edit form: one is stored (shown "•••• set", the input replaces it). */
  isSet?: boolean;
  onChange?(value: string): void;
}

export interface FormHandle {
  root: HTMLFormElement;
  status: HTMLElement;
  /** Current values by field name (a kept secret reads REDACTED, an empty one ''). */
  values(): Record<string, string>;
}

let seq = 0;

export function form(opts: {
  id: string;
  fields: Field[];
  submit: string;
  extra?: Node[];
  onSubmit(values: Record<string, string>): Promise<string | void>;
}): FormHandle {
  const uid = `${opts.id}-${++seq}`;
  const status = h('p', { class: 'status', role: 'status', 'aria-live': 'polite' });
  const inputs = new Map<string, { el: HTMLInputElement | HTMLSelectElement; error: HTMLElement; field: Field }>();
  const rows = opts.fields.map((f) => {
    const id = `${uid}-${f.name.replace(/[^a-z0-9]+/gi, '-')}`;
    const error = h('p', { class: 'field-error', id: `${id}-err`, 'data-error-for': f.name, role: 'alert' });
    let el: HTMLInputElement | HTMLSelectElement;
    if (f.kind === 'select') {
      el = h('select', {
        id,
        name: f.name,
        'aria-describedby': `${id}-err`,
        onchange: (ev: Event) => f.onChange?.((ev.target as HTMLSelectElement).value),
      });
      for (const [v, text] of f.options ?? []) el.append(h('option', { value: v, selected: String(f.value ?? '') === v }, text));
    } else {
      el = h('input', {
        id,
        name: f.name,
        type: f.kind === 'number' ? 'number' : f.kind === 'secret' ? 'password' : 'text',
        step: f.kind === 'number' ? (f.step ?? 'any') : undefined,
        autocomplete: f.kind === 'secret' ? 'new-password' : 'off',
        required: f.required && !(f.kind === 'secret' && f.isSet),
        placeholder: f.kind === 'secret' && f.isSet ? 'leave empty to keep the stored secret' : f.placeholder,
        'aria-describedby': `${id}-err`,
        value: f.kind === 'secret' ? undefined : f.value === null || f.value === undefined ? undefined : String(f.value),
      });
    }
    inputs.set(f.name, { el, error, field: f });
    const label = f.kind === 'secret' && f.isSet ? `Replace ${f.label.toLowerCase()}` : f.label;
    return h(
      'div',
      { class: 'field', 'data-field': f.name },
      f.kind === 'secret' &&
        f.isSet &&
        h('p', { class: 'secret-set' }, h('span', { class: 'muted' }, `${f.label}: `), h('span', { class: 'set-marker' }, '•••• set')),
      h('label', { for: id }, label, f.required && !(f.kind === 'secret' && f.isSet) ? h('span', { class: 'muted' }, ' (required)') : null),
      el,
      f.hint && h('p', { class: 'hint' }, f.hint),
      error,
    );
  });
  const button = h('button', { type: 'submit' }, opts.submit);
  const values = () => {
    const out: Record<string, string> = {};
    for (const [name, { el, field }] of inputs) {
      const v = el.value.trim();
      out[name] = field.kind === 'secret' && field.isSet && v === '' ? REDACTED : v;
    }
    return out;
  };
  const root = h(
    'form',
    {
      class: 'setup-form',
      id: opts.id,
      novalidate: true,
      onsubmit: (ev: Event) => {
        ev.preventDefault();
        for (const { error } of inputs.values()) error.textContent = '';
        for (const { el } of inputs.values()) el.removeAttribute('aria-invalid');
        status.className = 'status';
        status.setAttribute('role', 'status');
        status.textContent = 'Saving…';
        button.disabled = true;
        opts.onSubmit(values()).then(
          (done) => {
            button.disabled = false;
            status.textContent = done ?? 'Saved.';
          },
          (err) => {
            button.disabled = false;
            showFormError(err, inputs, status);
          },
        );
      },
    },
    ...rows,
    h('div', { class: 'form-actions' }, button, ...(opts.extra ?? [])),
    status,
  );
  return { root, status, values };
}

function showFormError(
  err: unknown,
  inputs: Map<string, { el: HTMLInputElement | HTMLSelectElement; error: HTMLElement }>,
  status: HTMLElement,
): void {
  const unplaced: string[] = [];
  if (err instanceof ApiError) {
    for (const p of err.fields) {
      // The field itself, or its nearest parent (config.space_ids.0 → config.space_ids).
      let path = p.field;
      let target = inputs.get(path);
      while (!target && path.includes('.')) {
        path = path.slice(0, path.lastIndexOf('.'));
        target = inputs.get(path);
      }
      if (target) {
        target.error.textContent = target.error.textContent ? `${target.error.textContent}; ${p.message}` : p.message;
        target.el.setAttribute('aria-invalid', 'true');
      } else unplaced.push(p.field === '(root)' ? p.message : `${p.field}: ${p.message}`);
    }
  }
  status.className = 'status error';
  status.setAttribute('role', 'alert');
  const what = err instanceof ApiError ? (err.fields.length ? `${err.message.split(';')[0]} (${err.code})` : err.text) : String(err);
  status.textContent = `Not saved: ${err instanceof ApiError && err.fields.length && !unplaced.length ? 'see the fields marked above' : what}${unplaced.length ? ` — ${unplaced.join('; ')}` : ''}`;
  const first = [...inputs.values()].find((i) => i.error.textContent);
  first?.el.focus();
}

/** A number field's value for the API: '' → null (cleared), else a number (a non-number is sent as is, for the API to name). */
export const numOrNull = (s: string | undefined): number | string | null =>
  s === undefined || s === '' ? null : Number.isFinite(Number(s)) ? Number(s) : s;
