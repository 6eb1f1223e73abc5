// A growable array stored as fixed-size chunks. The garbage collector re-scans a whole old array
// each time a young value is written into it, so one large array of strings or nodes written on
// every command costs a full scan per young collection; with chunks only the written ones are.

const CHUNK_BITS = 10;
const CHUNK_SIZE = 1 << CHUNK_BITS;
const CHUNK_MASK = CHUNK_SIZE - 1;

export class ChunkedArray<T> {
  private readonly chunks: (T | undefined)[][] = [];

  get(index: number): T | undefined {
    return this.chunks[index >>> CHUNK_BITS]?.[index & CHUNK_MASK];
  }

  set(index: number, value: T | undefined): void {
    const at = index >>> CHUNK_BITS;
    let chunk = this.chunks[at];
    if (chunk === undefined) {
      while (this.chunks.length <= at) this.chunks.push(new Array(CHUNK_SIZE).fill(undefined));
      chunk = this.chunks[at]!;
    }
    chunk[index & CHUNK_MASK] = value;
  }

  clear(): void {
    this.chunks.length = 0;
  }
}
