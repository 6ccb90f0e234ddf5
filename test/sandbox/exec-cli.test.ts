/**
 * `backendfs exec` as a user runs it: the real CLI in its own process over the embedded
 * default (thread state at /, a store at /memories/), a config with a disk route and
 * permissions, and a running `backendfs mount` of the same config.
 */
import { spawn } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { cliPerTest, type CliRun } from "../cli/helpers/build-cli.js";
import { withDevFuseLent } from "../support/dev-fuse.js";

const cli = cliPerTest("backendfs-exec-");

/** The CLI with a time limit, so that a hang fails the test instead of the run. */
function run(args: string[], input?: string): Promise<CliRun> {
  return Promise.race([
    cli.run(args, input),
    new Promise<CliRun>((_, reject) => setTimeout(() => reject(new Error(`backendfs ${args.join(" ")} did not finish in 60 s`)), 60_000)),
  ]);
}

const exec = (command: string[], options: string[] = [], input?: string) => run(["exec", ...options, "--", ...command], input);
const sh = (script: string, options: string[] = [], input?: string) => exec(["/bin/sh", "-c", script], options, input);

function backendfsMounts(): string[] {
  return readFileSync("/proc/self/mountinfo", "utf8").split("\n").filter((line) => line.includes("fuse.backendfs"));
}

const daemons: Array<ReturnType<typeof spawn>> = [];
afterEach(async () => {
  for (const daemon of daemons.splice(0)) {
    daemon.kill("SIGTERM");
    await new Promise((resolve) => (daemon.exitCode !== null ? resolve(null) : daemon.once("exit", resolve)));
  }
});

