/**
 * The attribute mirror (native/src/attr_mirror.c): GETATTR replies the vfs gave, kept in the
 * addon so that the next GETATTR of the same node is answered there, without entering
 * JavaScript. The vfs still decides every attribute: the mirror only repeats a reply, for
 * no longer than the attribute TTL, and forgets a node as soon as a request that may change
 * it is read, again when that request is answered, and when the vfs learns of a change
 * elsewhere (its change feed).
 *
 * A reply is published with the epoch read when its request arrived; the addon refuses it
 * if its node was dropped since (a write that overtook it).
 */
import type { MirrorHandle, NativeAddon } from "./native.js";

/** Nodes held at most: 64 Ki slots of 128 bytes (8 MiB, touched as used). */
const SLOTS = 1 << 16;

export class AttrMirror {
  readonly handle: MirrorHandle;
  /** [0]: the epoch; [1]: kept opens answered in the addon, not yet taken (kept-opens.ts); [2]: the directory names' epoch (dir-names.ts); [3]: files made in the addon, not yet taken (made-files.ts). */
  readonly shared = new Int32Array(4);

  constructor(private readonly addon: NativeAddon) {
    this.handle = addon.createMirror(this.shared, SLOTS);
  }

  /** Moves with every drop; a publish carries the value read before its attributes were computed. */
  get epoch(): number {
    return this.shared[0]!;
  }

  /** `attrOut`: the fuse_attr_out just sent (or to send) for the node. */
  publish(nodeid: number, attrOut: Buffer, ttlSec: number, epoch: number): boolean {
    const ttlMs = Math.floor(ttlSec * 1000);
    return ttlMs > 0 && this.addon.mirrorPublish(this.handle, nodeid, attrOut, ttlMs, epoch);
  }

  /** A request was answered: the addon forgets what it may have changed, by the rule it applied at its arrival. */
  settled(opcode: number, nodeid: number, openFlags: number): void {
    this.addon.mirrorSettled(this.handle, opcode, nodeid, openFlags);
  }

  drop(nodeid: number): void {
    this.addon.mirrorDrop(this.handle, nodeid);
  }

  clear(): void {
    this.addon.mirrorClear(this.handle);
  }
}
