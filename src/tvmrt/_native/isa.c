/*
 * tvmrt x86-64 instruction-set scan: which vector extensions a library's code uses, read
 * before the library is loaded (a kernel built for AVX-512 dies with SIGILL on a CPU
 * without it; tvmrt refuses it at load instead, see runtime/loaders/needs.py).
 *
 * A linear sweep over an executable section with an instruction-length decoder: each
 * instruction's prefixes, opcode (one-byte, 0F, 0F38, 0F3A maps, VEX and EVEX), ModRM,
 * SIB, displacement and immediate are stepped over, so an EVEX prefix (0x62) is only
 * counted where an instruction starts. In 64-bit mode 0x62 there can only be EVEX (BOUND
 * is invalid), and the payload bits EVEX fixes (P0 bits 3:2 zero, a nonzero opcode map,
 * P1 bit 2 set) are checked too. Compilers keep data out of .text on x86-64 (jump tables
 * live in .rodata; padding is NOP/INT3), so the sweep stays in step; a byte the decoder
 * does not know is stepped over alone and counted as undecodable, which the caller can
 * report.
 */
#include <stddef.h>
#include <stdint.h>

#include "native.h"

enum { C_INSNS, C_VEX, C_EVEX, C_UNKNOWN, C_FIRST_EVEX, C_COUNT };

/* one-byte opcodes: 1 = has ModRM */
static int modrm1(uint8_t op) {
  if (op < 0x40) return (op & 7) < 4;
  if (op == 0x63 || op == 0x69 || op == 0x6B) return 1;
  if (op >= 0x80 && op <= 0x8F) return 1;
  if (op == 0xC0 || op == 0xC1 || op == 0xC6 || op == 0xC7) return 1;
  if (op >= 0xD0 && op <= 0xD3) return 1;
  if (op >= 0xD8 && op <= 0xDF) return 1;
  if (op == 0xF6 || op == 0xF7 || op == 0xFE || op == 0xFF) return 1;
  return 0;
}

/* immediate bytes of a one-byte opcode (z = 2 or 4 by operand size, v = imm64 with REX.W) */
static int imm1(uint8_t op, int opsize16, int rexw, int addr32, uint8_t modrm_reg) {
  int z = opsize16 ? 2 : 4;
  if (op < 0x40) return (op & 7) == 4 ? 1 : (op & 7) == 5 ? z : 0;
  if (op == 0x68 || op == 0x69 || op == 0x81 || op == 0xA9 || op == 0xC7) return z;
  if (op == 0x6A || op == 0x6B || op == 0x80 || op == 0x83 || op == 0xA8) return 1;
  if (op >= 0x70 && op <= 0x7F) return 1;
  if (op >= 0xA0 && op <= 0xA3) return addr32 ? 4 : 8;
  if (op >= 0xB0 && op <= 0xB7) return 1;
  if (op >= 0xB8 && op <= 0xBF) return rexw ? 8 : z;
  if (op == 0xC0 || op == 0xC1 || op == 0xC6 || op == 0xCD) return 1;
  if (op == 0xC2 || op == 0xCA) return 2;
  if (op == 0xC8) return 3;
  if (op >= 0xE0 && op <= 0xE7) return 1;
  if (op == 0xE8 || op == 0xE9) return 4;
  if (op == 0xEB) return 1;
  if (op == 0xF6) return modrm_reg < 2 ? 1 : 0;
  if (op == 0xF7) return modrm_reg < 2 ? z : 0;
  return 0;
}

/* 0F map: 1 = has ModRM */
static int modrm_0f(uint8_t op) {
  if (op >= 0x05 && op <= 0x09) return 0;
  if (op == 0x0B || op == 0x0E || op == 0x77) return 0;
  if (op >= 0x30 && op <= 0x37) return 0;
  if (op >= 0x80 && op <= 0x8F) return 0;
  if (op == 0xA0 || op == 0xA1 || op == 0xA2 || op == 0xA8 || op == 0xA9 || op == 0xAA) return 0;
  if (op >= 0xC8 && op <= 0xCF) return 0;
  return 1;
}

static int imm_0f(uint8_t op) {
  if (op >= 0x80 && op <= 0x8F) return 4;
  if ((op >= 0x70 && op <= 0x73) || op == 0xA4 || op == 0xAC || op == 0xBA || op == 0x0F) return 1;
  if (op == 0xC2 || op == 0xC4 || op == 0xC5 || op == 0xC6) return 1;
  return 0;
}

/* bytes taken by ModRM (+ SIB + displacement) at p, or -1 if past the end */
static int modrm_len(const uint8_t* p, size_t left) {
  uint8_t m, mod, rm;
  int n = 1;
  if (left < 1) return -1;
  m = p[0];
  mod = m >> 6;
  rm = m & 7;
  if (mod == 3) return 1;
  if (rm == 4) {
    if (left < 2) return -1;
    n = 2;
    if (mod == 0 && (p[1] & 7) == 5) n += 4;
  } else if (mod == 0 && rm == 5) {
    n += 4;
  }
  if (mod == 1) n += 1;
  else if (mod == 2) n += 4;
  return (size_t)n <= left ? n : -1;
}