describe("backendfs exec: the agent's files at the agent's paths", () => {
  it("sees what the agent wrote, and what it writes is the agent's, on the state and store routes", async () => {
    expect((await run(["put", "/notes.md"], "from the agent\n")).code).toBe(0);
    const result = await sh("cat /notes.md && echo made > /made.txt && mkdir -p /memories/m && echo kept > /memories/m/k.md && ls /");
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(result.stdout.toString()).toBe("from the agent\nmade.txt\nmemories\nnotes.md\n");
    expect((await run(["cat", "/made.txt"])).stdout.toString()).toBe("made\n");
    expect((await run(["cat", "/memories/m/k.md"])).stdout.toString()).toBe("kept\n");
    // Nothing the sandbox needs was created in a backend.
    const listed = (await run(["ls", "/", "--json"])).stdout.toString();
    for (const system of ["usr", "bin", "lib", "etc", "tmp", "proc", "dev"]) expect(listed).not.toContain(`"/${system}`);
  });

  it("passes stdin, stdout, stderr and the exit status through; a signal's death is 128+N", async () => {
    const piped = await exec(["/bin/sh", "-c", "tr a-z A-Z; echo oops >&2; exit 7"], [], "hello\n");
    expect(piped).toMatchObject({ code: 7, stderr: "oops\n" });
    expect(piped.stdout.toString()).toBe("HELLO\n");
    expect((await sh("kill -TERM $$")).code).toBe(128 + 15);
    expect((await sh("kill -SEGV $$")).code).toBe(128 + 11);
    const missing = await exec(["/no/such/program"]);
    expect(missing.code).toBe(127);
    expect(missing.stderr).toContain("/no/such/program: not found");
  });

  it("--cwd, --env and the minimal environment; --inherit-env starts from the caller's", async () => {
    const env = await sh("pwd; echo $GREETING; env | cut -d= -f1 | sort | tr '\\n' ' '", ["--env", "GREETING=hi", "--cwd", "/memories"]);
    expect(env.stdout.toString()).toBe("/memories\nhi\nGREETING HOME LANG PATH PWD TMPDIR ");
    const inherited = await run(["exec", "--inherit-env", "--", "/bin/sh", "-c", "echo $BACKENDFS_CANARY"]);
    expect(inherited.stdout.toString()).toBe("\n");
    const withCanary = await new Promise<string>((resolve) => {
      const child = spawn(process.execPath, [cli.main(), "exec", "--inherit-env", "--", "/bin/sh", "-c", "echo $BACKENDFS_CANARY"], {
        cwd: cli.cwd(),
        env: { ...process.env, BACKENDFS_CANARY: "canary-42" },
      });
      let out = "";
      child.stdout.on("data", (d: Buffer) => (out += d.toString()));
      child.on("close", () => resolve(out));
    });
    expect(withCanary).toBe("canary-42\n");
    const bad = await sh("true", ["--cwd", "relative/dir"]);
    expect(bad).toMatchObject({ code: 125, stderr: "backendfs exec: --cwd relative/dir: must be an absolute path (the agent's own paths start at /)\n" });
  });

  it("--read-only makes every route read-only; --bind lends a host directory", async () => {
    const host = path.join(cli.cwd(), "lent");
    mkdirSync(host);
    writeFileSync(path.join(host, "data.txt"), "host data\n");
    const ro = await sh("echo x > /a.txt; echo y > /memories/b.txt; cat /data/data.txt; echo z > /data/new.txt", ["--read-only", "--bind", `${host}:/data:ro`]);
    expect(ro.stdout.toString()).toBe("host data\n");
    expect(ro.stderr).toContain("/a.txt: Read-only file system");
    expect(ro.stderr).toContain("/memories/b.txt: Read-only file system");
    expect(ro.stderr).toContain("/data/new.txt: Read-only file system");
    expect(readdirSync(host)).toEqual(["data.txt"]);
    // The bind's mount point was not created in the agent's state.
    expect((await run(["ls", "/"])).stdout.toString()).toBe("/memories/\n");
    const rw = await sh("echo written > /data/new.txt", ["--bind", `${host}:/data`]);
    expect(rw.code).toBe(0);
    expect(readFileSync(path.join(host, "new.txt"), "utf8")).toBe("written\n");
    expect((await sh("true", ["--bind", "/no/such/dir:/x"])).stderr).toBe("backendfs exec: --bind /no/such/dir: no such file or directory on the host\n");
  });

  it("--timeout ends the whole tree, --max-output-bytes cuts the output", async () => {
    const started = Date.now();
    const timed = await sh("trap '' TERM; (trap '' TERM; sleep 60) & sleep 60", ["--timeout", "1s"]);
    expect(timed.code).toBe(124);
    expect(timed.stderr).toContain("timed out after 1s");
    expect(Date.now() - started).toBeLessThan(20_000);
    const cut = await sh("head -c 100000 /dev/zero | tr '\\0' a", ["--max-output-bytes", "1000"]);
    expect(cut.stdout.length).toBe(1000);
    expect(cut.stderr).toContain("output cut at 1000 bytes");
  });

  it("--network off: no route out and no host loopback; on: the host's network", async () => {
    const off = await sh("cat /etc/resolv.conf; python3 -c 'import socket; print(len(socket.if_nameindex()))'");
    expect(off.stderr).toContain("No such file");
    expect(off.stdout.toString()).toBe("1\n");
    const on = await sh("python3 -c 'import socket; print(len(socket.if_nameindex()) > 1)'", ["--network"]);
    expect(on.stdout.toString()).toBe("True\n");
  });

  it("the agent's own entry at a system name is covered inside, and said so", async () => {
    expect((await run(["put", "/tmp/mine.txt"], "agent tmp\n")).code).toBe(0);
    const result = await sh("ls /tmp; echo scratch > /tmp/scratch");
    expect(result.stdout.toString()).toBe("");
    expect(result.stderr).toContain("the agent's /tmp is covered by the system's inside the sandbox");
    expect((await run(["cat", "/tmp/mine.txt"])).stdout.toString()).toBe("agent tmp\n");
    expect((await run(["ls", "/tmp"])).stdout.toString()).toBe("/tmp/mine.txt\n");
  });

  it("permissions of the config hold inside: a denied route is EACCES", async () => {
    const work = path.join(cli.cwd(), "work");
    mkdirSync(work);
    writeFileSync(
      path.join(cli.cwd(), "agent.yaml"),
      [
        "default: { type: state, checkpointer: sqlite:./.backendfs/agent.db, thread: main }",
        "routes:",
        `  /workspace/: { type: filesystem, rootDir: ${work}, virtualMode: true }`,
        "permissions:",
        '  - { operations: [write], paths: ["/workspace/locked/**"], mode: deny }',
      ].join("\n"),
    );
    mkdirSync(path.join(work, "locked"));
    const result = await sh("echo ok > /workspace/open.txt && echo no > /workspace/locked/x.txt", ["-c", "agent.yaml"]);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain("/workspace/locked/x.txt: Permission denied");
    expect(readFileSync(path.join(work, "open.txt"), "utf8")).toBe("ok\n");
    expect(existsSync(path.join(work, "locked", "x.txt"))).toBe(false);
  });
});

