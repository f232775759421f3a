// A tiny element builder: h('p', { class: 'x' }, 'text', child). Text is always set as text, never HTML.

type Attrs = Record<string, string | number | boolean | undefined | ((ev: Event) => void)>;
type Child = Node | string | number | null | undefined | false;

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) continue;
    if (typeof value === 'function') el.addEventListener(name.replace(/^on/, ''), value);
    else if (value === true) el.setAttribute(name, '');
    else el.setAttribute(name, String(value));
  }
  for (const c of children) if (c !== null && c !== undefined && c !== false) el.append(typeof c === 'number' ? String(c) : c);
  return el;
}

/** Replaces an element's content. */
export function fill(el: Element, ...children: Child[]): void {
  el.replaceChildren(
    ...children
      .filter((c): c is Node | string | number => c !== null && c !== undefined && c !== false)
      .map((c) => (typeof c === 'number' ? String(c) : c)),
  );
}

/** A section with a heading and a status line for its own loading and errors. */
export function section(title: string, id: string): { root: HTMLElement; body: HTMLElement; status: HTMLElement; controls: HTMLElement } {
  const status = h('p', { class: 'status', role: 'status', 'aria-live': 'polite' });
  const body = h('div', { class: 'body' });
  const controls = h('div', { class: 'controls' });
  const root = h('section', { class: 'card', id, 'aria-labelledby': `${id}-h` }, h('h2', { id: `${id}-h` }, title), controls, status, body);
  return { root, body, status, controls };
}

/** Shows an error in words in a section's status line. */
export function showError(status: HTMLElement, what: string, err: unknown): void {
  status.className = 'status error';
  status.setAttribute('role', 'alert');
  status.textContent = `${what}: ${err instanceof Error && 'text' in err ? String((err as { text: string }).text) : err instanceof Error ? err.message : String(err)}`;
}

export function clearStatus(status: HTMLElement, text = ''): void {
  status.className = 'status';
  status.setAttribute('role', 'status');
  status.textContent = text;
}

/** A labelled <select>. */
export function picker(
  label: string,
  name: string,
  options: Array<[string, string]>,
  value: string,
  onChange: (v: string) => void,
): HTMLLabelElement {
  const select = h('select', { name, onchange: (ev: Event) => onChange((ev.target as HTMLSelectElement).value) });
  for (const [v, text] of options) select.append(h('option', { value: v, selected: v === value }, text));
  return h('label', {}, `${label} `, select);
}
