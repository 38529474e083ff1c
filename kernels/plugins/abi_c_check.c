/* pacts/backend_abi.h is plain C (it crosses a shared-library boundary to code pacts never
 * compiles): this file compiles it as C99 with -Wpedantic -Werror in every build, and spells out
 * the entry point a plugin written in C declares. Nothing runs it. */
#include <pacts/backend_abi.h>

#include <stddef.h>

/* The layout-stable header the loader reads before the version is known (backend_abi.h). */
typedef char pacts_abi_version_is_first[offsetof(pacts_backend_v1, abi_version) == 0 ? 1 : -1];
typedef char pacts_descriptor_bytes_is_second[offsetof(pacts_backend_v1, descriptor_bytes) == 4 ? 1 : -1];
/* Version 2 begins with a whole version 1 descriptor (the entry point returns its address). */
typedef char pacts_v2_begins_with_v1[offsetof(pacts_backend_v2, v1) == 0 ? 1 : -1];

const pacts_backend_v1* pacts_abi_c_check_entry(void);
const pacts_backend_v1* pacts_abi_c_check_entry(void) { return NULL; }
