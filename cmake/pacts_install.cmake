# The installed tree (cmake --install BUILD --prefix PREFIX) and its packages. Included at the end
# of the top-level CMakeLists.txt.
#
#   bin/                      every program of the build (apps/CMakeLists.txt installs each)
#   lib/libpacts_host_plugin.so   the example plugin (kernels/plugins/)
#   include/pacts/            the plugin C ABI: backend_abi.h and the problem descriptor it builds on
#   lib/cmake/pacts/          find_package(pacts CONFIG): the target pacts::abi (those headers)
#   lib/pkgconfig/pacts.pc    the same for pkg-config (pkg-config --cflags pacts)
#   share/pacts/mustpass/v1   the mustpass set pacts-qualify runs (found from bin/, apps/cli.h)
#   share/pacts/bench/        the stored peers' figures pacts-bench and pacts-qualify show
# CPack makes a .deb of the same tree (cpack -G DEB in the build folder).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# pacts::abi: what a plugin compiles against. Header-only, plain C.
add_library(pacts_abi INTERFACE)
add_library(pacts::abi ALIAS pacts_abi)
set_target_properties(pacts_abi PROPERTIES EXPORT_NAME abi)
target_include_directories(pacts_abi INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/kernels/include>
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/spec/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
install(TARGETS pacts_abi EXPORT pactsTargets)
install(FILES ${PROJECT_SOURCE_DIR}/kernels/include/pacts/backend_abi.h
              ${PROJECT_SOURCE_DIR}/spec/include/pacts/problem.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/pacts)

set(pacts_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/pacts)
install(EXPORT pactsTargets NAMESPACE pacts:: DESTINATION ${pacts_cmake_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/pacts-config.cmake.in
                              ${PROJECT_BINARY_DIR}/pacts-config.cmake
                              INSTALL_DESTINATION ${pacts_cmake_dir}
                              PATH_VARS CMAKE_INSTALL_BINDIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/pacts-config-version.cmake
                                 COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES ${PROJECT_BINARY_DIR}/pacts-config.cmake ${PROJECT_BINARY_DIR}/pacts-config-version.cmake
        DESTINATION ${pacts_cmake_dir})

# Relocatable: the prefix is found from the .pc file's own folder (a tree installed anywhere, or
# the .deb's /usr).
file(RELATIVE_PATH pacts_pc_to_prefix /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
configure_file(${PROJECT_SOURCE_DIR}/cmake/pacts.pc.in ${PROJECT_BINARY_DIR}/pacts.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/pacts.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/conformance/mustpass/v1
        DESTINATION ${CMAKE_INSTALL_DATADIR}/pacts/mustpass)
install(FILES ${PROJECT_SOURCE_DIR}/bench/data/h200-best-paged-peer.json
        DESTINATION ${CMAKE_INSTALL_DATADIR}/pacts/bench)
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE ${PROJECT_SOURCE_DIR}/README.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR})

# The .deb: the programs link only Debian's shared libraries (dpkg-shlibdeps names them).
set(CPACK_PACKAGE_NAME pacts)
set(CPACK_PACKAGE_VENDOR "pacts")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Conformance suite and kernels for paged-attention decode")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "pacts maintainers <pacts@localhost>")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_GENERATOR DEB)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)  # the package carries no debug information
include(CPack)

if(PACTS_BUILD_TESTS)
  # The installed tree used as a downstream project and a user use it (ci/install_test.sh): the
  # install, a plugin built through find_package(pacts) and pkg-config, the moved prefix's
  # pacts-qualify with its own mustpass set, and the .deb.
  add_test(NAME pacts_install_test
           COMMAND bash ${PROJECT_SOURCE_DIR}/ci/install_test.sh ${PROJECT_BINARY_DIR}
                   ${PROJECT_BINARY_DIR}/install_test)
  set_tests_properties(pacts_install_test PROPERTIES LABELS install TIMEOUT 600
                       ENVIRONMENT PACTS_INSTALL_TEST_DEB=1)
endif()
