/* Arm semihosting (the debugger's console and files, which QEMU gives with
 * -semihosting-config enable=on,target=native): what the board harness needs of it. */
#ifndef TVMRT_MICRO_SEMIHOST_H_
#define TVMRT_MICRO_SEMIHOST_H_

#include <stddef.h>
#include <stdint.h>

void tvmrt_sh_write0(const char* text);
void tvmrt_sh_write_u32(const char* label, uint32_t value);
/* a host file opened for writing in binary; -1 on failure */
int tvmrt_sh_open_write(const char* path);
int tvmrt_sh_open_read(const char* path);
/* the bytes not read (0: all of them) */
int tvmrt_sh_read(int handle, void* data, size_t size);
int tvmrt_sh_write(int handle, const void* data, size_t size);
void tvmrt_sh_close(int handle);
void __attribute__((noreturn)) tvmrt_sh_exit(int code);

#endif /* TVMRT_MICRO_SEMIHOST_H_ */
