/* A firmware project of one's own around an MLF package: the sine demo's model, called
 * through the header TVM generated (tvmgen_sine.h), with tvmrt's micro runtime and the
 * emulated boards' platform port. It runs the model on a few inputs and prints each answer's
 * bits over semihosting (the test compares them with tvmrt's host run of the package). */
#include <stdint.h>
#include <string.h>

#include "semihost.h"
#include "tvm/runtime/crt/platform.h"
#include "tvmgen_sine.h"

static float input[1];
static float output[1];

int main(void) {
  if (TVMPlatformInitialize() != kTvmErrorNoError) return 1;
  static const float xs[] = {0.0f, 0.5f, 1.5f, 3.0f, 6.0f};
  for (unsigned i = 0; i < sizeof(xs) / sizeof(xs[0]); ++i) {
    input[0] = xs[i];
    struct tvmgen_sine_inputs inputs = {.input_1 = input};
    struct tvmgen_sine_outputs outputs = {.output = output};
    if (tvmgen_sine_run(&inputs, &outputs) != 0) return 1;
    uint32_t bits;
    memcpy(&bits, &output[0], sizeof(bits));
    tvmrt_sh_write_u32("y_bits=", bits);
  }
  return 0;
}
