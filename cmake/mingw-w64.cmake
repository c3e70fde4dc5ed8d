# CMake toolchain file for the Windows cross-build with Debian's mingw-w64
# (x86_64-w64-mingw32, gcc 12 "win32" threads). scripts/build-windows.sh
# uses it both for the dependencies it builds from Debian's source packages
# and for berth itself:
#
#   cmake -S . -B build-windows -DCMAKE_TOOLCHAIN_FILE=cmake/mingw-w64.cmake \
#         -DBERTH_MINGW_PREFIX=/var/cache/berth-mingw/<key>/prefix \
#         -DCMAKE_CROSSCOMPILING_EMULATOR=/usr/lib/wine/wine64
#
# BERTH_MINGW_PREFIX (a cache variable, or the environment variable of that
# name) is the prefix that holds the static libraries and headers; it is
# searched after the toolchain's own sysroot. Programs (perl, tclsh, the
# host compiler) are never looked up in the target roots.

set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)

set(BERTH_MINGW_TRIPLET x86_64-w64-mingw32)
set(CMAKE_C_COMPILER ${BERTH_MINGW_TRIPLET}-gcc)
set(CMAKE_CXX_COMPILER ${BERTH_MINGW_TRIPLET}-g++)
set(CMAKE_RC_COMPILER ${BERTH_MINGW_TRIPLET}-windres)

if(NOT BERTH_MINGW_PREFIX AND DEFINED ENV{BERTH_MINGW_PREFIX})
  set(BERTH_MINGW_PREFIX "$ENV{BERTH_MINGW_PREFIX}")
endif()
# try_compile projects re-read this file; hand the prefix on to them.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES BERTH_MINGW_PREFIX)

set(CMAKE_FIND_ROOT_PATH /usr/${BERTH_MINGW_TRIPLET})
if(BERTH_MINGW_PREFIX)
  list(APPEND CMAKE_FIND_ROOT_PATH ${BERTH_MINGW_PREFIX})
endif()
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
