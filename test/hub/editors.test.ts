/**
 * Editors and tools on a Hub route, through a real mount: their scratch files (vim's swap
 * and backup, sed -i's temp file, emacs-style locks, rsync's temp file) work and never reach
 * the Hub, nothing is refused in the log, and a save that changes nothing makes no commit.
 */
import path from "node:path";
import { describe, expect, it } from "vitest";
import { isScratchName } from "../../src/protocol/index.js";
import { hubFiles, hubTestFixtures, mountHub, seed } from "./helpers.js";
import { ok, sh } from "../fuse/helpers/mount.js";

const { pool, cleanups } = hubTestFixtures();

/** fsync of a file in the mount: the Hub commit of what is pending (the durability barrier). */
const fsyncScript = (file: string) => `python3 -c "import os; f=open('${file}','a'); os.fsync(f.fileno()); f.close()"`;

describe("scratch names", () => {
  it.each([
    ".a.md.swp", ".a.md.swo", ".a.md.swx", "a.md~", ".a.md.un~", "4913", "5036", ".#a.md", "#a.md#", "sedUo7Twm", "sed9xk2ab",
    ".a.md.Xa81kq", ".~lock.a.odt#",
  ])("%s is scratch", (name) => expect(isScratchName(name)).toBe(true));
  it.each(["a.md", "notes.swp.md", "4914", "2024", "sedations", ".eslintrc.config", ".env.sample", "README", ".gitignore", "~a.md"])(
    "%s is not",
    (name) => expect(isScratchName(name)).toBe(false),
  );
});

describe("editors on a Hub route", () => {
  it("vim edits and saves with its swap, backup and probe files: one commit with the change, no scratch file in the Hub", async () => {
    const emu = await pool.start();
    await seed(emu, { "docs/a.md": "alpha\nbeta\n" });
    const { m, logs } = await mountHub(emu, cleanups, 1000);
    const before = emu.store.commitCount("emulator", "repo");
    const dir = path.join(m.dir, "hub/docs");
    // vim as a user runs it (swap file, writebackup, fsync on write), driven by a script.
    const vim = await sh(`vim -N -u NONE -i NONE -es -c 'set swapfile directory=. writebackup backupcopy=auto fsync' -c '%s/beta/gamma/' -c 'wq' a.md; echo "exit $?"`, dir, 30_000);
    expect(vim.stdout.trim()).toBe("exit 0");
    expect(vim.stderr).not.toMatch(/E72|E514|E667|Close error/);
    expect(await ok("cat a.md; ls -A", dir)).toBe("alpha\ngamma\na.md\n");
    await ok(fsyncScript("a.md"), dir);
    expect(hubFiles(emu)).toEqual({ "docs/a.md": "alpha\ngamma\n" });
    expect(emu.store.commitCount("emulator", "repo") - before).toBe(1);
    expect(logs.filter((l) => /refused|not valid UTF-8|failed/i.test(l))).toEqual([]);
  }, 60_000);

  it("a :wq that changed nothing, and sed -i that matched nothing, make no commit", async () => {
    const emu = await pool.start();
    await seed(emu, { "docs/a.md": "alpha\n" });
    const { m } = await mountHub(emu, cleanups, 1000);
    const before = emu.store.commitCount("emulator", "repo");
    const dir = path.join(m.dir, "hub/docs");
    await ok(`vim -N -u NONE -i NONE -es -c 'set swapfile directory=.' -c 'wq' a.md`, dir);
    await ok(`sed -i 's/nothing/here/' a.md`, dir);
    await ok(fsyncScript("a.md"), dir);
    expect(emu.store.commitCount("emulator", "repo") - before).toBe(0);
    expect(hubFiles(emu)).toEqual({ "docs/a.md": "alpha\n" });
  }, 60_000);

  it("sed -i, rsync and binary scratch files: the change is committed, the temp files never are", async () => {
    const emu = await pool.start();
    await seed(emu, { "docs/a.md": "one\n", "docs/b.md": "bee\n" });
    const { m, logs } = await mountHub(emu, cleanups, 1000);
    const dir = path.join(m.dir, "hub/docs");
    await ok("sed -i 's/one/two/' a.md", dir);
    await ok(`printf 'sea\\n' > ${m.dir}/c.src && rsync -I ${m.dir}/c.src b.md`, dir);
    // Binary content under scratch names (vim's swap is binary): kept, readable, never sent.
    await ok("head -c 4096 /dev/urandom > .a.md.swp && cp .a.md.swp '#a.md#' && touch .#a.md 4913 && ls -A | sort", dir).then((out) =>
      expect(out).toBe("#a.md#\n.#a.md\n.a.md.swp\n4913\na.md\nb.md\n"),
    );
    expect(await ok("cmp .a.md.swp '#a.md#' && echo same", dir)).toBe("same\n");
    await ok(fsyncScript("a.md"), dir);
    expect(hubFiles(emu)).toEqual({ "docs/a.md": "two\n", "docs/b.md": "sea\n" });
    await ok("rm .a.md.swp '#a.md#' .#a.md 4913", dir);
    expect(await ok("ls -A", dir)).toBe("a.md\nb.md\n");
    expect(logs.filter((l) => /refused|not valid UTF-8/i.test(l))).toEqual([]);
  }, 60_000);

  it("a stored file renamed to a scratch name leaves the Hub; renamed back, it returns with its content", async () => {
    const emu = await pool.start();
    await seed(emu, { "docs/a.md": "keep me\n" });
    const { m } = await mountHub(emu, cleanups, 1000);
    const dir = path.join(m.dir, "hub/docs");
    await ok("mv a.md a.md~ && ls -A && cat a.md~", dir).then((out) => expect(out).toBe("a.md~\nkeep me\n"));
    await ok(`mv a.md~ a.md && ${fsyncScript("a.md")} && cat a.md`, dir).then((out) => expect(out).toBe("keep me\n"));
    expect(hubFiles(emu)).toEqual({ "docs/a.md": "keep me\n" });
  }, 60_000);
});
