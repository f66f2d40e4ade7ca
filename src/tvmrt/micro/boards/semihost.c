/* Semihosting calls: r0 the operation, r1 its argument block, `bkpt 0xab` on M-profile. */
#include "semihost.h"

#include <string.h>

enum {
  kShOpen = 0x01,
  kShClose = 0x02,
  kShWrite0 = 0x04,
  kShWrite = 0x05,
  kShRead = 0x06,
  kShExit = 0x18,
  kShExitExtended = 0x20,
};

static int tvmrt_sh_call(int op, void* arg) {
  register int r0 __asm__("r0") = op;
  register void* r1 __asm__("r1") = arg;
  __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
  return r0;
}

void tvmrt_sh_write0(const char* text) { tvmrt_sh_call(kShWrite0, (void*)text); }

void tvmrt_sh_write_u32(const char* label, uint32_t value) {
  char digits[11];
  int at = (int)sizeof(digits) - 1;
  digits[at] = 0;
  do {
    digits[--at] = (char)('0' + value % 10u);
    value /= 10u;
  } while (value != 0 && at > 0);
  tvmrt_sh_write0(label);
  tvmrt_sh_write0(digits + at);
  tvmrt_sh_write0("\n");
}

int tvmrt_sh_open_write(const char* path) {
  uint32_t block[3] = {(uint32_t)(uintptr_t)path, 5u /* "wb" */, (uint32_t)strlen(path)};
  return tvmrt_sh_call(kShOpen, block);
}

int tvmrt_sh_open_read(const char* path) {
  uint32_t block[3] = {(uint32_t)(uintptr_t)path, 1u /* "rb" */, (uint32_t)strlen(path)};
  return tvmrt_sh_call(kShOpen, block);
}

int tvmrt_sh_read(int handle, void* data, size_t size) {
  uint32_t block[3] = {(uint32_t)handle, (uint32_t)(uintptr_t)data, (uint32_t)size};
  return tvmrt_sh_call(kShRead, block);
}

int tvmrt_sh_write(int handle, const void* data, size_t size) {
  uint32_t block[3] = {(uint32_t)handle, (uint32_t)(uintptr_t)data, (uint32_t)size};
  return tvmrt_sh_call(kShWrite, block); /* the bytes not written */
}

void tvmrt_sh_close(int handle) {
  uint32_t block[1] = {(uint32_t)handle};
  tvmrt_sh_call(kShClose, block);
}

void tvmrt_sh_exit(int code) {
  /* SYS_EXIT_EXTENDED: ADP_Stopped_ApplicationExit with the code (32-bit SYS_EXIT carries
   * no code); plain SYS_EXIT where a host lacks the extension */
  uint32_t block[2] = {0x20026u, (uint32_t)code};
  tvmrt_sh_call(kShExitExtended, block);
  tvmrt_sh_call(kShExit, (void*)(uintptr_t)(code == 0 ? 0x20026u : 0x20023u));
  for (;;) {
  }
}
