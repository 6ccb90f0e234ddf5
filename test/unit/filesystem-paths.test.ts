/**
 * PathResolver.resolve walks down from the root's (cached) realpath, one lstat per component;
 * these cases check that it answers exactly as the realpath-based walk it replaced (realpath of the root, then of
 * the path, then of each missing ancestor in turn), on a tree with every kind of symlink.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import fs from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { BackendPathError, isMissing } from "../../src/backends/fs-errors.js";
import { PathResolver, isHostPathWithin, type ResolvedPath } from "../../src/backends/filesystem-paths.js";

/** The sequential resolution PathResolver used before (the reference). */
async function resolveStepByStep(resolver: PathResolver, raw: string, followLeaf: boolean): Promise<ResolvedPath> {
  const located = resolver.locate(raw);
  const realRoot = await fs.realpath(resolver.root).catch(() => undefined);
  if (realRoot === undefined) return located;
  const lexical = located.hostPath;
  const anchor = followLeaf || lexical === resolver.root ? lexical : path.dirname(lexical);
  let real = realRoot;
  let missing = false;
  if (anchor !== resolver.root) {
    const rest: string[] = [];
    for (let current = anchor; ; ) {
      try {
        real = path.join(await fs.realpath(current), ...rest.reverse());
        missing = rest.length > 0;
        break;
      } catch (error) {
        const up = path.dirname(current);
        if (!isMissing(error) || up === current) throw error;
        if (rest.length > 0 && (await fs.lstat(current).then(() => true, () => false))) throw error;
        rest.push(path.basename(current));
        current = up;
      }
    }
  }
  const hostPath = anchor === lexical ? real : path.join(real, path.basename(lexical));
  if (resolver.virtualMode && !isHostPathWithin(real, realRoot)) throw new BackendPathError(`Path '${raw}' resolves outside root directory`);
  return missing && anchor === lexical ? { hostPath, shownPath: located.shownPath, missing } : { hostPath, shownPath: located.shownPath };
}

const outcome = (promise: Promise<ResolvedPath>) =>
  promise.then(
    ({ hostPath, shownPath, missing }) => ({ hostPath, shownPath, missing }),
    (error: unknown) => ({ error: error instanceof Error ? `${error.constructor.name}: ${(error as NodeJS.ErrnoException).code ?? error.message}` : String(error) }),
  );

let work: string;
let root: string;

beforeAll(async () => {
  work = await fs.mkdtemp(path.join(tmpdir(), "backendfs-paths-"));
  root = path.join(work, "root");
  await fs.mkdir(path.join(root, "dir/sub"), { recursive: true });
  await fs.mkdir(path.join(work, "outside"));
  await fs.writeFile(path.join(root, "file.txt"), "x");
  await fs.writeFile(path.join(root, "dir/inner.txt"), "y");
  await fs.writeFile(path.join(work, "outside/secret.txt"), "s");
  await fs.symlink(path.join(root, "dir"), path.join(root, "link-dir"));
  await fs.symlink(path.join(root, "file.txt"), path.join(root, "link-file"));
  await fs.symlink(path.join(work, "outside"), path.join(root, "out-dir"));
  await fs.symlink(path.join(work, "outside/secret.txt"), path.join(root, "out-file"));
  await fs.symlink(path.join(root, "nowhere"), path.join(root, "dangling"));
  await fs.symlink(path.join(work, "nowhere"), path.join(root, "dangling-out"));
  // The root itself through a symlink.
  await fs.symlink(root, path.join(work, "root-link"));
});

afterAll(async () => {
  await fs.rm(work, { recursive: true, force: true });
});

const PATHS = [
  "/", "/file.txt", "/dir", "/dir/", "/dir/inner.txt", "/dir/sub", "/dir/missing.txt", "/missing/deeper/new.txt",
  "/link-dir", "/link-dir/inner.txt", "/link-dir/new.txt", "/link-file", "/out-dir", "/out-dir/secret.txt",
  "/out-dir/new.txt", "/out-file", "/dangling", "/dangling/below.txt", "/dangling-out", "/dangling-out/x",
  "/file.txt/below", "/file.txt/below/deeper", "/missing.txt", "report..final.md",
];

