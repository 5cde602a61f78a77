# Which CUDA archs the backend is built for, and the build facts the package reports
# (kda_decode.build_info). Included from CMakeLists.txt after the CUDA language check.
#
#   KDA_CUDA_ARCHS given (environment or -D, ';'-separated, e.g. "90a" or "90a;100a"):
#       exactly those. Nothing is detected and the driver is not checked: a build for other
#       machines (a wheel builder, CI) says what it wants.
#   else, GPUs visible to nvidia-smi: the archs of those GPUs, compute capability X.Y ->
#       "XYa" (9.0 -> 90a, 10.0 -> 100a, 10.3 -> 103a, 12.0 -> 120a). GPUs older than sm_90
#       are left out (the kernels need Hopper features: TMA, clusters, mbarriers); none
#       left: the CPU backend alone. Since this build is for this machine, an nvcc too old
#       for a detected arch, or a driver that supports an older CUDA major version than
#       nvcc, is a configure error that names both (what would be built could not run here).
#   else (no GPU visible): 90a;100a.
#   Archs the nvcc in use cannot build are dropped from an explicit or default list, with a
#   message (as before: 100a needs nvcc 12.8).
#
# In:  KDA_WITH_CUDA, KDA_CPU_ONLY, CMAKE_CUDA_COMPILER(_VERSION), KDA_VERSION.
# Out: KDA_GENCODE (nvcc flags), KDA_CUDA_ARCHS_BUILT; KDA_WITH_CUDA may turn OFF.
#      ${CMAKE_CURRENT_BINARY_DIR}/kda_build_config.py, installed as kda_decode/_build_config.py.

# nvcc's first version that builds an arch ("" = any nvcc that builds sm_90a)
function(_kda_min_nvcc arch out)
  set(v "")
  if(arch MATCHES "^(100|101|120)a?$")
    set(v 12.8)
  elseif(arch MATCHES "^(103|121)a?$")
    set(v 12.9)
  elseif(arch MATCHES "^110a?$")
    set(v 13.0)
  endif()
  set(${out} "${v}" PARENT_SCOPE)
endfunction()

set(KDA_GENCODE "")
set(KDA_CUDA_ARCHS_BUILT "")
set(_kda_source "")
set(_kda_reason "")
set(_kda_toolkit "")

