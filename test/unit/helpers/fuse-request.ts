/** FUSE requests as the kernel writes them to /dev/fuse, for tests of what reads them. */
let unique = 100;

/** A fuse_in_header (its own unique number each) followed by `body`. */
export function fuseRequest(opcode: number, nodeid: number, body: Buffer): Buffer {
  const header = Buffer.alloc(40);
  header.writeUInt32LE(40 + body.length, 0);
  header.writeUInt32LE(opcode, 4);
  header.writeBigUInt64LE(BigInt(unique++), 8);
  header.writeBigUInt64LE(BigInt(nodeid), 16);
  return Buffer.concat([header, body]);
}
