# The portable agent (scripts/portable-agent.sh): gpufleet-agent, linked to run on x86-64 Linux
# with glibc 2.31 or newer (Debian 11, Ubuntu 20.04, RHEL 9, DGX OS 6 and later). It is compiled
# here with Debian 12's compiler and headers and linked against an older glibc: the libraries of
# GPUFLEET_AGENT_SYSROOT, a Debian 11 root with libc6-dev that the script makes with
# debootstrap. libstdc++, OpenSSL, SQLite, yaml-cpp and RE2 are linked statically, Boost.JSON,
# spdlog and fmt built from their headers: the binary needs libc, libpthread, libdl, libm and
# libgcc_s, at glibc 2.31's symbol versions at most (checked after each link). NVML stays
# loaded with dlopen.
# Only these targets are configured: GPUFLEET_TESTS and the controller's libraries are off.

set(sysroot "${GPUFLEET_AGENT_SYSROOT}")
if(NOT sysroot OR NOT EXISTS "${sysroot}/usr/lib/x86_64-linux-gnu/libc_nonshared.a")
  message(FATAL_ERROR "GPUFLEET_AGENT_SYSROOT must name a Debian 11 root with libc6-dev "
                      "(scripts/portable-agent.sh makes one with debootstrap)")
endif()
set(GPUFLEET_TESTS OFF)
set(GPUFLEET_AGENT_GLIBC "2.31" CACHE STRING "the newest glibc symbol version gpufleet-agent may need")

# Static libraries from Debian 12, where it ships them.
set(CMAKE_FIND_LIBRARY_SUFFIXES .a)
set(OPENSSL_USE_STATIC_LIBS TRUE)
find_package(Threads REQUIRED)
find_package(Boost 1.81.0 EXACT REQUIRED CONFIG)
# Boost.JSON from its sources: Debian's libboost_json.a cannot go into a position-independent
# executable or the fake NVML library.
add_library(gf_boost_json STATIC cmake/portable/boost_json.cpp)
set_target_properties(gf_boost_json PROPERTIES POSITION_INDEPENDENT_CODE ON)
target_link_libraries(gf_boost_json PUBLIC Boost::headers)
add_library(Boost::json ALIAS gf_boost_json)
find_package(OpenSSL REQUIRED)
find_package(CLI11 REQUIRED)
find_package(SQLite3 REQUIRED)
foreach(lib yaml-cpp re2)
  find_library(${lib}_STATIC NAMES lib${lib}.a REQUIRED)
endforeach()
add_library(yaml-cpp STATIC IMPORTED)
set_target_properties(yaml-cpp PROPERTIES IMPORTED_LOCATION "${yaml-cpp_STATIC}")
add_library(PkgConfig::RE2 STATIC IMPORTED)
set_target_properties(PkgConfig::RE2 PROPERTIES IMPORTED_LOCATION "${re2_STATIC}"
                                                INTERFACE_LINK_LIBRARIES Threads::Threads)
# Debian ships spdlog and fmt as shared libraries only: both as headers here.
add_library(spdlog::spdlog INTERFACE IMPORTED)
set_target_properties(spdlog::spdlog PROPERTIES
                      INTERFACE_COMPILE_DEFINITIONS "SPDLOG_FMT_EXTERNAL;FMT_HEADER_ONLY")

add_compile_definitions(BOOST_ASIO_NO_DEPRECATED)
include(cmake/embed.cmake)
add_subdirectory(src/common)
add_subdirectory(src/net)
add_subdirectory(src/model)
add_subdirectory(src/proto)
add_subdirectory(src/agent)

# Linked against the sysroot's glibc (crt1.o, libc.so's script, libc_nonshared.a, libpthread,
# libdl), with libstdc++ static and the system's libgcc_s; the sysroot's directories named
# first, as gcc searches its own Debian 12 ones before the sysroot's.
set(portable_link --sysroot=${sysroot} -B${sysroot}/usr/lib/x86_64-linux-gnu/
    -L${sysroot}/usr/lib/x86_64-linux-gnu -static-libstdc++ -pthread -Wl,--as-needed)
