# The fault-injection build (test builds only): berthd-fault is berthd
# linked with tests/fault/fault_wrap.c (and fault_vfs.c) and -Wl,--wrap for the system calls
# whose failures the fault suites walk (see fault_wrap.c for what is and
# is not reached). The suites tests/api/test_fault_*.c run it instead of
# berthd and link the walk engine, tests/fault/fault_suite.c and fault_checks.c.
#
# Included from the top-level CMakeLists.txt after the API suites are
# defined, so that it only adds to them.

set(BERTH_FAULT_WRAPPED fsync fdatasync syncfs rename renameat renameat2 write pwrite64 ftruncate64
                        mount umount2 open_tree mount_setattr unlink unlinkat rmdir mkdir mkdirat)
set(BERTH_FAULT_WRAP_FLAGS "")
foreach(sym ${BERTH_FAULT_WRAPPED})
  list(APPEND BERTH_FAULT_WRAP_FLAGS "LINKER:--wrap=${sym}")
endforeach()

add_executable(berthd-fault daemon/main.c tests/fault/fault_wrap.c tests/fault/fault_vfs.c)
target_link_libraries(berthd-fault PRIVATE berth_daemon PkgConfig::SQLITE)
target_link_options(berthd-fault PRIVATE ${BERTH_FAULT_WRAP_FLAGS})
# Exported symbols give the fault reports' backtraces function names.
set_target_properties(berthd-fault PROPERTIES ENABLE_EXPORTS ON)

file(GLOB FAULT_TESTS CONFIGURE_DEPENDS tests/api/test_fault*.c)
foreach(src ${FAULT_TESTS})
  get_filename_component(name ${src} NAME_WE)
  target_sources(api_${name} PRIVATE tests/fault/fault_suite.c tests/fault/fault_checks.c)
  target_compile_definitions(api_${name} PRIVATE BERTHD_FAULT_PATH="$<TARGET_FILE:berthd-fault>")
  add_dependencies(api_${name} berthd-fault)
  # BERTH_FAULT_WALK=full walks every call (see README, Testing).
  set_tests_properties(api_${name} PROPERTIES LABELS "api;fault" TIMEOUT 900
                       ENVIRONMENT "CK_DEFAULT_TIMEOUT=600")
endforeach()

# Every call of the walked kinds that berthd makes is wrapped (a new one
# fails here until it is added above and to fault_wrap.c).
add_test(NAME fault_wrap_covers_berthd
         COMMAND ${CMAKE_SOURCE_DIR}/tests/fault/check-wrapped.sh $<TARGET_FILE:berthd>
                 $<TARGET_FILE:berthd-fault> ${BERTH_FAULT_WRAPPED})
set_tests_properties(fault_wrap_covers_berthd PROPERTIES LABELS "unit;fault")
