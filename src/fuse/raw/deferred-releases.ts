/**
 * RELEASE and RELEASEDIR, which the addon acknowledged as it read them (the kernel never waits
 * for them), handled in the next lull instead of at once: right after the next request
 * JavaScript answers (while its caller wakes up), or on the loop's next turn.
 *
 * A process writing files one by one sends, right after its close(2), the GETATTR of the
 * directory and the LOOKUP of its next name, both of which the addon answers within a
 * microsecond when its spin is free to read them. The release's work (closing the file, its
 * attributes published again) ran just then, and held those answers up past the moment the
 * caller's vCPU went idle: on a VM that halts idle vCPUs, a wake-up each.
 *
 * Only a writable handle's release waits (a reader's keeps its file for the next reader, whose
 * OPEN the addon then answers), and only the requests of such a writer's next steps overtake
 * it: the GETATTR, LOOKUP and CREATE of another node. Anything else runs after the releases
 * waiting, in the order read (the vfs's namespace, its uploads and kept files assume it).
 */
import { decodeInHeader, IN_HEADER_SIZE, O_ACCMODE, O_RDONLY, Op, openFlagsOf } from "./protocol.js";

/** Releases kept at most before they run all the same (each holds its file open until then). */
const MOST = 64;

export class DeferredReleases {
  private readonly waiting: Buffer[] = [];
  private readonly nodes = new Set<number>();
  private scheduled = false;

  /** `run`: handles a request as it would have been at once (the transport's dispatch). */
  constructor(private readonly run: (request: Buffer) => void) {}

  /** Keeps a copy of an acknowledged release (the buffer it was read into goes back to the reader). */
  keep(request: Buffer): void {
    this.waiting.push(Buffer.from(request));
    this.nodes.add(decodeInHeader(request).nodeid);
    if (this.waiting.length >= MOST) return this.flush();
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => this.flush());
  }

  /** Whether `request` (a release the addon acknowledged) may wait: a writable handle's. */
  static mayWait(request: Buffer): boolean {
    const opcode = request.readUInt32LE(4);
    return opcode === Op.RELEASE && (openFlagsOf(opcode, request.subarray(IN_HEADER_SIZE)) & O_ACCMODE) !== O_RDONLY;
  }

  /** Before `request` is handled: the releases waiting run first unless it may overtake them. */
  before(request: Buffer): void {
    if (this.waiting.length === 0) return;
    const { opcode, nodeid } = decodeInHeader(request);
    const overtakes = (opcode === Op.GETATTR || opcode === Op.LOOKUP || opcode === Op.CREATE) && !this.nodes.has(nodeid);
    if (!overtakes) this.flush();
  }

  /** Handles every release kept so far, in the order read. */
  flush(): void {
    this.scheduled = false;
    if (this.waiting.length === 0) return;
    this.nodes.clear();
    for (const request of this.waiting.splice(0)) this.run(request);
  }
}
