/** What a sandbox is given: bad options are one clear line; the bwrap command line lends only what it says. */
import { describe, expect, it } from "vitest";
import { bwrapArgs } from "../../src/sandbox/bwrap.js";
import { parseBind, resolveSandboxOptions, SandboxOptionError } from "../../src/sandbox/options.js";
import { launcherArgv } from "../../src/sandbox/launcher.js";

const layout = (over: Partial<Parameters<typeof bwrapArgs>[0]> = {}) =>
  bwrapArgs({
    root: "/run/backendfs/sandboxes/1-ab",
    readOnly: false,
    network: false,
    binds: [],
    tmpSizeBytes: 1024,
    cwd: "/",
    env: { PATH: "/usr/bin" },
    newSession: true,
    etcFds: { passwd: 3, group: 4, hosts: 5 },
    statusFd: 6,
    seccompFd: 8,
    ...over,
  });

describe("sandbox options", () => {
  it("refuse bad input with one line", () => {
    const message = (f: () => unknown) => {
      try {
        f();
        return "accepted";
      } catch (error) {
        expect(error).toBeInstanceOf(SandboxOptionError);
        return (error as Error).message;
      }
    };
    expect(message(() => parseBind("/tmp"))).toBe("--bind /tmp: expected HOST:VIRT or HOST:VIRT:ro");
    expect(message(() => parseBind("/tmp:/x:rw"))).toBe("--bind /tmp:/x:rw: expected HOST:VIRT or HOST:VIRT:ro");
    expect(message(() => parseBind("/tmp:/"))).toBe("--bind target /: the agent's files are the root; bind below it");
    expect(message(() => parseBind("/tmp:x"))).toBe("--bind target x: must be an absolute path (the agent's own paths start at /)");
    expect(message(() => parseBind("/tmp:/a/../../etc"))).toBe("--bind target /a/../../etc: must not contain ..");
    expect(message(() => resolveSandboxOptions({ memory: "lots" }))).toBe("--memory lots: not a size (try 512MiB)");
    expect(message(() => resolveSandboxOptions({ pids: -1 }))).toBe("--pids -1: must be a positive integer, or 0 for no cap");
    expect(message(() => resolveSandboxOptions({ pids: 1.5 }))).toBe("--pids 1.5: must be a positive integer, or 0 for no cap");
    expect(resolveSandboxOptions({ pids: 0 }).limits).toEqual({ pids: undefined, memoryBytes: undefined });
    expect(message(() => resolveSandboxOptions({ env: { "A=B": "x" } }))).toBe("--env A=B: a name must be non-empty without = or NUL, a value without NUL");
    expect(parseBind("/tmp:/data/:ro")).toEqual({ host: "/tmp", virtual: "/data", readOnly: true });
    expect(resolveSandboxOptions({ memory: "64MiB" }).limits).toEqual({ memoryBytes: 64 * 1024 * 1024, pids: 4096 });
  });

  it("the minimal environment, or the caller's with --inherit-env", () => {
    expect(resolveSandboxOptions({}).layout.env).toEqual({ PATH: "/usr/local/bin:/usr/bin:/bin", HOME: "/", TMPDIR: "/tmp", LANG: "C.UTF-8" });
    process.env.BACKENDFS_OPTIONS_CANARY = "1";
    expect(resolveSandboxOptions({ inheritEnv: true }).layout.env.BACKENDFS_OPTIONS_CANARY).toBe("1");
    delete process.env.BACKENDFS_OPTIONS_CANARY;
  });
});

describe("the bwrap command line", () => {
  it("binds the mount at /, lends system directories read-only and nothing of the host's home, run or other mounts", () => {
    const args = layout();
    expect(args.slice(0, 4)).toEqual(["--unshare-all", "--die-with-parent", "--json-status-fd", "6"]);
    expect(args).not.toContain("--share-net");
    const binds: Array<[string, string, string]> = [];
    for (let i = 0; i < args.length; i++) if (args[i]!.endsWith("bind")) binds.push([args[i]!, args[i + 1]!, args[i + 2]!]);
    expect(binds[0]).toEqual(["--bind", "/run/backendfs/sandboxes/1-ab", "/"]);
    for (const [kind, host, target] of binds.slice(1)) {
      expect(kind).toBe("--ro-bind");
      // Host directories lent, or /dev/null over what /proc shows of the host's kernel (keys, timers).
      if (host === "/dev/null") expect(target).toMatch(/^\/proc\/(keys|key-users|timer_list|sched_debug|kcore|latency_stats|timer_stats)$/);
      else expect(host).toMatch(/^\/(usr|etc)(\/|$)/);
      expect(host).not.toMatch(/shadow|ssl\/private|sudoers/);
    }
    expect(args).not.toContain("/etc/resolv.conf");
    expect(args.join(" ")).toContain("--size 1024 --tmpfs /tmp");
    expect(args[args.length - 1]).toBe("--");
  });

  it("--read-only, --network and binds", () => {
    const args = layout({ readOnly: true, network: true, binds: [{ host: "/srv/data", virtual: "/data", readOnly: true }] });
    expect(args.slice(args.indexOf("/run/backendfs/sandboxes/1-ab") - 1, args.indexOf("/run/backendfs/sandboxes/1-ab") + 2)).toEqual(["--ro-bind", "/run/backendfs/sandboxes/1-ab", "/"]);
    expect(args).toContain("--share-net");
    expect(args.join(" ")).toContain("--ro-bind /srv/data /data");
  });

  it("the launcher closes every inherited descriptor above bwrap's and enters the cgroups first", () => {
    const argv = launcherArgv(["bwrap", "--", "true"], { procsFiles: ["/cg/a/cgroup.procs"], rlimitFlags: [], kind: "cgroup1", oomKilled: () => false, pids: () => [], remove: () => undefined }, 7);
    expect(argv.slice(0, 2)).toEqual(["/bin/bash", "-c"]);
    expect(argv[2]).toMatch(/echo \$\$ > "\$\{1\}" && shift 1 && exec "\$@"$/);
    expect(argv.slice(3)).toEqual(["backendfs-sandbox", "/cg/a/cgroup.procs", "bwrap", "--", "true"]);
  });
});
