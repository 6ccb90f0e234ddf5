import { Client } from "langsmith";
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