if(KDA_WITH_CUDA)
  string(REGEX MATCH "^[0-9]+\\.[0-9]+" _kda_toolkit "${CMAKE_CUDA_COMPILER_VERSION}")
  string(REGEX MATCH "^[0-9]+" _kda_nvcc_major "${CMAKE_CUDA_COMPILER_VERSION}")
  # An environment value is written into the cache so that CMake re-running itself later
  # (without the variable) keeps the choice.
  if(DEFINED ENV{KDA_CUDA_ARCHS} AND NOT "$ENV{KDA_CUDA_ARCHS}" STREQUAL "")
    set(KDA_CUDA_ARCHS "$ENV{KDA_CUDA_ARCHS}" CACHE STRING "CUDA real archs (90a;100a ...)" FORCE)
  endif()

  set(_kda_detected OFF)
  if(DEFINED KDA_CUDA_ARCHS AND NOT "${KDA_CUDA_ARCHS}" STREQUAL "")
    set(_kda_archs "${KDA_CUDA_ARCHS}")
    set(_kda_source "KDA_CUDA_ARCHS=${KDA_CUDA_ARCHS}")
  else()
    set(_kda_archs "90a;100a")
    set(_kda_source "default (no GPU visible to nvidia-smi)")
    find_program(_kda_smi nvidia-smi NO_CACHE)
    set(_kda_smi_out "")
    if(_kda_smi)
      execute_process(COMMAND "${_kda_smi}" --query-gpu=compute_cap,name,driver_version --format=csv,noheader
                      RESULT_VARIABLE _kda_smi_rc OUTPUT_VARIABLE _kda_smi_out ERROR_QUIET TIMEOUT 30)
      if(NOT _kda_smi_rc EQUAL 0)
        set(_kda_smi_out "")
      endif()
    endif()
    string(STRIP "${_kda_smi_out}" _kda_smi_out)
    if(NOT _kda_smi_out STREQUAL "")
      set(_kda_detected ON)
      set(_kda_archs "")
      set(_kda_names "")
      set(_kda_old "")
      set(_kda_driver "")
      string(REPLACE "\n" ";" _kda_lines "${_kda_smi_out}")
      foreach(_l IN LISTS _kda_lines)
        if(_l MATCHES "^ *([0-9]+)\\.([0-9]+) *, *([^,]*[^, ]) *, *([^ ,]+)")
          set(_maj "${CMAKE_MATCH_1}")
          set(_arch "${CMAKE_MATCH_1}${CMAKE_MATCH_2}")
          set(_name "${CMAKE_MATCH_3}")
          set(_kda_driver "${CMAKE_MATCH_4}")
          if(_maj LESS 9)
            list(APPEND _kda_old "${_name} (sm_${_arch})")
          else()
            list(APPEND _kda_archs "${_arch}a")
            list(APPEND _kda_names "${_name} (sm_${_arch})")
          endif()
        endif()
      endforeach()
      list(REMOVE_DUPLICATES _kda_archs)
      list(REMOVE_DUPLICATES _kda_names)
      list(REMOVE_DUPLICATES _kda_old)
      string(REPLACE ";" ", " _kda_names_s "${_kda_names}")
      string(REPLACE ";" ", " _kda_old_s "${_kda_old}")
      if(_kda_archs STREQUAL "")
        set(KDA_WITH_CUDA OFF)
        string(CONCAT _kda_reason "the GPUs here, ${_kda_old_s}, are older than sm_90, which the CUDA "
                              "kernels need (KDA_CUDA_ARCHS builds for other GPUs)")
      else()
        set(_kda_source "detected: ${_kda_names_s}")
        if(NOT _kda_old_s STREQUAL "")
          message(STATUS "kda-decode: not building for ${_kda_old_s} (older than sm_90)")
        endif()
        # What the driver can run: nvidia-smi's header names the newest CUDA version the
        # driver supports. A toolkit of a newer major version makes binaries it cannot load.
        execute_process(COMMAND "${_kda_smi}" RESULT_VARIABLE _kda_rc2 OUTPUT_VARIABLE _kda_smi_head
                        ERROR_QUIET TIMEOUT 30)
        if(_kda_smi_head MATCHES "CUDA Version: *([0-9]+)\\.([0-9]+)")
          set(_kda_drv_cuda "${CMAKE_MATCH_1}.${CMAKE_MATCH_2}")
          if(CMAKE_MATCH_1 LESS _kda_nvcc_major)
            message(FATAL_ERROR
              "kda-decode: the CUDA toolkit and the driver disagree: nvcc ${CMAKE_CUDA_COMPILER_VERSION} "
              "(${CMAKE_CUDA_COMPILER}) builds CUDA ${_kda_toolkit} binaries, but the NVIDIA driver "
              "${_kda_driver} supports CUDA up to ${_kda_drv_cuda}, so the CUDA backend could not load on this "
              "machine. Update the driver, use a CUDA ${CMAKE_MATCH_1}.x toolkit (CUDACXX=/path/to/nvcc), "
              "build the CPU backend alone (KDA_CPU_ONLY=1), or set KDA_CUDA_ARCHS to build for other machines.")
          elseif(_kda_drv_cuda VERSION_LESS _kda_toolkit)
            message(STATUS "kda-decode: nvcc ${_kda_toolkit} is newer than the driver's CUDA ${_kda_drv_cuda} "
                           "(same major version: minor-version compatibility applies)")
          endif()
        endif()
      endif()
    endif()
  endif()

  if(KDA_WITH_CUDA)
    foreach(arch IN LISTS _kda_archs)
      _kda_min_nvcc("${arch}" _need)
      if(NOT _need STREQUAL "" AND CMAKE_CUDA_COMPILER_VERSION VERSION_LESS _need)
        if(_kda_detected)
          message(FATAL_ERROR
            "kda-decode: the GPU here needs sm_${arch}, which nvcc ${CMAKE_CUDA_COMPILER_VERSION} "
            "(${CMAKE_CUDA_COMPILER}) cannot build (nvcc ${_need} or newer can). Install a newer CUDA toolkit "
            "(CUDACXX=/path/to/nvcc), build the CPU backend alone (KDA_CPU_ONLY=1), or set KDA_CUDA_ARCHS.")
        endif()
        message(STATUS "kda-decode: nvcc ${CMAKE_CUDA_COMPILER_VERSION} cannot build sm_${arch} "
                       "(needs ${_need}), skipped")
        continue()
      endif()
      list(APPEND KDA_CUDA_ARCHS_BUILT "${arch}")
      list(APPEND KDA_GENCODE "-gencode=arch=compute_${arch},code=sm_${arch}")
    endforeach()
    if(KDA_CUDA_ARCHS_BUILT STREQUAL "")
      message(FATAL_ERROR "kda-decode: nvcc ${CMAKE_CUDA_COMPILER_VERSION} can build none of the CUDA archs "
                          "'${_kda_archs}' (${_kda_source}); set KDA_CUDA_ARCHS or KDA_CPU_ONLY=1")
    endif()
  endif()
elseif(KDA_CPU_ONLY)
  set(_kda_reason "KDA_CPU_ONLY was set")
else()
  string(CONCAT _kda_reason "no CUDA compiler (nvcc) was found at build time: put the CUDA toolkit's "
                            "bin folder on PATH or set CUDACXX")
endif()

if(KDA_WITH_CUDA)
  string(REPLACE ";" ", sm_" _kda_built_s "${KDA_CUDA_ARCHS_BUILT}")
  message(STATUS "kda-decode: building the CUDA backend for sm_${_kda_built_s} (${_kda_source}; nvcc "
                 "${CMAKE_CUDA_COMPILER_VERSION})")
  message(STATUS "kda-decode: CUDA targets ${KDA_GENCODE}")
else()
  message(STATUS "kda-decode: building the CPU backend alone: ${_kda_reason}")
endif()

# The build facts, for kda_decode.build_info() (python -m kda_decode.build_info).
if(KDA_WITH_CUDA)
  set(_KDA_PY_CUDA True)
else()
  set(_KDA_PY_CUDA False)
  set(_kda_toolkit "")
endif()
set(_KDA_PY_ARCHS "")
foreach(arch IN LISTS KDA_CUDA_ARCHS_BUILT)
  string(APPEND _KDA_PY_ARCHS "\"${arch}\", ")
endforeach()
string(REPLACE "\"" "'" _KDA_PY_SOURCE "${_kda_source}")
string(REPLACE "\"" "'" _KDA_PY_REASON "${_kda_reason}")
set(_KDA_PY_TOOLKIT "${_kda_toolkit}")
configure_file("${CMAKE_CURRENT_LIST_DIR}/kda_build_config.py.in" "${CMAKE_CURRENT_BINARY_DIR}/kda_build_config.py"
               @ONLY)
