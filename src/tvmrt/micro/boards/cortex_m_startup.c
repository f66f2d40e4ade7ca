/* Start-up for the Cortex-M boards QEMU emulates: the vector table, the reset handler (FPU
 * on where the build uses it, .data copied, .bss zeroed, the stack painted so the harness
 * can measure its high-water mark), fault handlers that say which fault over semihosting
 * and exit, and SysTick as a free-running 24-bit counter whose wraps are counted. */
#include <stdint.h>

#include "semihost.h"

extern uint32_t __data_load[], __data_start[], __data_end[], __bss_start[], __bss_end[];
extern uint32_t __stack_bottom[], __stack_top[];
int main(void);

#define TVMRT_STACK_PAINT 0xA5C3E1F0u

static volatile uint32_t tvmrt_systick_wraps;

void tvmrt_reset(void);
static void tvmrt_fault(void);
static void tvmrt_nmi(void);
static void tvmrt_unexpected(void);
static void tvmrt_systick(void);

__attribute__((section(".vectors"), used)) static void (*const tvmrt_vectors[16])(void) = {
    (void (*)(void))(uintptr_t)__stack_top,
    tvmrt_reset,
    tvmrt_nmi,
    tvmrt_fault, /* HardFault */
    tvmrt_fault, /* MemManage */
    tvmrt_fault, /* BusFault */
    tvmrt_fault, /* UsageFault */
    tvmrt_fault, /* SecureFault (v8-M) */
    0,
    0,
    0,
    tvmrt_unexpected, /* SVCall */
    tvmrt_unexpected, /* DebugMonitor */
    0,
    tvmrt_unexpected, /* PendSV */
    tvmrt_systick,
};

#define SCB_CPACR (*(volatile uint32_t*)0xE000ED88u)
#define SCB_CFSR (*(volatile uint32_t*)0xE000ED28u)
#define SCB_HFSR (*(volatile uint32_t*)0xE000ED2Cu)
#define SYST_CSR (*(volatile uint32_t*)0xE000E010u)
#define SYST_RVR (*(volatile uint32_t*)0xE000E014u)
#define SYST_CVR (*(volatile uint32_t*)0xE000E018u)

__attribute__((noreturn)) void tvmrt_reset(void) {
#if defined(__ARM_FP)
  SCB_CPACR |= 0xFu << 20; /* CP10 and CP11: full access */
  __asm__ volatile("dsb\n\tisb" ::: "memory");
#endif
  for (uint32_t *from = __data_load, *to = __data_start; to < __data_end;) *to++ = *from++;
  for (uint32_t* at = __bss_start; at < __bss_end;) *at++ = 0;
  /* paint below the handler's own frame: everything the program may reach */
  uint32_t* here = (uint32_t*)__builtin_frame_address(0) - 16;
  for (uint32_t* at = __stack_bottom; at < here; ++at) *at = TVMRT_STACK_PAINT;
  tvmrt_sh_exit(main());
}

uint32_t tvmrt_stack_used(void) {
  uint32_t* at = __stack_bottom;
  while (at < __stack_top && *at == TVMRT_STACK_PAINT) ++at;
  return (uint32_t)((uintptr_t)__stack_top - (uintptr_t)at);
}

void tvmrt_counter_start(void) {
  tvmrt_systick_wraps = 0;
  SYST_RVR = 0x00FFFFFFu;
  SYST_CVR = 0;
  SYST_CSR = 0x7u; /* processor clock, interrupt on wrap, on */
}

/* processor clock ticks since tvmrt_counter_start */
uint64_t tvmrt_counter_ticks(void) {
  uint32_t wraps, value;
  do {
    wraps = tvmrt_systick_wraps;
    value = SYST_CVR;
  } while (wraps != tvmrt_systick_wraps);
  return (uint64_t)wraps * 0x01000000u + (0x00FFFFFFu - value);
}

static void tvmrt_systick(void) { ++tvmrt_systick_wraps; }

static void tvmrt_fault(void) {
  tvmrt_sh_write0("tvmrt-micro: fault\n");
  tvmrt_sh_write_u32("tvmrt-micro: CFSR=", SCB_CFSR);
  tvmrt_sh_write_u32("tvmrt-micro: HFSR=", SCB_HFSR);
  tvmrt_sh_exit(3);
}

static void tvmrt_nmi(void) { tvmrt_sh_exit(3); }

static void tvmrt_unexpected(void) {
  tvmrt_sh_write0("tvmrt-micro: unexpected exception\n");
  tvmrt_sh_exit(3);
}
