#!/usr/bin/env bash
# The installed tree, as a downstream project and a user meet it (ctest pacts_install_test):
#   1. cmake --install of this build into a fresh prefix: every program, the plugin C ABI headers,
#      find_package(pacts) and pkg-config files, the mustpass set;
#   2. the installed headers compile alone as C99 (pkg-config --cflags pacts);
#   3. a downstream plugin (ci/install_fixture) builds through find_package(pacts CONFIG) and
#      pacts::abi, and again through pkg-config;
#   4. the prefix moved elsewhere, its pacts-qualify runs the catalogue on that plugin (isolated in
#      the installed pacts-child), reading the installed mustpass set: it exits 0 (the plugin
#      refuses every problem at run time, so nothing is Mandatory-failed), and the report names
#      the plugin and the mustpass folder under the moved prefix and says this was not a
#      qualification run (one case per property);
#   5. with PACTS_INSTALL_TEST_DEB=1 (ci/test.sh sets it): cpack makes the .deb and dpkg-deb lists
#      the programs, the headers and the mustpass set in it.
#   ci/install_test.sh BUILD_DIR WORK_DIR
set -euo pipefail
build=$1
work=$2
src=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$work"
mkdir -p "$work"
fail() { echo "install test: $*" >&2; exit 1; }

prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" > "$work/install.log"
for f in bin/pacts-qualify bin/pacts bin/pacts-fuzz bin/pacts-bench bin/pacts-child \
         include/pacts/backend_abi.h include/pacts/problem.h lib/libpacts_host_plugin.so \
         lib/cmake/pacts/pacts-config.cmake lib/cmake/pacts/pacts-config-version.cmake \
         lib/cmake/pacts/pactsTargets.cmake lib/pkgconfig/pacts.pc \
         share/pacts/bench/h200-best-paged-peer.json; do
  [ -e "$prefix/$f" ] || fail "$f is not installed"
done
n=$(find "$prefix/share/pacts/mustpass/v1" -name '*.json' | wc -l)
[ "$n" -gt 0 ] || fail "no mustpass case installed"
echo "installed: $(find "$prefix" -type f | wc -l) files, $n mustpass files"

# 2. The headers alone, through pkg-config.
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
cflags=$(pkg-config --cflags pacts)
[[ "$cflags" == *"$prefix"* || "$cflags" == *"/include"* ]] || fail "pkg-config --cflags pacts gave '$cflags'"
printf '#include <pacts/backend_abi.h>\nint main(void) { return PACTS_BACKEND_ABI_VERSION > 0u ? 0 : 1; }\n' > "$work/abi.c"
cc -std=c99 -Wall -Wextra -Wpedantic -Werror $cflags "$work/abi.c" -o "$work/abi"
"$work/abi"

# 3. The downstream plugin, by find_package and by pkg-config.
cmake -S "$src/ci/install_fixture" -B "$work/downstream" -DCMAKE_PREFIX_PATH="$prefix" \
      -DCMAKE_BUILD_TYPE=Release > "$work/downstream-configure.log"
cmake --build "$work/downstream" > "$work/downstream-build.log"
plugin=$work/downstream/libdownstream_plugin.so
[ -f "$plugin" ] || fail "the downstream plugin was not built"
cc -std=c99 -shared -fPIC -Wall -Werror $cflags "$src/ci/install_fixture/downstream_plugin.c" \
   -o "$work/pkgconfig_plugin.so"

# 4. The moved prefix runs the plugin with its own mustpass set.
mv "$prefix" "$work/moved"
out=$work/qualify
status=0
"$work/moved/bin/pacts-qualify" --backend none --backend-lib "$plugin" --cases 1 --seed 5 \
  --bench-sets none --out "$out" > "$work/qualify.log" 2>&1 || status=$?
[ "$status" -eq 0 ] || { tail -30 "$work/qualify.log"; fail "pacts-qualify exited $status (0 expected)"; }
[ -f "$out/report.json" ] || fail "no report.json"
grep -q '"downstream-example"' "$out/report.json" || fail "report.json does not name the plugin"
grep -q "$work/moved/share/pacts/mustpass/v1" "$out/report.json" ||
  fail "report.json does not name the installed mustpass set"
grep -q "not a qualification run" "$out/report.md" || fail "report.md does not say 'not a qualification run'"
echo "installed pacts-qualify: exit 0, report names downstream-example and $work/moved/share/pacts/mustpass/v1"

# 5. The .deb.
if [ "${PACTS_INSTALL_TEST_DEB:-0}" = 1 ]; then
  (cd "$build" && cpack -G DEB -B "$work/deb" > "$work/cpack.log" 2>&1) ||
    { tail -20 "$work/cpack.log"; fail "cpack -G DEB failed"; }
  deb=$(find "$work/deb" -maxdepth 1 -name '*.deb' | head -1)
  [ -n "$deb" ] || fail "cpack made no .deb"
  dpkg-deb --contents "$deb" > "$work/deb-contents.txt"
  for f in ./usr/bin/pacts-qualify ./usr/include/pacts/backend_abi.h ./usr/share/pacts/mustpass/v1/; do
    grep -q " $f" "$work/deb-contents.txt" || fail "$f is not in $(basename "$deb")"
  done
  echo "deb: $(basename "$deb"), $(stat -c %s "$deb") bytes, depends: $(dpkg-deb -f "$deb" Depends)"
fi
echo "install test: pass"
