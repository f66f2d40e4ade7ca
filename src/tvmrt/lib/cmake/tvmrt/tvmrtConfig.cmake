# find_package(tvmrt): tvmrt's C runtime for C/C++ programs written against TVM's runtime
# headers. Point CMake here with -Dtvmrt_DIR=$(tvmrt config --cmakedir).
#
# Targets:  tvmrt::runtime         libtvmrt_runtime.so (the program finds it through its rpath)
#           tvmrt::runtime_static  libtvmrt_runtime.a (nothing to ship beside the program)
#           tvmrt::dlr             libdlr.so: the runtime with DLR 1.10's C API (dlr.h)
# Variables: tvmrt_INCLUDE_DIRS, tvmrt_LIBRARY, tvmrt_STATIC_LIBRARY, tvmrt_DLR_LIBRARY,
#            tvmrt_VERSION
#
# The library is looked for in the package's lib/ folder (an installed wheel), then in
# build/native/ of the source checkout the package lives in (after `make native`).

get_filename_component(_tvmrt_package "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
set(_tvmrt_lib_dirs "${_tvmrt_package}/lib" "${_tvmrt_package}/../../build/native")

set(tvmrt_VERSION "0.1.0")
set(tvmrt_INCLUDE_DIRS "${_tvmrt_package}/include")
find_library(tvmrt_LIBRARY NAMES tvmrt_runtime PATHS ${_tvmrt_lib_dirs} NO_DEFAULT_PATH)
find_library(tvmrt_STATIC_LIBRARY NAMES libtvmrt_runtime.a PATHS ${_tvmrt_lib_dirs}
             NO_DEFAULT_PATH)
find_library(tvmrt_DLR_LIBRARY NAMES dlr PATHS ${_tvmrt_lib_dirs} NO_DEFAULT_PATH)

if(NOT tvmrt_LIBRARY AND NOT tvmrt_STATIC_LIBRARY)
  set(tvmrt_FOUND FALSE)
  set(tvmrt_NOT_FOUND_MESSAGE
      "libtvmrt_runtime.so/.a not found in ${_tvmrt_lib_dirs}; install the tvmrt wheel, or "
      "run `make native` in the source checkout")
  return()
endif()

include(CMakeFindDependencyMacro)
set(THREADS_PREFER_PTHREAD_FLAG ON)
find_dependency(Threads)
set(_tvmrt_system_libs Threads::Threads ${CMAKE_DL_LIBS} m)

if(tvmrt_LIBRARY AND NOT TARGET tvmrt::runtime)
  add_library(tvmrt::runtime SHARED IMPORTED)
  set_target_properties(tvmrt::runtime PROPERTIES
    IMPORTED_LOCATION "${tvmrt_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${tvmrt_INCLUDE_DIRS}"
    INTERFACE_LINK_LIBRARIES "${_tvmrt_system_libs}")
endif()
if(tvmrt_STATIC_LIBRARY AND NOT TARGET tvmrt::runtime_static)
  add_library(tvmrt::runtime_static STATIC IMPORTED)
  set_target_properties(tvmrt::runtime_static PROPERTIES
    IMPORTED_LOCATION "${tvmrt_STATIC_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${tvmrt_INCLUDE_DIRS}"
    INTERFACE_LINK_LIBRARIES "${_tvmrt_system_libs}")
endif()
if(tvmrt_DLR_LIBRARY AND NOT TARGET tvmrt::dlr)
  add_library(tvmrt::dlr SHARED IMPORTED)
  set_target_properties(tvmrt::dlr PROPERTIES
    IMPORTED_LOCATION "${tvmrt_DLR_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${tvmrt_INCLUDE_DIRS}"
    INTERFACE_LINK_LIBRARIES "${_tvmrt_system_libs}")
endif()
set(tvmrt_FOUND TRUE)