describe("backendfs exec and a running mount of the same config", () => {
  it("runs in the running mount instead of opening the thread a second time", async () => {
    const mountPoint = path.join(cli.cwd(), "mnt");
    mkdirSync(mountPoint);
    const daemon = spawn(process.execPath, [cli.main(), "mount", mountPoint, "-v"], { cwd: cli.cwd(), stdio: ["ignore", "ignore", "pipe"] });
    daemons.push(daemon);
    let log = "";
    daemon.stderr!.on("data", (d: Buffer) => (log += d.toString()));
    for (let i = 0; i < 300 && !log.includes("mounted at"); i++) await new Promise((r) => setTimeout(r, 50));
    expect(log).toContain("mounted at");
    // exec as its own child, to watch for a private mount of its pid (other test files mount and unmount meanwhile).
    const child = spawn(process.execPath, [cli.main(), "exec", "--", "/bin/sh", "-c", "echo via-daemon > /shared.txt; cat /shared.txt; sleep 0.5"], {
      cwd: cli.cwd(),
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    const exited = new Promise((resolve) => child.once("exit", resolve));
    let ownMounts = 0;
    while (child.exitCode === null) {
      ownMounts += backendfsMounts().filter((line) => line.includes(`/sandboxes/${child.pid}-`)).length;
      await Promise.race([exited, new Promise((r) => setTimeout(r, 25))]);
    }
    expect(out).toBe("via-daemon\n");
    expect(child.exitCode).toBe(0);
    // The daemon served the command's requests (-v logs each one that reaches its vfs; a lookup
    // of a missing name may be answered in the addon, a create never is); exec made no mount of its own.
    expect(log).toContain("create(/shared.txt");
    expect(ownMounts).toBe(0);
    expect(readFileSync(path.join(mountPoint, "shared.txt"), "utf8")).toBe("via-daemon\n");
    // The plain mount does not list the sandbox's mount points.
    expect(readdirSync(mountPoint).sort()).toEqual(["memories", "shared.txt"]);
  });

  it("a private mount goes away when exec is killed, and its leftover directory is removed next time", async () => {
    const child = spawn(process.execPath, [cli.main(), "exec", "--", "/bin/sh", "-c", "echo started; sleep 60.4242"], { cwd: cli.cwd(), stdio: ["ignore", "pipe", "pipe"] });
    await new Promise<void>((resolve) => child.stdout.on("data", (d: Buffer) => d.toString().includes("started") && resolve()));
    expect(backendfsMounts().length).toBeGreaterThan(0);
    child.kill("SIGKILL");
    await new Promise((resolve) => child.once("exit", resolve));
    for (let i = 0; i < 100 && backendfsMounts().some((l) => l.includes(`/sandboxes/${child.pid}-`)); i++) await new Promise((r) => setTimeout(r, 50));
    expect(backendfsMounts().filter((l) => l.includes(`/sandboxes/${child.pid}-`))).toEqual([]);
    // The command itself died with it (bwrap --die-with-parent).
    const stillRunning = readdirSync("/proc").filter((p) => /^\d+$/.test(p)).filter((p) => {
      try {
        return readFileSync(`/proc/${p}/cmdline`, "utf8").includes("sleep\u000060.4242");
      } catch {
        return false;
      }
    });
    expect(stillRunning).toEqual([]);
    await sh("true");
    const sandboxes = readdirSync("/run/backendfs/sandboxes");
    expect(sandboxes.filter((name) => name.startsWith(`${child.pid}-`))).toEqual([]);
  });
});

describe("backendfs exec as a user without root", () => {
  it("runs in unprivileged user namespaces, with rlimits where no cgroup can be made, and says so", async () => {
    await withDevFuseLent(async () => {
      const dir = cli.cwd();
      chmodSync(dir, 0o777);
      // The CLI's build folder (mkdtemp: 0700) must be readable by the user.
      chmodSync(path.resolve(cli.main(), "../../.."), 0o755);
      const result = await new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
        const child = spawn(
          "setpriv",
          ["--reuid", "65534", "--regid", "65534", "--clear-groups", process.execPath, cli.main(), "exec", "--memory", "64MiB", "--", "/bin/sh", "-c",
            "id -u; id -un; echo mine > /mine.txt; cat /mine.txt; python3 -c 'bytearray(256*1024*1024)' 2>&1 | tail -1"],
          { cwd: dir, env: { PATH: "/usr/local/bin:/usr/bin:/bin", HOME: dir } },
        );
        let out = "";
        let err = "";
        child.stdout.on("data", (d: Buffer) => (out += d.toString()));
        child.stderr.on("data", (d: Buffer) => (err += d.toString()));
        child.on("close", (code) => resolve({ code, out, err }));
      });
      expect(result.out, result.err).toBe("65534\nnobody\nmine\nMemoryError\n");
      expect(result.err).toContain("no cgroup can be made here");
      expect(result.code).toBe(0);
      expect((await run(["cat", "/mine.txt"])).stdout.toString()).toBe("mine\n");
    });
  });
});
