import { z } from 'zod';
import type { ConnectorType } from '../../lib/events/vocabulary.js';
import { displayText, storableText } from '../../lib/validate.js';

/**
 * Integration config per connector type (spec: Integration). Each schema is strict (an unknown
 * key is a 400) and lists its secret fields once, in CONNECTORS; secrets are sealed at rest and
 * replaced by REDACTED_MARKER in every response.
 */

/** Stands in for every secret in responses; sent back on update it means "keep the stored value". */
export const REDACTED_MARKER = '[REDACTED]';

const secret = storableText(z.string().min(1).max(4096));
// Shown back in every response (not secret): one line, no bidi formatting.
const identifier = displayText(256);
const httpsUrl = storableText(z.url({ protocol: /^https$/, error: 'must be an https:// URL' }).max(2048));

/**
 * A pinned server certificate: the SHA-256 of the DER certificate, 64 hex digits (colons allowed,
 * as `openssl x509 -fingerprint -sha256` prints it). On-premises controllers mostly serve a
 * self-signed certificate; pinning it is safer than turning verification off, which is not offered.
 */
const certificateSha256 = z
  .string()
  .transform((v) => v.replace(/:/g, '').toLowerCase())
  .pipe(z.string().regex(/^[0-9a-f]{64}$/, 'a SHA-256 certificate fingerprint: 64 hex digits, colons allowed'));

/**
 * Whether the service polls this controller (docs/connectors/polling.md); `false` when a connector
 * of the customer's own sends its events to POST /ingest instead.
 */
const polling = () => z.boolean().default(true);

const merakiConfig = z.strictObject({
  api_key: secret,
  org_id: identifier,
  webhook_secret: secret.optional(),
  /** The network's validator string, answered to Meraki's GET before it starts posting (docs/connectors/meraki.md). */
  validator: z
    .string()
    .regex(/^[A-Za-z0-9]{1,128}$/, "the validator shown in Meraki's Location and Scanning page (letters and digits)")
    .optional(),
});

const unifiConfig = z.strictObject({
  controller_url: httpsUrl,
  username: identifier,
  password: secret,
  site: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,64}$/, 'a UniFi site id: letters, digits, "_" or "-"')
    .default('default'),
  certificate_sha256: certificateSha256.optional(),
  polling: polling(),
});

/** Central: OAuth API client for REST plus the streaming key (expires every 7 days); ALE: on-prem REST login. */
const arubaConfig = z.discriminatedUnion('mode', [
  z.strictObject({
    mode: z.literal('central'),
    base_url: httpsUrl,
    customer_id: identifier,
    client_id: identifier,
    client_secret: secret,
    streaming_key: secret,
  }),
  z.strictObject({
    mode: z.literal('ale'),
    base_url: httpsUrl,
    username: identifier,
    password: secret,
    certificate_sha256: certificateSha256.optional(),
    polling: polling(),
  }),
]);

/** API at https://<dashboard_subdomain>.mywifi.io/api/<method>, authenticated by the app secret. */
const mywifiConfig = z.strictObject({
  dashboard_subdomain: z.string().regex(/^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/, 'a DNS label: lower-case letters, digits and "-"'),
  app_secret: secret,
});

/** The signature covers notification_url + body, so the URL Square posts to is part of the config. */
const squareConfig = z.strictObject({
  location_id: identifier,
  access_token: secret,
  webhook_signature_key: secret,
  notification_url: httpsUrl,
  environment: z.enum(['production', 'sandbox']).default('production'),
});

/** Density authenticates its webhooks by a custom header the customer chooses: name and value come together. */
const densityConfig = z
  .strictObject({
    api_token: secret,
    space_ids: z
      .array(z.string().regex(/^spc_[A-Za-z0-9]+$/, 'a Density space id such as spc_123'))
      .max(500)
      .optional(),
    webhook_header_name: z
      .string()
      .regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$/, 'an HTTP header name')
      .optional(),
    webhook_header_value: secret.optional(),
  })
  .refine((c) => (c.webhook_header_name === undefined) === (c.webhook_header_value === undefined), {
    message: 'webhook_header_name and webhook_header_value are set together',
    path: ['webhook_header_value'],
  });

/** Region selects the API host (api.verkada.com, api.eu.verkada.com, api.au.verkada.com). */
const verkadaConfig = z.strictObject({
  org_id: identifier,
  api_key: secret,
  webhook_secret: secret.optional(),
  region: z.enum(['us', 'eu', 'au']).default('us'),
  /** Cameras whose people-count lines are polled (Verkada pushes no counts); none: no polling. */
  camera_ids: z
    .array(z.string().regex(/^[A-Za-z0-9-]{1,64}$/, 'a Verkada camera id'))
    .max(200)
    .optional(),
});

type KeysOf<T> = T extends unknown ? keyof T & string : never;

function connector<S extends z.ZodType<Record<string, unknown>>>(config: S, secrets: readonly KeysOf<z.output<S>>[]) {
  return { config, secrets: new Set<string>(secrets) };
}

export const CONNECTORS = {
  meraki: connector(merakiConfig, ['api_key', 'webhook_secret']),
  aruba: connector(arubaConfig, ['client_secret', 'streaming_key', 'password']),
  unifi: connector(unifiConfig, ['password']),
  mywifi: connector(mywifiConfig, ['app_secret']),
  square: connector(squareConfig, ['access_token', 'webhook_signature_key']),
  density: connector(densityConfig, ['api_token', 'webhook_header_value']),
  verkada: connector(verkadaConfig, ['api_key', 'webhook_secret']),
} satisfies Record<ConnectorType, { config: z.ZodType<Record<string, unknown>>; secrets: ReadonlySet<string> }>;

const option = <T extends ConnectorType, S extends z.ZodType>(type: T, config: S) =>
  z.strictObject({ connector_type: z.literal(type), config });

export const createIntegrationBody = z.discriminatedUnion('connector_type', [
  option('meraki', merakiConfig),
  option('aruba', arubaConfig),
  option('unifi', unifiConfig),
  option('mywifi', mywifiConfig),
  option('square', squareConfig),
  option('density', densityConfig),
  option('verkada', verkadaConfig),
]);
export type CreateIntegrationInput = z.infer<typeof createIntegrationBody>;