describe("PathResolver.resolve: the same answers as the step-by-step walk", () => {
  for (const virtualMode of [true, false]) {
    for (const viaLink of [false, true]) {
      it(`virtualMode ${virtualMode}, root ${viaLink ? "through a symlink" : "real"}`, async () => {
        const resolver = new PathResolver(viaLink ? path.join(work, "root-link") : root, virtualMode);
        for (const raw of PATHS) {
          const input = virtualMode ? raw : path.join(resolver.root, raw);
          for (const followLeaf of [true, false]) {
            const fast = await outcome(resolver.resolve(input, { followLeaf }));
            const reference = await outcome(resolveStepByStep(resolver, input, followLeaf));
            expect({ raw, followLeaf, ...fast }).toEqual({ raw, followLeaf, ...reference });
          }
        }
      });
    }
  }

  it("hands back the leaf's stat only when it is the entry itself (not a symlink)", async () => {
    const resolver = new PathResolver(root, true);
    for (const raw of ["/file.txt", "/dir", "/dir/inner.txt", "/link-file", "/link-dir/inner.txt"]) {
      const resolved = await resolver.resolve(raw, { followLeaf: true });
      const real = await fs.stat(resolved.hostPath);
      if (raw === "/link-file") expect(resolved.stat).toBeUndefined();
      else expect(resolved.stat && { ino: resolved.stat.ino, mode: resolved.stat.mode, size: resolved.stat.size }).toEqual({ ino: real.ino, mode: real.mode, size: real.size });
    }
    expect((await resolver.resolve("/file.txt", { followLeaf: false })).stat).toBeUndefined();
  });

  it("a root that does not exist yet resolves lexically", async () => {
    const resolver = new PathResolver(path.join(work, "not-yet"), true);
    for (const raw of ["/", "/a.txt", "/a/b.txt"]) {
      expect(await outcome(resolver.resolve(raw, { followLeaf: true }))).toEqual(await outcome(resolveStepByStep(resolver, raw, true)));
    }
  });

  it("a root symlink re-pointed while in use: paths follow the new target, escapes stay refused", async () => {
    const a = await fs.mkdtemp(path.join(work, "target-a-"));
    const b = await fs.mkdtemp(path.join(work, "target-b-"));
    const link = path.join(work, "repointed-root");
    await fs.symlink(a, link);
    await fs.writeFile(path.join(b, "outside.txt"), "x");
    const resolver = new PathResolver(link, true);
    expect((await resolver.resolve("/x.txt", { followLeaf: true })).hostPath).toBe(path.join(await fs.realpath(a), "x.txt"));
    await fs.rm(link);
    await fs.symlink(b, link);
    expect((await resolver.resolve("/x.txt", { followLeaf: true })).hostPath).toBe(path.join(await fs.realpath(b), "x.txt"));
    await fs.symlink(a, path.join(b, "escape"));
    await expect(resolver.resolve("/escape/x.txt", { followLeaf: true })).rejects.toThrow("Path '/escape/x.txt' resolves outside root directory");
  });

  it("a directory a walk found in the old root is not trusted in the new one", async () => {
    const a = await fs.mkdtemp(path.join(work, "trusted-a-"));
    const b = await fs.mkdtemp(path.join(work, "trusted-b-"));
    const link = path.join(work, "trusted-root");
    await fs.mkdir(path.join(a, "d"));
    await fs.symlink(path.join(work, "outside"), path.join(b, "d"));
    await fs.symlink(a, link);
    const resolver = new PathResolver(link, true);
    expect((await resolver.resolve("/d/x.txt", { followLeaf: true })).hostPath).toBe(path.join(await fs.realpath(a), "d/x.txt"));
    await fs.rm(link);
    await fs.symlink(b, link);
    await expect(resolver.resolve("/d/x.txt", { followLeaf: true })).rejects.toThrow("Path '/d/x.txt' resolves outside root directory");
  });
});
