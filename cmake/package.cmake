# `cmake --build BUILD --target package`: the gpufleet .deb (CPack), with the systemd units,
# the settings in /etc/gpufleet (conffiles) and the maintainer scripts of packaging/ (a system
# user, /var/lib/gpufleet). Depends: computed by dpkg-shlibdeps from the binary.
# tests/package/deb_test.sh installs it with dpkg -i and runs both services from it.

install(TARGETS gpufleet RUNTIME DESTINATION bin)
install(FILES packaging/systemd/gpufleet-controller.service packaging/systemd/gpufleet-agent.service
        DESTINATION /lib/systemd/system)
install(FILES packaging/etc/controller.env DESTINATION /etc/gpufleet
        PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ)
install(FILES packaging/etc/agent.env DESTINATION /etc/gpufleet
        PERMISSIONS OWNER_READ OWNER_WRITE)
install(DIRECTORY docs/ DESTINATION share/doc/gpufleet FILES_MATCHING PATTERN "*.md")
install(FILES README.md examples/fleet.yaml DESTINATION share/doc/gpufleet)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME gpufleet)
set(CPACK_PACKAGE_VENDOR gpufleet)
set(CPACK_PACKAGE_CONTACT "gpufleet maintainers <gpufleet@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "GPU fleet management: controller, node agent, CLI and dashboard")
set(CPACK_PACKAGE_DESCRIPTION
    "gpufleet finds the GPUs on every node through NVML, collects their telemetry, alerts, \
scales pools, rolls drivers and firmware out, and keeps the inventory and the audit log, through \
a TLS REST API, a CLI and a web dashboard. One binary: `gpufleet serve` (the controller, \
gpufleet-controller.service) and `gpufleet agent` (on each GPU node, gpufleet-agent.service).")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# useradd (passwd) and systemctl's units; NVML comes with the NVIDIA driver, loaded at run time.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "passwd")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "postgresql, prometheus-alertmanager")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    "${PROJECT_SOURCE_DIR}/packaging/deb/postinst;${PROJECT_SOURCE_DIR}/packaging/deb/prerm;\
${PROJECT_SOURCE_DIR}/packaging/deb/postrm;${PROJECT_SOURCE_DIR}/packaging/deb/conffiles")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# gzip: quick to make and read by every dpkg
set(CPACK_DEBIAN_COMPRESSION_TYPE gzip)
set(CPACK_WARN_ON_ABSOLUTE_INSTALL_DESTINATION OFF)
include(CPack)
