# Cross build for 64-bit Arm Linux with Debian's cross toolchain
# (gcc-aarch64-linux-gnu, libc6-dev-arm64-cross) and the arm64 libraries of
# multiarch (zlib1g-dev:arm64, libjansson-dev:arm64, ...; ci/setup.sh --ci).
# The binaries run under qemu-user (CMAKE_CROSSCOMPILING_EMULATOR, so ctest
# runs C tests through it). MPI is left out: -DPARITY_MPI=OFF.
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DPARITY_MPI=OFF
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# Headers and libraries of the target only; programs (pkg-config, git) of the host.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
# pkg-config must read the arm64 .pc files, never the host's.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")
# The dynamic loader comes from the cross libc (-L); LD_LIBRARY_PATH makes it
# take libc, libm and libgomp from there too, before the multiarch libc6:arm64
# that the arm64 libraries pull in. A loader of one glibc build with the libc
# of another (2.36-8cross1 against 2.36-9+deb12u14) shares private structures
# it lays out differently: the first pthread_create then loops for ever.
find_program(PAR_QEMU_AARCH64 NAMES qemu-aarch64 qemu-aarch64-static)
if(PAR_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${PAR_QEMU_AARCH64} -L /usr/aarch64-linux-gnu
      -E LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib)
endif()
