/*
 * Reading a model's files (tvmrt/binfmt/files.py is the Python twin, with the same bounds and
 * words): opened without blocking (a FIFO named compiled.so never hangs the reader), fstat on
 * the opened descriptor must show a regular file, and its size is checked against the bound of
 * its kind before anything is read or allocated.
 *
 * fstat is the kernel's call made through syscall(): glibc's fstat and stat symbols are
 * GLIBC_2.33, which would raise the wheel's glibc floor (2.17, see glibc_floor.h), and their
 * older names (__fxstat) are gone from its headers.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "rt.h"

typedef struct {
  unsigned mode;
  uint64_t size;
} file_facts;

static int fd_facts(int fd, file_facts* out) {
#if defined(__GLIBC__) && defined(__arm__) && defined(SYS_fstat64)
  struct stat64 st; /* 32-bit ARM: the kernel's stat64 is glibc's */
  if (syscall(SYS_fstat64, fd, &st) != 0) return -1;
#elif defined(__GLIBC__) && defined(SYS_fstat) && (defined(__x86_64__) || defined(__aarch64__))
  struct stat st; /* x86-64 and aarch64: the kernel's struct stat is glibc's */
  if (syscall(SYS_fstat, fd, &st) != 0) return -1;
#else
  struct stat st; /* other C libraries (musl) have no symbol versions to avoid */
  if (fstat(fd, &st) != 0) return -1;
#endif
  out->mode = (unsigned)st.st_mode;
  out->size = st.st_size < 0 ? 0 : (uint64_t)st.st_size;
  return 0;
}

static const char* kind_of(unsigned mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "not a file";
}

int tvmrt_open_regular(const char* path, const char* error, const char* what, uint64_t limit,
                       int* fd_out, uint64_t* size) {
  file_facts facts;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return tvmrt_fail(error, "cannot open %s %s: %s", what, path, strerror(errno));
  if (fd_facts(fd, &facts) != 0) {
    int err = errno;
    close(fd);
    return tvmrt_fail(error, "cannot open %s %s: %s", what, path, strerror(err));
  }
  if (!S_ISREG(facts.mode)) {
    close(fd);
    return tvmrt_fail(error, "%s %s is not a regular file (%s); expected a file", what, path,
                      kind_of(facts.mode));
  }
  if (facts.size > limit || facts.size >= SIZE_MAX) {
    close(fd);
    return tvmrt_fail(error,
                      "%s %s is %llu bytes, over the limit of %llu bytes for it; expected a "
                      "smaller file",
                      what, path, (unsigned long long)facts.size, (unsigned long long)limit);
  }
  /* reads of a regular file never block; clear O_NONBLOCK all the same */
  (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  *fd_out = fd;
  *size = facts.size;
  return 0;
}

int tvmrt_check_regular(const char* path, const char* error, const char* what, uint64_t limit) {
  int fd;
  uint64_t size;
  if (tvmrt_open_regular(path, error, what, limit, &fd, &size) != 0) return -1;
  close(fd);
  return 0;
}

/* up to n bytes at buf; the count read, or -1 (errno set) */
static ssize_t read_full(int fd, char* buf, size_t n) {
  size_t done = 0;
  while (done < n) {
    ssize_t got = read(fd, buf + done, n - done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return -1;
    if (got == 0) break; /* the file shrank: take what is there */
    done += (size_t)got;
  }
  return (ssize_t)done;
}

static void hex(const unsigned char* b, size_t n, char* out) {
  size_t i;
  for (i = 0; i < n; ++i) snprintf(out + 2 * i, 3, "%02x", b[i]);
  out[2 * n] = '\0';
}

const tvmrt_file_magic tvmrt_params_file_magic = {RT_PARAMS_LIST_MAGIC, "ParamsFormatError",
                                                  "a TVM params blob"};
const tvmrt_file_magic tvmrt_vm_code_file_magic = {RT_VM_CODE_MAGIC, "ModuleLoadError",
                                                   "a Relay VM executable"};

int tvmrt_read_regular(const char* path, const char* error, const char* what, uint64_t limit,
                       const tvmrt_file_magic* magic, char** data, size_t* size) {
  uint64_t total;
  ssize_t head = 0, got;
  char* buf;
  int fd;
  if (tvmrt_open_regular(path, error, what, limit, &fd, &total) != 0) return -1;
  if ((buf = (char*)malloc((size_t)total + 1)) == NULL) {
    close(fd);
    return tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate %llu bytes to read %s %s",
                      (unsigned long long)total, what, path);
  }
  if (magic != NULL) { /* the first bytes before the rest (a hostile file costs a page) */
    unsigned char bytes[8];
    char want[2 * 8 + 1], seen[2 * 8 + 1];
    size_t n = sizeof(bytes), i;
    for (i = 0; i < n; ++i) bytes[i] = (unsigned char)(magic->value >> (8 * i));
    head = read_full(fd, buf, n < total ? n : (size_t)total);
    if (head < 0) goto fail;
    if ((size_t)head != n || memcmp(buf, bytes, n) != 0) {
      close(fd);
      hex(bytes, n, want);
      hex((const unsigned char*)buf, (size_t)head, seen);
      free(buf);
      return tvmrt_fail(magic->error,
                        "%s %s does not start with the magic %s of %s (it starts with %s); "
                        "expected %s",
                        what, path, want, magic->format, head ? seen : "nothing", magic->format);
    }
  }
  if ((got = read_full(fd, buf + head, (size_t)total - (size_t)head)) < 0) goto fail;
  close(fd);
  buf[head + got] = '\0';
  *data = buf;
  *size = (size_t)(head + got);
  return 0;
fail:
  {
    int err = errno;
    close(fd);
    free(buf);
    return tvmrt_fail(error, "cannot read %s %s: %s", what, path, strerror(err));
  }
}
