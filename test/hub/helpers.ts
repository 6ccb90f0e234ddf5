import { Client } from "langsmith";
import { startHubEmulator, type HubEmulator, type HubEmulatorOptions } from "../../src/hub-emulator/index.js";

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
