import { describeBackendConformance } from "./suite.js";
import { filesystem } from "../support/factories.js";

const disk = { readPastEof: "error", emptyFile: "warning" } as const;
// fix 7: the same suite with ripgrep and with the JS grep.
describeBackendConformance("FilesystemBackend (virtual, ripgrep)", filesystem(true, true), { ...disk, disk: "virtual" });
describeBackendConformance("FilesystemBackend (virtual, JS grep)", filesystem(true, false), { ...disk, disk: "virtual" });
describeBackendConformance("FilesystemBackend (non-virtual)", filesystem(false), { ...disk, disk: "host", validatesPaths: false });
