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
  const method = opts.method ?? (body === undefined ? 'GET' : 'POST');
  const res = await fetch(url, { method, headers, body }).catch((err: { cause?: { code?: string } }) => {
    // A kept-alive connection the server closed as idle just as this request reused it: a GET is
    // safe to send once more, as browsers and HTTP clients do.
    if (method !== 'GET' || err.cause?.code !== 'ECONNRESET') throw err;
    return fetch(url, { method, headers });
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    /* leave non-JSON bodies as text */
  }
  return { status: res.status, headers: res.headers, body: parsed };
}
