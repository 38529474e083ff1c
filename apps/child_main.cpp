// pacts-child: serves a backend over the process protocol (spec/process.md) on its standard input
// and output, so that it runs in a process of its own. With a C ABI plugin it isolates the plugin:
// a plugin that crashes, hangs or calls exit() ends one case of the run, not the run.
//
//   pacts-conformance --backend "exec:pacts-child --backend lib:/x/libacme.so"
//   pacts-child --backend host            (any name --backend takes, but exec: itself)
//
// Exit status: 0 after the protocol's exit request or the end of its input; 1 when the backend
// cannot be made; 2 after a request the protocol does not define.
#include <pacts/backends/plugin.h>
#include <pacts/backends/process.h>
#include <pacts/backends/register.h>
#include <pacts/conformance/registry.h>

#include <CLI/CLI.hpp>

#include "cli.h"

#include <cctype>
#include <cstdio>

int main(int argc, char** argv) {
  pacts::backends::register_all();
  CLI::App app{"pacts-child: a backend served over the process protocol (spec/process.md)"};
  std::string backend_name = "host", name;
  app.add_option("--backend", backend_name, "the backend to serve: host, reference, lib:PATH, ...");
  app.add_option("--name", name, "the name it declares (default: the plugin's declared name, or "
                                 "the backend's name)");
  pacts::apps::add_version(app);
  PACTS_CLI_PARSE(app, argc, argv);
  if (backend_name.rfind(pacts::backends::kProcessPrefix, 0) == 0) {
    std::fprintf(stderr, "pacts-child: --backend %s: a child does not start another child\n",
                 backend_name.c_str());
    return 1;
  }
  auto backend = pacts::conformance::make_backend(backend_name);
  if (!backend) {
    std::fprintf(stderr, "pacts-child: --backend %s: not available (%s)\n", backend_name.c_str(),
                 "host, reference, lib:PATH, ...");
    return 1;
  }
  pacts::backends::ChildIdentity id;
  if (const auto* plugin = pacts::backends::plugin_info(*backend); plugin != nullptr) {
    id.name = plugin->declared;
    id.driver = plugin->driver;
    id.runtime = plugin->runtime;
    id.kernel_version = plugin->version;
  } else {
    for (char c : backend_name)
      id.name += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ? c : '_';
  }
  if (!name.empty()) id.name = name;
  id.device = backend->device();
  // spec/process.md §6: the host backend's calls are timed by the host clock; a backend that
  // runs on a device is timed by pacts-bench in its own process (or a plugin's timed calls).
  id.timed_calls = backend_name == "host";
  return pacts::backends::serve(*backend, id, stdin, stdout);
}
