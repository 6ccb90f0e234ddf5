/**
 * The emulator's repositories: per repo a list of commits, each a delta over its parent
 * (`null` deletes), persisted as JSON files with atomic writes (write a temp file, rename).
 *
 * Layout under the data folder: `repos/<owner>/<name>/repo.json` (metadata and the commit
 * order) and `repos/<owner>/<name>/commits/<hash>.json` (one delta each).
 */
import { createHash, randomUUID } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";

export type RepoType = "agent" | "skill";
export interface FileEntry {
  type: "file";
  content: string;
}
export interface LinkEntry {
  type: "agent" | "skill";
  repo_handle: string;
  owner?: string;
  commit_id?: string;
  commit_hash?: string;
}
export type Entry = FileEntry | LinkEntry;
export type Tree = Record<string, Entry>;
export type Delta = Record<string, Entry | null>;

export interface CommitRecord {
  id: string;
  commit_hash: string;
  parent_hash: string | null;
  created_at: string;
  changes: Delta;
}

/** A commit in the commit list: with its parent's id (commits form one line, each on the head before it). */
export interface ListedCommit extends CommitRecord {
  parent_id: string | null;
}

export interface RepoMeta {
  id: string;
  owner: string;
  repo_handle: string;
  repo_type: RepoType;
  is_public: boolean;
  is_archived: boolean;
  description: string | null;
  readme: string | null;
  tags: string[];
  created_at: string;
  updated_at: string;
  commit_hashes: string[];
}

interface Repo {
  meta: RepoMeta;
  commits: CommitRecord[];
  head: Tree;
  /** Trees at every SNAPSHOT_EVERY-th commit, made on demand: a pull at an old commit replays at most that many deltas. */
  snapshots?: Map<number, Tree>;
}

const SNAPSHOT_EVERY = 64;

/** Thrown by the store; the server turns it into an HTTP status. */
export class HubError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export const REPO_HANDLE_PATTERN = /^[a-z][a-z0-9-_]*$/;

