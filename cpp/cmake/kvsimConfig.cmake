# find_package(kvsim): kvsim's C++ libraries under the names CANN programs link.
#   kvsim::llm_datadist   libllm_datadist (llm_datadist/llm_datadist.h)
#   kvsim::ascendcl       libascendcl, the ACL runtime subset (acl/acl.h); kvsim::acl_rt is the
#                         same library under CANN's newer name
#   kvsim::acl_rt_headers the ACL headers alone
#   kvsim::ascend_hal     libascend_hal (nothing in it is called; link lines name it)
# Each carries the include directory. A program linked with them runs in a world of its own
# (KVSIM_SCENARIO or KVSIM_PRESET, default atlas-a2), or joins a launch's world under
# `kvsim launch`.
get_filename_component(_kvsim_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
set(kvsim_INCLUDE_DIR "${_kvsim_prefix}/include")
set(kvsim_LIBRARY_DIR "${_kvsim_prefix}/lib")

if(NOT TARGET kvsim::acl_rt_headers)
  add_library(kvsim::acl_rt_headers INTERFACE IMPORTED)
  set_target_properties(kvsim::acl_rt_headers PROPERTIES
                        INTERFACE_INCLUDE_DIRECTORIES "${kvsim_INCLUDE_DIR}")
endif()
foreach(_kvsim_lib llm_datadist ascendcl acl_rt ascend_hal)
  if(NOT TARGET kvsim::${_kvsim_lib})
    add_library(kvsim::${_kvsim_lib} SHARED IMPORTED)
    set_target_properties(kvsim::${_kvsim_lib} PROPERTIES
      IMPORTED_LOCATION "${kvsim_LIBRARY_DIR}/lib${_kvsim_lib}.so"
      IMPORTED_SONAME "lib${_kvsim_lib}.so"
      INTERFACE_INCLUDE_DIRECTORIES "${kvsim_INCLUDE_DIR}")
  endif()
endforeach()
unset(_kvsim_lib)
unset(_kvsim_prefix)
