# The CUDA room (src/cuda, library par_cuda) and the cuda trainer, by PARITY_CUDA:
# AUTO builds them where nvcc is found (/usr/local/cuda/bin/nvcc, else CUDACXX or
# PATH), except in cross, sanitizer and fuzzing builds; ON insists, OFF skips.
# Sets PAR_HAVE_CUDA. The device code keeps the arithmetic contract:
# -fmad=false (no multiply and add contracted behind our back; the kernels write
# __fmaf_rn / __fma_rn where the contract has fma), checked on the compiled code
# by ci/cuda_fma_check.py (ctest test_cuda_fma).
set(PAR_HAVE_CUDA OFF)
set(PAR_CUDA_EMU OFF)
if(NOT PARITY_CUDA MATCHES "^(AUTO|ON|OFF|EMU)$")
  message(FATAL_ERROR "PARITY_CUDA=${PARITY_CUDA}: expected AUTO, ON, OFF or EMU")
endif()
# EMU: the cuda trainer with its kernels' bodies run on the host
# (src/cuda/cuda_emu.c): every CLI path of --trainer cuda without a GPU, slowly;
# for trying scripts such as ci/gpu.sh, never for figures.
if(PARITY_CUDA STREQUAL "EMU")
  add_library(par_cuda STATIC ${CMAKE_SOURCE_DIR}/src/cuda/cuda_emu.c)
  target_include_directories(par_cuda PUBLIC ${CMAKE_SOURCE_DIR}/src/cuda)
  target_link_libraries(par_cuda PUBLIC par_core par_model par_kernels)
  set(PAR_HAVE_CUDA ON)
  set(PAR_CUDA_EMU ON)
  message(STATUS "parity: cuda trainer on the host emulation (PARITY_CUDA=EMU)")
  return()
endif()
set(_par_cuda_want ${PARITY_CUDA})
if(_par_cuda_want STREQUAL "AUTO" AND (CMAKE_CROSSCOMPILING OR PARITY_SANITIZE OR PARITY_TSAN
                                       OR PARITY_FUZZ))
  set(_par_cuda_want OFF)
endif()
if(NOT _par_cuda_want STREQUAL "OFF")
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX}
     AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(PAR_HAVE_CUDA ON)
  elseif(PARITY_CUDA STREQUAL "ON")
    message(FATAL_ERROR "PARITY_CUDA=ON but no nvcc found (set CUDACXX or CMAKE_CUDA_COMPILER)")
  endif()
endif()
message(STATUS "parity: cuda trainer ${PAR_HAVE_CUDA} (PARITY_CUDA=${PARITY_CUDA})")
if(NOT PAR_HAVE_CUDA)
  return()
endif()

if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES 90)   # H100, H200: sm_90 machine code and compute_90 PTX
endif()
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)
file(GLOB _cu CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/cuda/*.cu)
add_library(par_cuda STATIC ${_cu})
target_include_directories(par_cuda PUBLIC ${CMAKE_SOURCE_DIR}/src/cuda)
target_link_libraries(par_cuda PUBLIC par_core par_model par_kernels CUDA::cudart_static)
set_target_properties(par_cuda PROPERTIES CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)
# The directory's C options (-Wpedantic ...) are gcc's, not nvcc's: replaced here.
set(_par_cuda_opts -fmad=false "-Xcompiler=-Wall,-Wextra,-ffp-contract=off")
if(PARITY_WERROR)
  list(APPEND _par_cuda_opts "SHELL:-Werror all-warnings")
endif()
set_property(TARGET par_cuda PROPERTY COMPILE_OPTIONS ${_par_cuda_opts})

# The device code's PTX, for the contraction check (ci/cuda_fma_check.sh,
# ctest test_cuda_fma): the kernels' source with the library's flags.
add_library(par_cuda_ptx OBJECT ${CMAKE_SOURCE_DIR}/src/cuda/cuda_kernels.cu)
set_target_properties(par_cuda_ptx PROPERTIES CUDA_PTX_COMPILATION ON CUDA_STANDARD 17
                      CUDA_STANDARD_REQUIRED ON)
target_link_libraries(par_cuda_ptx PRIVATE par_core par_model par_kernels)
set_property(TARGET par_cuda_ptx PROPERTY COMPILE_OPTIONS ${_par_cuda_opts})
