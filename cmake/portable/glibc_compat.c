// What Debian 12's headers and static libraries refer to and glibc 2.31 lacks, for the portable
// agent (cmake/portable-agent.cmake): linked into gpufleet-agent and the fake NVML library
// built beside it, nowhere else.

// glibc 2.32: libstdc++ reads it to skip atomic reference counting while a process has one
// thread. 0 says "other threads may exist", which is always correct (only slower, and not
// measurably: the agent runs several threads anyway). On a newer glibc this definition is the
// executable's own, not glibc's.
char __libc_single_threaded = 0;

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/random.h>
#include <unistd.h>

// glibc 2.36: libstdc++'s std::random_device draws from it. The kernel's generator (getrandom,
// glibc 2.25), or /dev/urandom where the kernel lacks the call; neither: abort, as glibc does.
uint32_t arc4random(void) {
  uint32_t v;
  ssize_t n;
  do {
    n = getrandom(&v, sizeof v, 0);
  } while (n < 0 && errno == EINTR);
  if (n == (ssize_t)sizeof v) return v;
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0 || read(fd, &v, sizeof v) != (ssize_t)sizeof v) abort();
  close(fd);
  return v;
}
