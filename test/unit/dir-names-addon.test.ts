/**
 * The addon's directory names (native/src/dir_names.c) driven through its device read, with a
 * FIFO standing in for /dev/fuse: requests are written into it, `read` takes them out, and
 * what the addon answers itself comes back out of the same FIFO (its reply is read as the
 * next "request"). What is pinned here is what a mount cannot show reliably: a publish that a
 * name-making request overtook or still has pending is refused.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { loadNative, type MirrorHandle, type NativeAddon } from "../../src/fuse/raw/native.js";
import { encodeNegativeEntryOut } from "../../src/fuse/raw/protocol.js";
import { fuseRequest as request } from "./helpers/fuse-request.js";

const addon = loadNative().addon;
const LOOKUP = 1;
const CREATE = 35;
const MKDIR = 9;
const RENAME = 12;
const DIR = 7;

const name = (n: string) => Buffer.from(n + "\0", "utf8");
const lookup = (n: string, dir = DIR) => request(LOOKUP, dir, name(n));
const create = (n: string) => request(CREATE, DIR, Buffer.concat([Buffer.alloc(16), name(n)]));

let fifoDir: string;
let fd: number;
let native: NativeAddon;
let handle: MirrorHandle;
let shared: Int32Array;
const buffer = Buffer.alloc(1 << 16);

/** Writes `req` and reads once: what `read` returned (the request itself, or the addon's own reply to it). */
function send(req: Buffer): Buffer {
  fs.writeSync(fd, req);
  const n = native.read(fd, buffer, handle);
  expect(n).toBeGreaterThan(0);
  return Buffer.from(buffer.subarray(0, n));
}

/** The addon answered `req` itself, "no such entry": its reply came back out of the FIFO. */
function answeredMissing(req: Buffer): boolean {
  const got = send(req);
  if (got.equals(req)) return false;
  expect(got.length).toBe(16 + 128);
  expect(got.readBigUInt64LE(8)).toBe(req.readBigUInt64LE(8));
  expect(got.readInt32LE(4)).toBe(0);
  // nodeid 0: a negative entry.
  expect(got.readBigUInt64LE(16)).toBe(0n);
  // Read back as a request, the reply is one the addon does not know: it dropped every
  // directory's names. Settled like one, and the names published again.
  native.mirrorSettled(handle, got.readUInt32LE(4), 0, 0);
  expect(native.namesHolds(handle, DIR)).toBe(false);
  expect(publish(published)).toBe(true);
  return true;
}

const negative = encodeNegativeEntryOut(5);
let published: string[] = [];
function publish(names: string[], epoch = shared[2]!): boolean {
  published = names;
  return native.namesPublish(handle, DIR, Buffer.from(names.map((n) => n + "\0").join(""), "utf8"), names.length, 10_000, negative, epoch);
}

beforeEach(() => {
  native = addon!;
  fifoDir = fs.mkdtempSync(path.join(tmpdir(), "backendfs-fifo-"));
  const fifo = path.join(fifoDir, "dev");
  execFileSync("mkfifo", [fifo]);
  fd = fs.openSync(fifo, fs.constants.O_RDWR | fs.constants.O_NONBLOCK);
  shared = new Int32Array(3);
  handle = native.createMirror(shared, 1024);
});
afterEach(() => {
  fs.closeSync(fd);
  fs.rmSync(fifoDir, { recursive: true, force: true });
});

describe.runIf(addon !== undefined)("the addon's directory names", () => {
  it("answers the lookup of a name the published directory does not hold, and of no other", () => {
    expect(answeredMissing(lookup("a"))).toBe(false);
    expect(publish(["held", "dir"])).toBe(true);
    expect(native.namesHolds(handle, DIR)).toBe(true);
    expect(answeredMissing(lookup("a"))).toBe(true);
    expect(answeredMissing(lookup("held"))).toBe(false);
    expect(answeredMissing(lookup("a", DIR + 1))).toBe(false);
    // Names JS would not decode to the same bytes, "." and "..": left to JS.
    expect(answeredMissing(request(LOOKUP, DIR, Buffer.from([0x66, 0xff, 0x00])))).toBe(false);
    expect(answeredMissing(lookup(".."))).toBe(false);
  });

  it("holds every name made in the directory from the moment its request is read", () => {
    expect(publish([])).toBe(true);
    send(create("new"));
    native.mirrorSettled(handle, CREATE, DIR, 0);
    send(request(MKDIR, DIR, Buffer.concat([Buffer.alloc(8), name("sub")])));
    native.mirrorSettled(handle, MKDIR, DIR, 0);
    // A rename into the directory from another one: the new name is this directory's.
    const into = Buffer.alloc(8);
    into.writeBigUInt64LE(BigInt(DIR), 0);
    send(request(RENAME, 99, Buffer.concat([into, name("old"), name("renamed")])));
    native.mirrorSettled(handle, RENAME, 99, 0);
    expect(answeredMissing(lookup("new"))).toBe(false);
    expect(answeredMissing(lookup("sub"))).toBe(false);
    expect(answeredMissing(lookup("renamed"))).toBe(false);
    expect(answeredMissing(lookup("other"))).toBe(true);
  });

  it("refuses a publish that a name-making request overtook, or that one still unanswered may contradict", () => {
    const before = shared[2]!;
    send(create("racing"));
    // Read after the LOOKUP whose listing is published: the epoch moved.
    expect(publish([], before)).toBe(false);
    // Read before it, still unanswered by JS: pending.
    expect(publish([])).toBe(false);
    native.mirrorSettled(handle, CREATE, DIR, 0);
    expect(publish(["racing"])).toBe(true);
  });

  it("forgets a directory the kernel forgets, one dropped, and all at a clear or a request it does not know", () => {
    expect(publish([])).toBe(true);
    const forget = Buffer.alloc(8);
    forget.writeBigUInt64LE(1n, 0);
    send(request(2 /* FORGET */, DIR, forget));
    expect(native.namesHolds(handle, DIR)).toBe(false);
    expect(publish([])).toBe(true);
    native.namesDrop(handle, DIR);
    expect(native.namesHolds(handle, DIR)).toBe(false);
    expect(publish([])).toBe(true);
    send(request(4242, DIR, Buffer.alloc(0)));
    expect(native.namesHolds(handle, DIR)).toBe(false);
    native.mirrorSettled(handle, 4242, DIR, 0);
    expect(publish([])).toBe(true);
    native.namesClear(handle);
    expect(native.namesHolds(handle, DIR)).toBe(false);
  });
});
