import { describe, expect, it } from 'vitest';
import { tsvRows } from '../../../clickhouse/client.js';

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
});
