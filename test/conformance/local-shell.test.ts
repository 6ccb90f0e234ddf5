import { describeBackendConformance } from "./suite.js";
import { localShell } from "../support/factories.js";

// Like deepagents' LocalShellBackend, glob also lists matching directories (with is_dir).
describeBackendConformance("LocalShellBackend (virtual)", localShell, { readPastEof: "error", emptyFile: "warning", disk: "virtual", globDirectories: true });
