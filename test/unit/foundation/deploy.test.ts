import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cpuShares, NODE_FLAGS, PROCESS_ENTRIES, PROCESS_ENV, type ServiceProcess } from '../../../apps/processes.js';
import { repoPath } from '../../../lib/paths.js';

// The image and the compose file cannot be built here (no Docker engine): these keep them pointing
// at what exists, so a renamed entry point or folder breaks a test instead of a deployment.
const dockerfile = fs.readFileSync(repoPath('Dockerfile'), 'utf8');
const compose = fs.readFileSync(repoPath('docker-compose.yml'), 'utf8');

describe('deployment files', () => {
  it('start only processes whose sources exist', () => {
    const entries = [...new Set([...`${dockerfile}\n${compose}`.matchAll(/dist\/([\w/.-]+)\.js/g)].map((m) => m[1]!))];
    expect(entries).toEqual(expect.arrayContaining(['apps/api/main', 'apps/edge/main', 'apps/pipeline/main', 'scripts/migrate']));
    for (const entry of entries) expect(fs.existsSync(repoPath(`${entry}.ts`)), `${entry}.ts`).toBe(true);
  });

  it('start each service with the Node flags and CPU weight every other launcher gives it', () => {
    for (const name of Object.keys(PROCESS_ENTRIES) as ServiceProcess[]) {
      const command = new RegExp(`\\n {2}${name}:\\n(?: {4}.*\\n)*? {4}command: (\\[.*\\])`).exec(compose)?.[1];
      expect(command, name).toBeDefined();
      expect(JSON.parse(command!), name).toEqual(['node', ...NODE_FLAGS[name], PROCESS_ENTRIES[name]]);
      const shares = new RegExp(`\\n {2}${name}:\\n(?: {4}.*\\n)*? {4}cpu_shares: (\\d+)`).exec(compose)?.[1];
      expect(shares === undefined ? 1024 : Number(shares), `${name} cpu_shares`).toBe(cpuShares(name));
    }
    // Every app container shares the `x-app` environment, which carries the allocator settings.
    const appEnv = compose.slice(compose.indexOf('environment: &app-env'), compose.indexOf('depends_on:'));
    for (const [k, v] of Object.entries(PROCESS_ENV)) expect(appEnv, k).toContain(`${k}: "${v}"`);
  });

  it('copy only folders that exist, and every folder the build compiles', () => {
    const copied = [...dockerfile.matchAll(/^COPY (?!--from)([\w./-]+) /gm)].map((m) => m[1]!);
    for (const dir of copied) expect(fs.existsSync(repoPath(dir)), dir).toBe(true);
    const build = JSON.parse(fs.readFileSync(repoPath('tsconfig.build.json'), 'utf8')) as { include: string[] };
    for (const include of build.include) expect(copied, include).toContain(include.split('/')[0]);
  });

  it('build the front door image from files that exist: its config, every file that config includes, and the page', () => {
    const stage = dockerfile.slice(dockerfile.indexOf(' AS frontdoor')).split('\nFROM ')[0]!;
    const copied = [...stage.matchAll(/^COPY (?!--from)(.+) \/etc\/nginx\/\S*$/gm)].flatMap((m) => m[1]!.split(' '));
    expect(copied).toContain('deploy/nginx.conf');
    for (const file of copied) expect(fs.existsSync(repoPath(file)), file).toBe(true);
    const deploy = fs.readFileSync(repoPath('deploy', 'nginx.conf'), 'utf8');
    const includes = [...deploy.matchAll(/include \/etc\/nginx\/([\w.-]+);/g)].map((m) => m[1]!);
    expect(includes).toContain('frontdoor-web.conf');
    for (const file of includes) expect(copied, file).toContain(`stack/nginx/${file}`);
    expect(stage).toContain('COPY --from=web /app/apps/web/dist /usr/share/nginx/dashboard');
    expect(deploy).toContain('root /usr/share/nginx/dashboard;');
    expect(compose).toMatch(/\n {2}frontdoor:\n(?: {4}.*\n)*? {4}build: \{ context: \., target: frontdoor \}/);
  });
});
