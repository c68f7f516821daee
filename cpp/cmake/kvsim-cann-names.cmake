# Gives an unchanged CANN project's CMakeLists kvsim's libraries under the plain target names it
# links (llm_datadist, acl_rt, acl_rt_headers, ascend_hal, ascendcl), e.g. the official
# examples/cpp/CMakeLists.txt:
#   cmake -S examples/cpp -B build -DCMAKE_PROJECT_INCLUDE=<prefix>/lib/cmake/kvsim/kvsim-cann-names.cmake \
#         -DHIXL_CODE_DIR=<prefix> -DASCEND_INSTALL_PATH=<prefix>
# Names the project defines itself are left alone.
find_package(kvsim REQUIRED CONFIG PATHS "${CMAKE_CURRENT_LIST_DIR}" NO_DEFAULT_PATH)
foreach(_kvsim_name llm_datadist ascendcl acl_rt acl_rt_headers ascend_hal)
  if(NOT TARGET ${_kvsim_name})
    add_library(${_kvsim_name} INTERFACE IMPORTED)
    set_target_properties(${_kvsim_name} PROPERTIES INTERFACE_LINK_LIBRARIES kvsim::${_kvsim_name})
  endif()
endforeach()
unset(_kvsim_name)
