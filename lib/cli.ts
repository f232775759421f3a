import { parseArgs, type ParseArgsConfig } from 'node:util';

type Options = NonNullable<ParseArgsConfig['options']>;

/** The option list of a usage text: each option with its kind and default. */
function optionLines(options: Options): string[] {
  return Object.entries(options).map(([name, o]) => {
    const flag = `${o.short ? `-${o.short}, ` : ''}--${name}${o.type === 'string' ? ' <value>' : ''}`;
    const given = o.default === undefined ? '' : `default ${Array.isArray(o.default) ? o.default.join(',') : String(o.default)}`;
    return `  ${flag.padEnd(30)} ${given}`.trimEnd();
  });
}

/**
 * `parseArgs` for our command-line entry points: `--help` prints the usage and exits 0, and an
 * unknown option or a missing value prints what was wrong and the usage and exits 2, instead of a
 * Node stack trace.
 */
export function cliArgs<T extends ParseArgsConfig>(
  command: string,
  summary: string,
  config: T,
  argv = process.argv.slice(2),
): ReturnType<typeof parseArgs<T>> {
  const options = { ...config.options, help: { type: 'boolean' as const, short: 'h' } };
  const usage = [`usage: ${command} [options]`, '', summary, '', 'Options:', ...optionLines(options)].join('\n');
  let parsed: ReturnType<typeof parseArgs<T>>;
  try {
    parsed = parseArgs({ ...config, options, args: argv } as T);
  } catch (err) {
    process.stderr.write(`${(err as Error).message.split('. ')[0]}\n\n${usage}\n`);
    process.exit(2);
  }
  if ((parsed.values as Record<string, unknown>).help) {
    process.stdout.write(`${usage}\n`);
    process.exit(0);
  }
  return parsed;
}
