/**
 * The sandbox's seccomp filter (classic BPF, as bwrap --seccomp takes it). Capabilities are
 * dropped and no user namespace can be made, but kernel keyrings are checked by user id
 * alone, and root inside the sandbox is uid 0 outside: without this, a command run by root
 * could add keys to, and unlink keys from, the host root's keyrings. So add_key,
 * request_key and keyctl fail with EPERM, as in Docker's default profile. On x86-64 the x32
 * ABI is refused whole (its numbers would bypass the list); 32-bit x86 has its own numbers.
 * Other architectures get no filter (and say nothing): the list below is per architecture.
 */

const AUDIT_ARCH_X86_64 = 0xc000003e;
const AUDIT_ARCH_I386 = 0x40000003;
const AUDIT_ARCH_AARCH64 = 0xc00000b7;
const X32_SYSCALL_BIT = 0x40000000;

const BPF_LD_W_ABS = 0x20;
const BPF_JEQ_K = 0x15;
const BPF_JGE_K = 0x35;
const BPF_RET_K = 0x06;
const SECCOMP_RET_ALLOW = 0x7fff0000;
const SECCOMP_RET_ERRNO = 0x00050000;
const EPERM = 1;
/** struct seccomp_data: the syscall number, then the architecture. */
const OFFSET_NR = 0;
const OFFSET_ARCH = 4;

interface ArchRules {
  arch: number;
  /** add_key, request_key, keyctl */
  denied: number[];
  refuseX32?: boolean;
}

const RULES: ArchRules[] = [
  { arch: AUDIT_ARCH_X86_64, denied: [248, 249, 250], refuseX32: true },
  { arch: AUDIT_ARCH_I386, denied: [286, 287, 288] },
  { arch: AUDIT_ARCH_AARCH64, denied: [217, 218, 219] },
];

interface Instruction {
  code: number;
  jt: number | "deny";
  jf: number;
  k: number;
}

/** The filter as bytes: struct sock_filter { u16 code; u8 jt; u8 jf; u32 k; } each, host order. */
export function seccompProgram(): Buffer {
  const program: Instruction[] = [{ code: BPF_LD_W_ABS, jt: 0, jf: 0, k: OFFSET_ARCH }];
  for (const rules of RULES) {
    const check: Instruction = { code: BPF_JEQ_K, jt: 0, jf: 0, k: rules.arch };
    program.push(check);
    const start = program.length;
    program.push({ code: BPF_LD_W_ABS, jt: 0, jf: 0, k: OFFSET_NR });
    if (rules.refuseX32) program.push({ code: BPF_JGE_K, jt: "deny", jf: 0, k: X32_SYSCALL_BIT });
    for (const nr of rules.denied) program.push({ code: BPF_JEQ_K, jt: "deny", jf: 0, k: nr });
    program.push({ code: BPF_RET_K, jt: 0, jf: 0, k: SECCOMP_RET_ALLOW });
    check.jf = program.length - start; // another architecture: on to the next check
  }
  program.push({ code: BPF_RET_K, jt: 0, jf: 0, k: SECCOMP_RET_ALLOW });
  const deny = program.length;
  program.push({ code: BPF_RET_K, jt: 0, jf: 0, k: SECCOMP_RET_ERRNO | EPERM });
  const bytes = Buffer.alloc(program.length * 8);
  program.forEach((instruction, i) => {
    const jt = instruction.jt === "deny" ? deny - (i + 1) : instruction.jt;
    bytes.writeUInt16LE(instruction.code, i * 8);
    bytes.writeUInt8(jt, i * 8 + 2);
    bytes.writeUInt8(instruction.jf, i * 8 + 3);
    bytes.writeUInt32LE(instruction.k >>> 0, i * 8 + 4);
  });
  return bytes;
}
