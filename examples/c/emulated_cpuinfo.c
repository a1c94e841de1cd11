/*
 * Lets ONNX Runtime's Linux/ARM64 library start under QEMU's user-mode emulation (`make
 * test-arm64`, and the top Makefile's `make python-arm64`); preloaded into the emulated process
 * (qemu-aarch64 -E LD_PRELOAD=...).
 *
 * ONNX Runtime identifies the processor with the cpuinfo library, which on Linux/ARM64 reads
 * /proc/cpuinfo. qemu-user 7.2 (Debian 12) passes the host's x86 /proc/cpuinfo through, in which
 * cpuinfo finds no ARM core and crashes (a NULL dereference while the environment is created:
 * seen with ONNX Runtime 1.31.1's library and 1.32.0's Python wheel; 1.17.3 and 1.20.1 start
 * without this library).
 * This library answers an open of /proc/cpuinfo with what an ARM64 Linux kernel would write for
 * the emulated core: one entry per processor, from its MIDR_EL1 register (which QEMU sets from its
 * -cpu model and lets user code read, as Linux does). Every other path opens unchanged. The
 * instruction-set features the kernels are chosen by (dot product, i8mm, fp16) come from the
 * auxiliary vector, which QEMU also derives from the -cpu model, not from this file.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int emulated_cpuinfo(void) {
    unsigned long midr;
    __asm__ volatile("mrs %0, midr_el1" : "=r"(midr));
    int file = memfd_create("cpuinfo", 0);
    if (file < 0) return -1;
    long processors = sysconf(_SC_NPROCESSORS_CONF);
    for (long processor = 0; processor < processors; processor++) {
        char entry[256];
        int length = snprintf(entry, sizeof entry,
                              "processor\t: %ld\nCPU implementer\t: 0x%02lx\nCPU architecture: 8\n"
                              "CPU variant\t: 0x%lx\nCPU part\t: 0x%03lx\nCPU revision\t: %lu\n\n",
                              processor, (midr >> 24) & 0xff, (midr >> 20) & 0xf, (midr >> 4) & 0xfff,
                              midr & 0xf);
        if (write(file, entry, (size_t)length) != length) {
            close(file);
            return -1;
        }
    }
    lseek(file, 0, SEEK_SET);
    return file;
}

static int is_cpuinfo(const char *path) { return path != NULL && strcmp(path, "/proc/cpuinfo") == 0; }

typedef int (*open_function)(const char *, int, ...);
typedef FILE *(*fopen_function)(const char *, const char *);

/* open() and open64() (ONNX Runtime's library imports both): the emulated file for /proc/cpuinfo,
 * the next library's function (the C library's) for every other path */
#define FORWARD_OPEN(name)                                                              \
    int name(const char *path, int flags, ...) {                                        \
        va_list arguments;                                                              \
        va_start(arguments, flags);                                                     \
        int mode = (flags & (O_CREAT | O_TMPFILE)) != 0 ? va_arg(arguments, int) : 0;   \
        va_end(arguments);                                                              \
        if (is_cpuinfo(path)) return emulated_cpuinfo();                                \
        return ((open_function)dlsym(RTLD_NEXT, #name))(path, flags, mode);             \
    }

/* fopen() and fopen64(), likewise */
#define FORWARD_FOPEN(name)                                                             \
    FILE *name(const char *path, const char *mode) {                                    \
        if (is_cpuinfo(path)) {                                                         \
            int file = emulated_cpuinfo();                                              \
            return file < 0 ? NULL : fdopen(file, mode);                                \
        }                                                                               \
        return ((fopen_function)dlsym(RTLD_NEXT, #name))(path, mode);                   \
    }

FORWARD_OPEN(open)
FORWARD_OPEN(open64)
FORWARD_FOPEN(fopen)
FORWARD_FOPEN(fopen64)
