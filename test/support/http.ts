/** A JSON response as tests read it: the body is loosely typed on purpose. */
export interface JsonResponse {
  status: number;
  headers: Headers;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
}

export interface RequestOptions {
  method?: string;
  key?: string;
  headers?: Record<string, string>;
  json?: unknown;
  rawBody?: string;
}

export async function request(url: string, opts: RequestOptions = {}): Promise<JsonResponse> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.key) headers.authorization = `Bearer ${opts.key}`;
  let body: string | undefined = opts.rawBody;
  if (opts.json !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(opts.json);
  }
  const res = await fetch(url, { method: opts.method ?? (body === undefined ? 'GET' : 'POST'), headers, body });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    /* leave non-JSON bodies as text */
  }
  return { status: res.status, headers: res.headers, body: parsed };
}