add_executable(gpufleet-agent apps/gpufleet-agent/main.cpp apps/gpufleet/agent_command.cpp
               apps/gpufleet/process.cpp cmake/portable/glibc_compat.c)
target_include_directories(gpufleet-agent PRIVATE ${PROJECT_SOURCE_DIR})
target_compile_definitions(gpufleet-agent PRIVATE GPUFLEET_VERSION="${PROJECT_VERSION}")
target_link_libraries(gpufleet-agent PRIVATE gf_agent CLI11::CLI11 spdlog::spdlog m dl)
target_link_options(gpufleet-agent PRIVATE ${portable_link})
add_custom_command(TARGET gpufleet-agent POST_BUILD
                   COMMAND ${PROJECT_SOURCE_DIR}/scripts/check-glibc.sh
                           $<TARGET_FILE:gpufleet-agent> ${GPUFLEET_AGENT_GLIBC}
                   VERBATIM)

# The fake NVML library of the tests, linked the same way, for the test that runs the agent in
# a Debian 11 root (tests/package/portable_agent_test.sh).
add_library(fake_nvml SHARED tests/fake_nvml/fake_nvml.cpp cmake/portable/glibc_compat.c)
target_include_directories(fake_nvml PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(fake_nvml PRIVATE Boost::json)
target_link_options(fake_nvml PRIVATE ${portable_link})
set_target_properties(fake_nvml PROPERTIES OUTPUT_NAME "nvidia-ml" SUFFIX ".so.1"
                      CXX_VISIBILITY_PRESET hidden C_VISIBILITY_PRESET hidden)

# gpufleet-agent-VERSION-linux-x86_64.tar.gz: the binary (stripped), a systemd unit for
# /opt/gpufleet-agent, the settings file and a README.
set(tarball gpufleet-agent-${PROJECT_VERSION}-linux-x86_64)
set(stage ${PROJECT_BINARY_DIR}/stage/${tarball})
file(READ ${PROJECT_SOURCE_DIR}/packaging/systemd/gpufleet-agent.service unit)
string(REPLACE "/usr/bin/gpufleet agent" "/opt/gpufleet-agent/bin/gpufleet-agent" unit "${unit}")
string(REPLACE "file:///usr/share/doc/gpufleet/operations.md" "file:///opt/gpufleet-agent/README"
               unit "${unit}")
file(WRITE ${PROJECT_BINARY_DIR}/portable/gpufleet-agent.service "${unit}")
add_custom_command(
  OUTPUT ${PROJECT_BINARY_DIR}/${tarball}.tar.gz
  COMMAND ${CMAKE_COMMAND} -E rm -rf ${stage}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${stage}/bin
  COMMAND ${CMAKE_STRIP} -o ${stage}/bin/gpufleet-agent $<TARGET_FILE:gpufleet-agent>
  COMMAND ${CMAKE_COMMAND} -E copy ${PROJECT_BINARY_DIR}/portable/gpufleet-agent.service
          ${PROJECT_SOURCE_DIR}/packaging/etc/agent.env ${stage}/
  COMMAND ${CMAKE_COMMAND} -E copy ${PROJECT_SOURCE_DIR}/packaging/portable/README ${stage}/README
  COMMAND tar -C ${PROJECT_BINARY_DIR}/stage --owner=0 --group=0 --sort=name -czf
          ${PROJECT_BINARY_DIR}/${tarball}.tar.gz ${tarball}
  DEPENDS gpufleet-agent ${PROJECT_SOURCE_DIR}/packaging/portable/README
          ${PROJECT_SOURCE_DIR}/packaging/etc/agent.env
  VERBATIM)
add_custom_target(agent-tarball ALL DEPENDS ${PROJECT_BINARY_DIR}/${tarball}.tar.gz)
