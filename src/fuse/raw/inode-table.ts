/**
 * The kernel's node ids over the vfs's paths. A node lives while the kernel holds lookups
 * on it (LOOKUP, CREATE, MKDIR, READDIRPLUS add one; FORGET takes them back); renames move
 * a node and everything under it; an unlinked node keeps its last path until forgotten.
 */
import { FUSE_ROOT_ID } from "./protocol.js";

interface Node {
  path: string;
  lookups: number;
  /** Open file handles on the node (an unlink of an open file hides it instead). */
  opens: number;
  /** The node's file was unlinked while open and lives on under a hidden name. */
  hidden: boolean;
  /** Other names of the same file (hard links made through the mount). */
  aliases?: Set<string>;
}

export class InodeTable {
  private readonly nodes = new Map<number, Node>([[FUSE_ROOT_ID, { path: "/", lookups: 1, opens: 0, hidden: false }]]);
  private readonly byPath = new Map<string, number>([["/", FUSE_ROOT_ID]]);
  private nextId = FUSE_ROOT_ID + 1;

  /** The path of a node the kernel names; ENOENT-worthy when it was forgotten. */
  path(nodeid: number): string | undefined {
    return this.nodes.get(nodeid)?.path;
  }

  nodeAt(path: string): number | undefined {
    return this.byPath.get(path);
  }

  /** Every path the kernel holds a node for, with its node id. */
  entries(): IterableIterator<[string, number]> {
    return this.byPath.entries();
  }

  /** The node for a path, created if new, with one more kernel lookup on it. */
  lookup(path: string): number {
    let id = this.byPath.get(path);
    if (id === undefined) {
      id = this.nextId++;
      this.nodes.set(id, { path, lookups: 0, opens: 0, hidden: false });
      this.byPath.set(path, id);
    }
    this.nodes.get(id)!.lookups++;
    return id;
  }

  /** A node id for a node made elsewhere (a file the addon made: made-files.ts), bound later with `made`. */
  reserve(): number {
    return this.nextId++;
  }

  /** A reserved node id now names `path`, with the one kernel lookup its CREATE gave. */
  made(nodeid: number, path: string): void {
    this.nodes.set(nodeid, { path, lookups: 1, opens: 0, hidden: false });
    this.byPath.set(path, nodeid);
  }

  /**
   * A hard link: `path` becomes another name of the node, with one more kernel lookup, so
   * the kernel sees one inode (a change through either name, its link count, show on both).
   */
  alias(nodeid: number, path: string): number {
    const node = this.nodes.get(nodeid);
    if (!node) return this.lookup(path);
    (node.aliases ??= new Set()).add(path);
    this.byPath.set(path, nodeid);
    node.lookups++;
    return nodeid;
  }

  forget(nodeid: number, count: number): void {
    const node = this.nodes.get(nodeid);
    if (!node || nodeid === FUSE_ROOT_ID) return;
    node.lookups -= count;
    if (node.lookups > 0 || node.opens > 0) return;
    this.nodes.delete(nodeid);
    if (this.byPath.get(node.path) === nodeid) this.byPath.delete(node.path);
    for (const alias of node.aliases ?? []) if (this.byPath.get(alias) === nodeid) this.byPath.delete(alias);
  }

  opened(nodeid: number): void {
    const node = this.nodes.get(nodeid);
    if (node) node.opens++;
  }

  /** One handle closed; returns the hidden path to remove when it was the last one. */
  released(nodeid: number): string | undefined {
    const node = this.nodes.get(nodeid);
    if (!node) return undefined;
    node.opens = Math.max(0, node.opens - 1);
    const hiddenPath = node.opens === 0 && node.hidden ? node.path : undefined;
    if (node.opens === 0 && node.lookups <= 0) this.forget(nodeid, 0);
    return hiddenPath;
  }

  /**
   * Whether the path names an open node's file as the vfs has it open: the node's own path
   * (its handles were opened through that one). Another name of it (a hard link) is not.
   */
  isOpen(path: string): boolean {
    const id = this.byPath.get(path);
    const node = id === undefined ? undefined : this.nodes.get(id);
    return node !== undefined && node.opens > 0 && node.path === path;
  }

  /** The path no longer names the node (unlink, rmdir, replaced by a rename); a node with other names goes on under one of them. */
  unlinked(path: string): void {
    const id = this.byPath.get(path);
    this.byPath.delete(path);
    const node = id === undefined ? undefined : this.nodes.get(id);
    if (!node?.aliases) return;
    node.aliases.delete(path);
    if (node.path === path) {
      const [next] = node.aliases;
      if (next !== undefined) {
        node.aliases.delete(next);
        node.path = next;
      }
    }
  }

  /** An open file's node now lives under a hidden name (its path was unlinked). */
  hide(path: string, hiddenPath: string): void {
    const id = this.byPath.get(path);
    if (id === undefined) return;
    const node = this.nodes.get(id)!;
    node.path = hiddenPath;
    node.hidden = true;
    this.byPath.delete(path);
    this.byPath.set(hiddenPath, id);
  }

  /** A rename: the node at `from` and every node under it move to `to`. */
  renamed(from: string, to: string): void {
    this.unlinked(to);
    const aliased = this.byPath.get(from);
    const aliasNode = aliased === undefined ? undefined : this.nodes.get(aliased);
    if (aliasNode?.aliases?.has(from)) {
      // Another name of a file moves alone (a file has nothing under it).
      aliasNode.aliases.delete(from);
      aliasNode.aliases.add(to);
      this.byPath.delete(from);
      this.byPath.set(to, aliased!);
      return;
    }
    const prefix = from === "/" ? "/" : from + "/";
    for (const [id, node] of this.nodes) {
      if (node.path !== from && !node.path.startsWith(prefix)) continue;
      if (this.byPath.get(node.path) === id) this.byPath.delete(node.path);
      node.path = to + node.path.slice(from.length);
      this.byPath.set(node.path, id);
    }
  }
}