/* length of a VEX/EVEX-encoded instruction body after its prefix bytes: opcode, ModRM, imm */
static int vex_body(const uint8_t* p, size_t left, int map, int* ok) {
  int n = 1, m;
  uint8_t op;
  if (left < 1) return -1;
  op = p[0];
  *ok = map >= 1 && map <= 7;
  if (map == 1 && op == 0x77) return 1; /* vzeroupper / vzeroall */
  m = modrm_len(p + 1, left - 1);
  if (m < 0) return -1;
  n += m;
  if (map == 3) n += 1;
  else if (map == 1) n += imm_0f(op) == 1 ? 1 : 0;
  return (size_t)n <= left ? n : -1;
}

/* Decode one instruction at p; returns its length (>= 1) and counts what it is. */
static size_t step(const uint8_t* p, size_t left, int64_t* counts, size_t at) {
  size_t i = 0;
  int opsize16 = 0, addr32 = 0, rexw = 0, n, ok = 0;
  uint8_t op;
  while (i < left && i < 14) { /* legacy prefixes */
    op = p[i];
    if (op == 0x66) opsize16 = 1;
    else if (op == 0x67) addr32 = 1;
    else if (!(op == 0xF0 || op == 0xF2 || op == 0xF3 || op == 0x2E || op == 0x36 || op == 0x3E ||
               op == 0x26 || op == 0x64 || op == 0x65))
      break;
    ++i;
  }
  if (i < left && (p[i] & 0xF0) == 0x40) { /* REX */
    rexw = (p[i] >> 3) & 1;
    ++i;
  }
  if (i >= left) return left;
  op = p[i];
  if (op == 0x62 && i + 4 < left) { /* EVEX: P0 P1 P2 opcode */
    uint8_t p0 = p[i + 1], p1 = p[i + 2];
    if ((p0 & 0x0C) == 0 && (p0 & 0x07) != 0 && (p1 & 0x04) != 0) {
      n = vex_body(p + i + 4, left - i - 4, p0 & 0x07, &ok);
      if (n > 0 && ok) {
        if (counts[C_EVEX]++ == 0) counts[C_FIRST_EVEX] = (int64_t)at;
        return i + 4 + (size_t)n;
      }
    }
    counts[C_UNKNOWN]++;
    return 1;
  }
  if ((op == 0xC4 && i + 3 < left) || (op == 0xC5 && i + 2 < left)) { /* VEX */
    int map = op == 0xC5 ? 1 : (p[i + 1] & 0x1F);
    size_t head = op == 0xC5 ? 2 : 3;
    n = vex_body(p + i + head, left - i - head, map, &ok);
    if (n > 0 && ok && map <= 3) {
      counts[C_VEX]++;
      return i + head + (size_t)n;
    }
    counts[C_UNKNOWN]++;
    return 1;
  }
  if (op == 0x0F) { /* two- and three-byte opcodes */
    uint8_t op2;
    if (i + 1 >= left) return left;
    op2 = p[i + 1];
    if (op2 == 0x38 || op2 == 0x3A) {
      if (i + 2 >= left) return left;
      n = modrm_len(p + i + 3, left - i - 3);
      if (n < 0) return left;
      return i + 3 + (size_t)n + (op2 == 0x3A ? 1 : 0);
    }
    n = modrm_0f(op2) ? modrm_len(p + i + 2, left - i - 2) : 0;
    if (n < 0) return left;
    return i + 2 + (size_t)n + (size_t)imm_0f(op2);
  }
  n = 0;
  if (modrm1(op)) {
    n = modrm_len(p + i + 1, left - i - 1);
    if (n < 0) return left;
  }
  {
    uint8_t reg = (uint8_t)(n > 0 ? (p[i + 1] >> 3) & 7 : 0);
    size_t len = i + 1 + (size_t)n + (size_t)imm1(op, opsize16, rexw, addr32, reg);
    return len <= left ? len : left;
  }
}

/*
 * Sweep `size` bytes of x86-64 code. counts[0..4]: instructions, VEX-encoded (AVX/AVX2/FMA),
 * EVEX-encoded (AVX-512), undecodable bytes, offset of the first EVEX instruction (-1: none).
 * Returns 0, or -1 if `counts` holds fewer than 5 entries.
 */
TVM_DLL int tvmrt_x86_64_scan(const uint8_t* code, size_t size, int64_t* counts, int ncounts) {
  size_t at = 0;
  int i;
  if (ncounts < C_COUNT) return -1;
  for (i = 0; i < C_COUNT; ++i) counts[i] = 0;
  counts[C_FIRST_EVEX] = -1;
  while (at < size) {
    size_t len = step(code + at, size - at, counts, at);
    counts[C_INSNS]++;
    at += len ? len : 1;
  }
  return 0;
}
