import { describe, expect, it } from 'vitest';
import { tsvNumber, tsvRows } from '../../../clickhouse/client.js';

const copy = (fields: readonly string[]) => [...fields];

describe('a TabSeparated answer cut into rows (tsvRows)', () => {
  it('gives every row its fields in order, the last row with or without a line break', () => {
    expect(tsvRows('1\ta\t\\N\n2\tb\t3\n', copy)).toEqual([
      ['1', 'a', '\\N'],
      ['2', 'b', '3'],
    ]);
    expect(tsvRows('1\ta\n2\tb', copy)).toEqual([
      ['1', 'a'],
      ['2', 'b'],
    ]);
  });

  it('keeps empty fields at the start, the middle and the end of a row, and a one-column empty row', () => {
    expect(tsvRows('\tx\t\t\n\n', copy)).toEqual([['', 'x', '', ''], ['']]);
  });

  it('gives no row for an empty answer', () => {
    expect(tsvRows('', copy)).toEqual([]);
  });

  it('hands each row to the mapper as it is cut, so rows of different widths stay apart', () => {
    expect(tsvRows('a\tb\tc\nd\ne\tf\n', (f) => f.length)).toEqual([3, 1, 2]);
  });

  it('cuts a one-column answer into a row per line, and a row with tabs after lines without', () => {
    const lines = Array.from({ length: 1000 }, (_, i) => `device-${i}`);
    expect(tsvRows(`${lines.join('\n')}\n`, (f) => f[0])).toEqual(lines);
    expect(tsvRows('a\nb\nc\td\n', copy)).toEqual([['a'], ['b'], ['c', 'd']]);
  });
});

describe('a numeric TabSeparated field (tsvNumber)', () => {
  it('reads NULL and nan as null, every other number as itself', () => {
    expect(['\\N', 'nan', '0', '-1.5', '1e-7', '4294967295'].map(tsvNumber)).toEqual([null, null, 0, -1.5, 1e-7, 4294967295]);
  });
});
