/* Keep the wheel's glibc floor at each architecture's manylinux2014 baseline (2.17).
 *
 * glibc 2.34 moved the pthread functions into libc.so.6 and gave them new symbol versions
 * (GLIBC_2.34, as did libdl's dlopen family; pthread_sigmask GLIBC_2.32), so a build on a current
 * distribution requires glibc >= 2.34 although these functions exist, unchanged, under their
 * original versions in every glibc since the architecture's first. Binding the references to those
 * original versions (which glibc >= 2.34 keeps as compatibility symbols) lets the same binary load
 * on glibc 2.17 .. today. Python links libpthread on the old systems, so the names resolve
 * there. Include before any call; other C libraries (musl) and architectures: no effect.
 */
#ifndef TVMRT_GLIBC_FLOOR_H_
#define TVMRT_GLIBC_FLOOR_H_

#if defined(__linux__) && defined(__GLIBC__)
#if defined(__x86_64__) && !defined(__ILP32__)
#define TVMRT_GLIBC_BASE "GLIBC_2.2.5"
#define TVMRT_GLIBC_DLADDR1 "GLIBC_2.3.3"
#elif defined(__aarch64__)
#define TVMRT_GLIBC_BASE "GLIBC_2.17"
#define TVMRT_GLIBC_DLADDR1 "GLIBC_2.17"
#elif defined(__arm__) && defined(__ARM_EABI__)
#define TVMRT_GLIBC_BASE "GLIBC_2.4"
#define TVMRT_GLIBC_DLADDR1 "GLIBC_2.4"
#endif
#endif

#ifdef TVMRT_GLIBC_BASE
#define TVMRT_OLD_VERSION(name) __asm__(".symver " #name "," #name "@" TVMRT_GLIBC_BASE)
TVMRT_OLD_VERSION(pthread_create);
TVMRT_OLD_VERSION(pthread_join);
TVMRT_OLD_VERSION(pthread_once);
TVMRT_OLD_VERSION(pthread_key_create);
TVMRT_OLD_VERSION(pthread_setspecific);
TVMRT_OLD_VERSION(pthread_sigmask);
/* libdl's functions moved into libc at 2.34 too (libtvmrt_runtime links -ldl) */
TVMRT_OLD_VERSION(dlopen);
TVMRT_OLD_VERSION(dlsym);
TVMRT_OLD_VERSION(dlerror);
TVMRT_OLD_VERSION(dlclose);
__asm__(".symver dladdr1,dladdr1@" TVMRT_GLIBC_DLADDR1);
/* dlinfo came with dladdr1 (the tvm-ffi loader reads a library's link map through it) */
__asm__(".symver dlinfo,dlinfo@" TVMRT_GLIBC_DLADDR1);
#endif

#endif /* TVMRT_GLIBC_FLOOR_H_ */
