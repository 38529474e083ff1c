/* A plugin as a downstream project writes it against an installed pacts (ci/install_test.sh): the
 * version 1 descriptor of <pacts/backend_abi.h>, in C99. It computes nothing: every run is refused
 * with NotSupported and a message, so pacts-qualify loads it, runs the catalogue and reports every
 * property NotSupported (not qualified). What it proves is the install: the header compiles, the
 * entry point is found, the descriptor is accepted. */
#include <pacts/backend_abi.h>

#include <stdio.h>
#include <stdlib.h>

struct pacts_backend_instance {
  int unused;
};

static pacts_status_code create(pacts_backend_instance** instance, char* message, uint32_t bytes) {
  *instance = (pacts_backend_instance*)calloc(1, sizeof(pacts_backend_instance));
  if (*instance == NULL) {
    snprintf(message, bytes, "downstream-example: out of host memory");
    return PACTS_INTERNAL;
  }
  return PACTS_OK;
}

static void destroy(pacts_backend_instance* instance) { free(instance); }

static void run(pacts_backend_instance* instance, const pacts_problem* problem,
                const pacts_buffers* buffers, const pacts_backend_plan_hint* hint,
                pacts_backend_result* result) {
  (void)instance;
  (void)buffers;
  (void)hint;
  result->status = PACTS_NOT_SUPPORTED;
  snprintf(result->message, sizeof result->message,
           "downstream-example: computes nothing (batch %d refused; an install test's plugin)",
           (int)problem->batch);
}

static const pacts_backend_v1 descriptor = {
    1u, (uint32_t)sizeof(pacts_backend_v1), PACTS_ABI_VERSION, 0u,
    "downstream-example", "host (no kernel)", "", "", "0.1",
    {1u, {PACTS_FORMAT_BF16}, 1u, {PACTS_FORMAT_BF16}, 1u, {PACTS_FORMAT_BF16},
     1u, {PACTS_SCALE_NONE}, 1u, {128}, 16, 16, 1, 1,
     0, 0, 0, 0, 0, 1, 0, 0, 0, 1u, 0u, (int64_t)1 << 40},
    {0x1p-24, 0.0, 0.0, 0.0, 0x1p-24, 0.0, 0.0, 0.0, 0.0, 0, 0},
    create, destroy, run, NULL};

PACTS_BACKEND_EXPORT const pacts_backend_v1* pacts_backend_entry(void) { return &descriptor; }
