// Every backend of this build, registered in the conformance registry
// (pacts/conformance/registry.h): what a program calls once, at the top of main(), before it
// makes a backend by name. Explicit, so that no registration hangs on a static initialiser that a
// static library would drop.
#pragma once

namespace pacts::backends {

// "reference" (and the hidden "reference-requant"), "host", "lib:PATH" (plugins) and, in a build
// with the HIP kernels, "hip" and "hip:N". Calling it again changes nothing.
void register_all();

// The reference backends alone: "reference" and "reference-requant".
void register_reference_backends();

}  // namespace pacts::backends
