/**
 * Directory names (native/src/dir_names.c): the names a directory holds, published from the
 * vfs's fresh listing of it, so that the LOOKUP of any other name (every file a build, `cp
 * -r`, `tar x` or git creates is looked up first) is answered "no such entry" in the addon,
 * without entering JavaScript. The vfs still decides: it publishes only what it would answer
 * itself without asking its backend, for no longer than its listing is fresh; the addon adds
 * every name made through the mount as its request is read, refuses a publish that a
 * name-making request overtook (the epoch read when the LOOKUP was handled) or that one still
 * unanswered may contradict, and clears everything on what it does not know. A change made
 * elsewhere that the vfs hears of drops its directory's names.
 */
import type { AttrMirror } from "./attr-mirror.js";
import type { NativeAddon } from "./native.js";

/** Names a directory may have to be published (dir_names.h's DIR_NAMES_MAX). */
const NAMES_MAX = 16384;

export class DirNames {
  constructor(
    private readonly addon: NativeAddon,
    private readonly mirror: AttrMirror,
  ) {}

  /** Moves with every name-making request read; a publish carries the value read when its LOOKUP was handled. */
  get epoch(): number {
    return this.mirror.shared[2]!;
  }

  /** `negative`: the fuse_entry_out a miss is answered with. True when held. */
  publish(nodeid: number, names: Iterable<string>, ttlMs: number, negative: Buffer, epoch: number): boolean {
    if (!(ttlMs >= 1) || epoch !== this.epoch) return false;
    const all = [...names];
    if (all.length > NAMES_MAX) return false;
    const list = Buffer.from(all.length === 0 ? "" : all.join("\0") + "\0", "utf8");
    return this.addon.namesPublish(this.mirror.handle, nodeid, list, all.length, Math.min(Math.floor(ttlMs), 2 ** 31 - 1), negative, epoch);
  }

  /** Whether the addon holds the names of directory `nodeid` (a publish would replace them). */
  holds(nodeid: number): boolean {
    return this.addon.namesHolds(this.mirror.handle, nodeid);
  }

  /** Something changed in directory `nodeid` elsewhere. */
  drop(nodeid: number): void {
    this.addon.namesDrop(this.mirror.handle, nodeid);
  }

  clear(): void {
    this.addon.namesClear(this.mirror.handle);
  }
}
