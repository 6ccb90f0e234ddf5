/**
 * Made files (native/src/made_files.c): the CREATE of a new name in a directory whose names
 * the addon holds (dir-names.ts), answered in the addon: the file made on the disk as the
 * vfs's own create makes it there, registered for FUSE passthrough, and answered with a node
 * id and handle reserved here. The caller has its file in about the time of the disk's
 * create; the vfs's bookkeeping follows the reply.
 *
 * The vfs still decides: it grants a directory only where its create of a missing name would
 * make nothing but that disk file (vfs.ts createGrant), a grant lives no longer than the
 * directory's names are held (and a SETATTR of the directory ends it), and the vfs hears of
 * every file made before it handles any later request (`take`), taking it as its own create
 * would have.
 */
import type { CreateGrant } from "../../protocol/index.js";
import { boundedLru } from "../../protocol/index.js";
import type { AttrMirror } from "./attr-mirror.js";
import type { MirrorHandle, NativeAddon } from "./native.js";

/** Node ids and handles kept reserved in the addon (made_files.h allows 256). */
const RESERVED = 64;
/** Grants remembered here (a file made under one is adopted through it): more than the addon's directories (256); one forgotten here ends there too. */
const GRANTS_KEPT = 1024;

export interface MadeFile {
  dir: number;
  nodeid: number;
  fh: number;
  fd: number;
  backingId: number;
  name: string;
  /** When (Date.now()'s clock): its directory's entries changed then (the addon answers the directory's next GETATTR so). */
  madeAtMs: number;
  /** The grant it was made under (undefined: forgotten here, which the addon's bound rules out). */
  grant: CreateGrant | undefined;
  /** The directory's path when it was granted. */
  grantedAt: string | undefined;
}

interface Granted {
  grant: CreateGrant;
  dir: string;
}

export class MadeFiles {
  private readonly handle: MirrorHandle;
  private readonly grants = boundedLru<number, Granted>(GRANTS_KEPT, {
    // A file made under a grant forgotten here could not be taken: the addon forgets the directory's names, and the grant with them.
    dispose: (_granted, nodeid, reason) => {
      if (reason === "evict") this.addon.namesDrop(this.handle, nodeid);
    },
  });
  /** Moves with every SETATTR: a grant computed before one may carry a group rule it changed (`generation`). */
  private attrChanges = 0;

  constructor(
    private readonly addon: NativeAddon,
    private readonly mirror: AttrMirror,
  ) {
    this.handle = mirror.handle;
  }

  /** A SETATTR reached the vfs (the addon ended its directory's grant as it read it). */
  attributesChanged(): void {
    this.attrChanges++;
  }

  /** Read before a grant's attributes are: `grant` refuses it once a SETATTR came meanwhile. */
  get generation(): number {
    return this.attrChanges;
  }

  /**
   * New files in directory `nodeid` (at `dir`, its names held in the addon) may be made
   * there, under `grant` with group `gid` (-1: the caller's), computed at `generation`. False
   * when its names are no longer held or a SETATTR came since.
   */
  grant(nodeid: number, dir: string, grant: CreateGrant, gid: number, umask: number | undefined, ttlMs: number, openFlags: number, generation: number): boolean {
    if (!(ttlMs >= 1) || generation !== this.attrChanges) return false;
    const granted = this.addon.namesGrant(this.handle, nodeid, grant.hostDir, gid, umask ?? -1, Math.min(Math.floor(ttlMs), 2 ** 31 - 1), openFlags);
    if (granted) this.grants.set(nodeid, { grant, dir });
    return granted;
  }

  /** Whether new files in directory `nodeid` are the addon's to make now. */
  granted(nodeid: number): boolean {
    return this.addon.namesGranted(this.handle, nodeid);
  }

  /** Keeps the addon stocked with node ids and handles for the files it makes. */
  reserve(next: () => [nodeid: number, fh: number]): void {
    for (let n = this.addon.madeReserved(this.handle); n < RESERVED; n++) {
      const [nodeid, fh] = next();
      if (!this.addon.madeReserve(this.handle, nodeid, fh)) return;
    }
  }

  /** Whether the addon made files not yet taken. */
  get pending(): boolean {
    return this.mirror.shared[3] !== 0;
  }

  /** Calls `adopt` for each file made since the last take, in the order made. */
  take(adopt: (made: MadeFile) => void): void {
    while (this.pending) {
      const made = this.addon.madeTake(this.handle);
      if (made.length === 0) return;
      for (const [dir, nodeid, fh, fd, backingId, name, madeAtMs] of made) {
        const granted = this.grants.get(dir);
        adopt({ dir, nodeid, fh, fd, backingId, name, madeAtMs, grant: granted?.grant, grantedAt: granted?.dir });
      }
    }
  }
}
