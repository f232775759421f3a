/**
 * A set of non-zero 32-bit integers: open addressing in a typed array, 8–16 bytes per member
 * (a `Set<number>` of the same costs about 30 and boxes values above 2^31). Values should be well
 * mixed already (hashes): the low bits pick the slot.
 */
export class Uint32Set {
  private slots = new Uint32Array(256);
  size = 0;

  has(v: number): boolean {
    const mask = this.slots.length - 1;
    for (let i = v & mask; this.slots[i] !== 0; i = (i + 1) & mask) if (this.slots[i] === v) return true;
    return false;
  }

  /** Adds `v` (not 0); false when it was already in. */
  add(v: number): boolean {
    if ((this.size + 1) * 2 > this.slots.length) {
      const old = this.slots;
      this.slots = new Uint32Array(old.length * 2);
      for (const x of old) if (x !== 0) this.put(x);
    }
    if (!this.put(v)) return false;
    this.size++;
    return true;
  }

  private put(v: number): boolean {
    const mask = this.slots.length - 1;
    let i = v & mask;
    for (; this.slots[i] !== 0; i = (i + 1) & mask) if (this.slots[i] === v) return false;
    this.slots[i] = v;
    return true;
  }
}
