import { cliArgs } from '../lib/cli.js';
import { configOrExit } from '../lib/config.js';
import { createLogger } from '../lib/logger.js';
import { keyringFromConfig } from '../lib/secret-box.js';
import { createDb } from '../postgres/client.js';
import { resealIntegrationSecrets } from '../domain/integrations/integrations.js';

/** `npm run secrets:reseal`: after a key rotation, re-encrypts every connector secret under the current key. */
cliArgs(
  'npm run secrets:reseal --',
  'After a key rotation, re-encrypts every connector secret under the current key (SECRETS_KEY); then the previous keys can be removed.',
  { options: {} },
);
const cfg = configOrExit();
const log = createLogger('reseal', cfg.LOG_LEVEL);
const db = createDb(cfg, 2);
try {
  const count = await resealIntegrationSecrets(db, keyringFromConfig(cfg));
  log.info({ integrations: count, keyId: cfg.SECRETS_KEY_ID }, 'connector secrets re-sealed under the current key');
} catch (err) {
  log.fatal({ err }, 're-sealing failed; no previous key was removed');
  process.exitCode = 1;
} finally {
  await db.end();
}