function writeJsonAtomic(file: string, value: unknown): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.${randomUUID()}.tmp`;
  fs.writeFileSync(tmp, JSON.stringify(value));
  fs.renameSync(tmp, file);
}

function applyDelta(tree: Tree, delta: Delta): Tree {
  const next = { ...tree };
  for (const [p, entry] of Object.entries(delta)) {
    if (entry === null) delete next[p];
    else next[p] = entry;
  }
  return next;
}

function validateDelta(files: unknown): Delta {
  if (typeof files !== "object" || files === null || Array.isArray(files)) {
    throw new HubError(422, "files must be an object of path -> entry | null");
  }
  const delta: Delta = {};
  for (const [p, raw] of Object.entries(files as Record<string, unknown>)) {
    if (p === "" || p.startsWith("/") || p.split("/").some((s) => s === "" || s === "." || s === "..")) {
      throw new HubError(422, `invalid path ${JSON.stringify(p)}`);
    }
    if (raw === null) {
      delta[p] = null;
      continue;
    }
    const e = raw as Record<string, unknown>;
    if (e.type === "file" && typeof e.content === "string") {
      delta[p] = { type: "file", content: e.content };
    } else if ((e.type === "agent" || e.type === "skill") && typeof e.repo_handle === "string") {
      const link: LinkEntry = { type: e.type, repo_handle: e.repo_handle };
      if (typeof e.owner === "string") link.owner = e.owner;
      if (typeof e.commit_hash === "string") link.commit_hash = e.commit_hash;
      if (typeof e.commit_id === "string") link.commit_id = e.commit_id;
      delta[p] = link;
    } else {
      throw new HubError(422, `invalid entry for ${JSON.stringify(p)}`);
    }
  }
  return delta;
}

export class HubStore {
  private readonly repos = new Map<string, Repo>();

  /** `dataDir` undefined keeps everything in memory. */
  constructor(private readonly dataDir?: string) {
    if (dataDir) this.load(dataDir);
  }

  private static key(owner: string, name: string): string {
    return `${owner}/${name}`;
  }

  private repoDir(owner: string, name: string): string {
    return path.join(this.dataDir as string, "repos", encodeURIComponent(owner), encodeURIComponent(name));
  }

  private load(dataDir: string): void {
    const root = path.join(dataDir, "repos");
    if (!fs.existsSync(root)) return;
    for (const owner of fs.readdirSync(root)) {
      for (const name of fs.readdirSync(path.join(root, owner))) {
        const dir = path.join(root, owner, name);
        const metaFile = path.join(dir, "repo.json");
        if (!fs.existsSync(metaFile)) continue;
        const meta = JSON.parse(fs.readFileSync(metaFile, "utf8")) as RepoMeta;
        const commits: CommitRecord[] = [];
        let head: Tree = {};
        for (const hash of meta.commit_hashes) {
          const commit = JSON.parse(fs.readFileSync(path.join(dir, "commits", `${hash}.json`), "utf8")) as CommitRecord;
          commits.push(commit);
          head = applyDelta(head, commit.changes);
        }
        this.repos.set(HubStore.key(meta.owner, meta.repo_handle), { meta, commits, head });
      }
    }
  }

  private persistMeta(repo: Repo): void {
    if (!this.dataDir) return;
    writeJsonAtomic(path.join(this.repoDir(repo.meta.owner, repo.meta.repo_handle), "repo.json"), repo.meta);
  }

  get(owner: string, name: string): RepoMeta | undefined {
    return this.repos.get(HubStore.key(owner, name))?.meta;
  }

  list(filter: { owner?: string; repoType?: RepoType; isPublic?: boolean; query?: string }): RepoMeta[] {
    return [...this.repos.values()]
      .map((r) => r.meta)
      .filter(
        (m) =>
          (filter.owner === undefined || m.owner === filter.owner) &&
          (filter.repoType === undefined || m.repo_type === filter.repoType) &&
          (filter.isPublic === undefined || m.is_public === filter.isPublic) &&
          (!filter.query || m.repo_handle.includes(filter.query)),
      );
  }

  create(
    owner: string,
    body: { repo_handle?: unknown; repo_type?: unknown; is_public?: unknown; description?: unknown; readme?: unknown; tags?: unknown },
  ): RepoMeta {
    const name = body.repo_handle;
    if (typeof name !== "string" || !REPO_HANDLE_PATTERN.test(name)) {
      throw new HubError(422, `Invalid repo_handle ${JSON.stringify(name)}`);
    }
    if (body.repo_type !== "agent" && body.repo_type !== "skill") {
      throw new HubError(422, `Invalid repo_type ${JSON.stringify(body.repo_type)}`);
    }
    if (this.repos.has(HubStore.key(owner, name))) throw new HubError(409, `Repo ${owner}/${name} already exists`);
    const now = new Date().toISOString();
    const meta: RepoMeta = {
      id: randomUUID(),
      owner,
      repo_handle: name,
      repo_type: body.repo_type,
      is_public: body.is_public === true,
      is_archived: false,
      description: typeof body.description === "string" ? body.description : null,
      readme: typeof body.readme === "string" ? body.readme : null,
      tags: Array.isArray(body.tags) ? body.tags.filter((t): t is string => typeof t === "string") : [],
      created_at: now,
      updated_at: now,
      commit_hashes: [],
    };
    const repo: Repo = { meta, commits: [], head: {} };
    this.repos.set(HubStore.key(owner, name), repo);
    this.persistMeta(repo);
    return meta;
  }

  update(owner: string, name: string, body: Record<string, unknown>): RepoMeta {
    const repo = this.require(owner, name);
    if (typeof body.description === "string") repo.meta.description = body.description;
    if (typeof body.readme === "string") repo.meta.readme = body.readme;
    if (Array.isArray(body.tags)) repo.meta.tags = body.tags.filter((t): t is string => typeof t === "string");
    if (typeof body.is_public === "boolean") repo.meta.is_public = body.is_public;
    repo.meta.updated_at = new Date().toISOString();
    this.persistMeta(repo);
    return repo.meta;
  }

  delete(owner: string, name: string): void {
    this.require(owner, name);
    this.repos.delete(HubStore.key(owner, name));
    if (this.dataDir) fs.rmSync(this.repoDir(owner, name), { recursive: true, force: true });
  }

  private require(owner: string, name: string): Repo {
    const repo = this.repos.get(HubStore.key(owner, name));
    if (!repo) throw new HubError(404, `Repo ${owner}/${name} not found`);
    return repo;
  }

  /** A commit by full hash or any prefix of at least 8 characters; undefined if none. */
  private findCommitIndex(repo: Repo, ref: string): number {
    if (ref.length < 8) return -1;
    for (let i = repo.commits.length - 1; i >= 0; i--) {
      if (repo.commits[i].commit_hash.startsWith(ref.toLowerCase())) return i;
    }
    return -1;
  }

  /** The repo's own tree at head or at `ref` (a commit hash or prefix), without link expansion. */
  treeAt(owner: string, name: string, ref?: string): { commit: CommitRecord; tree: Tree } {
    const repo = this.require(owner, name);
    if (repo.commits.length === 0) throw new HubError(404, `Repo ${owner}/${name} has no commits`);
    if (ref === undefined || ref === "latest") {
      return { commit: repo.commits[repo.commits.length - 1], tree: repo.head };
    }
    const index = this.findCommitIndex(repo, ref);
    if (index < 0) throw new HubError(404, `Commit ${ref} not found in ${owner}/${name}`);
    return { commit: repo.commits[index], tree: this.treeAtIndex(repo, index) };
  }

  /** The tree after commit `index`: from the nearest snapshot at or before it, replaying the deltas since. */
  private treeAtIndex(repo: Repo, index: number): Tree {
    if (index === repo.commits.length - 1) return repo.head;
    const snapshots = (repo.snapshots ??= new Map());
    let at = -1;
    let tree: Tree = {};
    // Snapshots are made in order, each from the one before (commits are only ever appended).
    for (let s = SNAPSHOT_EVERY - 1; s <= index; s += SNAPSHOT_EVERY) {
      let snapshot = snapshots.get(s);
      if (snapshot === undefined) {
        for (let i = at + 1; i <= s; i++) tree = applyDelta(tree, repo.commits[i].changes);
        snapshot = tree;
        snapshots.set(s, snapshot);
      }
      at = s;
      tree = snapshot;
    }
    for (let i = at + 1; i <= index; i++) tree = applyDelta(tree, repo.commits[i].changes);
    return tree;
  }

  /** The repo's commits, newest first, from `offset` (the commit list endpoint pages this way). */
  listCommits(owner: string, name: string, offset: number, limit: number): { repoId: string; commits: ListedCommit[]; total: number } {
    const repo = this.require(owner, name);
    const total = repo.commits.length;
    const commits: ListedCommit[] = [];
    for (let i = total - 1 - offset; i >= 0 && commits.length < limit; i--) {
      commits.push({ ...repo.commits[i], parent_id: repo.commits[i - 1]?.id ?? null });
    }
    return { repoId: repo.meta.id, commits, total };
  }

  /** The flattened tree: link entries stay, and a linked repo's files appear beneath them. */
  pull(owner: string, name: string, ref?: string): { commit_id: string; commit_hash: string; files: Tree } {
    const { commit, tree } = this.treeAt(owner, name, ref);
    const files: Tree = { ...tree };
    for (const [linkPath, entry] of Object.entries(tree)) {
      if (entry.type === "file") continue;
      let linked: Tree;
      try {
        linked = this.treeAt(entry.owner ?? owner, entry.repo_handle, entry.commit_hash).tree;
      } catch {
        continue; // a dangling link shows as the link entry alone
      }
      for (const [p, e] of Object.entries(linked)) {
        const full = `${linkPath}/${p}`;
        if (e.type === "file" && !(full in files)) files[full] = e;
      }
    }
    return { commit_id: commit.id, commit_hash: commit.commit_hash, files };
  }

  /** Applies a delta; a `parentCommit` that is not the head (full hash or prefix) is a 409. */
  commit(owner: string, name: string, files: unknown, parentCommit: unknown): CommitRecord {
    const repo = this.require(owner, name);
    const delta = validateDelta(files);
    const head = repo.commits[repo.commits.length - 1];
    if (parentCommit !== undefined && parentCommit !== null) {
      const ref = String(parentCommit).toLowerCase();
      const matchesHead = head !== undefined && ref.length >= 8 && head.commit_hash.startsWith(ref);
      if (!matchesHead) {
        throw new HubError(409, `parent_commit ${ref} is not the head of ${owner}/${name} (head: ${head?.commit_hash ?? "none"})`);
      }
    }
    const created_at = new Date().toISOString();
    const id = randomUUID();
    const commit_hash = createHash("sha256")
      .update(JSON.stringify([head?.commit_hash ?? null, id, created_at, delta]))
      .digest("hex");
    const commit: CommitRecord = { id, commit_hash, parent_hash: head?.commit_hash ?? null, created_at, changes: delta };
    repo.commits.push(commit);
    repo.head = applyDelta(repo.head, delta);
    repo.meta.commit_hashes.push(commit_hash);
    repo.meta.updated_at = created_at;
    if (this.dataDir) {
      writeJsonAtomic(path.join(this.repoDir(owner, name), "commits", `${commit_hash}.json`), commit);
      this.persistMeta(repo);
    }
    return commit;
  }

  /** Number of commits in a repo (0 when missing): for tests and benchmarks. */
  commitCount(owner: string, name: string): number {
    return this.repos.get(HubStore.key(owner, name))?.commits.length ?? 0;
  }
}
