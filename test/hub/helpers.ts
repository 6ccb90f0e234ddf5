import { access } from "node:fs/promises";
import { Client } from "langsmith";
import { afterEach } from "vitest";
import { CompositeBackend } from "../../src/backends/composite.js";
import { mountForTest, type TestMount } from "../fuse/helpers/mount.js";
import { createStandaloneState } from "../fuse/helpers/state-backend.js";
import { startHubEmulator, type HubEmulator, type HubEmulatorOptions } from "../../src/hub-emulator/index.js";
import { ContextHubBackend } from "../../src/backends/context-hub.js";

/** A real langsmith client on the emulator; `retries: false` disables its own retries (api doc §9). */
export function hubClient(emu: HubEmulator, options: { apiKey?: string; retries?: boolean; webUrl?: string } = {}): Client {
  const client = new Client({ apiUrl: emu.url, apiKey: options.apiKey ?? "test-key", webUrl: options.webUrl });
  if (options.retries === false) (client as unknown as { caller: { maxRetries: number } }).caller.maxRetries = 0;
  return client;
}

export function emulatorPool(): { start(options?: HubEmulatorOptions): Promise<HubEmulator>; closeAll(): Promise<void> } {
  const running: HubEmulator[] = [];
  return {
    async start(options = {}) {
      const emu = await startHubEmulator(options);
      running.push(emu);
      return emu;
    },
    async closeAll() {
      await Promise.all(running.splice(0).map((e) => e.close()));
    },
  };
}

export const quiet = (): void => {};

export const enc = (s: string): Uint8Array => new TextEncoder().encode(s);

/** Our backend on the emulator's repo "repo", in write-back mode, as a mount uses it. */
export function writeBackBackend(emu: HubEmulator, log: (line: string) => void = quiet): ContextHubBackend {
  return new ContextHubBackend("repo", { client: hubClient(emu, { retries: false }), writeBack: true, log });
}

/** The text files of repo "repo" at head, read from the emulator's store. */
export function hubFiles(emu: HubEmulator): Record<string, string> {
  const files: Record<string, string> = {};
  for (const [p, e] of Object.entries(emu.store.pull("emulator", "repo").files)) if (e.type === "file") files[p] = e.content;
  return files;
}

/** One commit of `files` to repo "repo" through the real client. */
export async function seed(emu: HubEmulator, files: Record<string, string>): Promise<void> {
  const entries = Object.fromEntries(Object.entries(files).map(([p, content]) => [p, { type: "file" as const, content }]));
  await hubClient(emu).pushAgent("repo", { files: entries });
}

/**
 * Emulators and clean-ups for one test file: after each test, what was pushed to `cleanups`
 * runs (newest first) and every emulator started from `pool` stops.
 */
export function hubTestFixtures(): { pool: ReturnType<typeof emulatorPool>; cleanups: Array<() => Promise<unknown>> } {
  const pool = emulatorPool();
  const cleanups: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    for (const clean of cleanups.splice(0).reverse()) await clean().catch(() => undefined);
    await pool.closeAll();
  });
  return { pool, cleanups };
}

export interface HubMount {
  m: TestMount;
  hub: ContextHubBackend;
  logs: string[];
}

/** A real mount of state at / and the write-back Hub backend at /hub/; unmounted by `cleanups`. */
export async function mountHub(emu: HubEmulator, cleanups: Array<() => Promise<unknown>>, attrTimeoutMs: number): Promise<HubMount> {
  const logs: string[] = [];
  const hub = writeBackBackend(emu, (l) => logs.push(l));
  const composite = new CompositeBackend(createStandaloneState(), { "/hub/": hub });
  const m = await mountForTest(composite, { vfs: { attrTimeoutMs, backendTimeoutMs: 10_000 }, log: (l) => logs.push(l) });
  cleanups.push(async () => {
    await m.close();
    await composite.close();
  });
  return { m, hub, logs };
}

/** Waits until `file` exists (a signal file a child process creates). */
export async function waitForFile(file: string, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await access(file).then(() => true, () => false)) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${file}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
