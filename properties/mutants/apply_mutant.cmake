# Writes OUT: a copy of the shipped source SRC with the patch of mutant MUTANT (mutants/<MUTANT>.cmake
# sets FROM and TO) applied. Fails if the patch no longer applies, so that a refactor never
# turns a mutant silently into the original.
# MUTANT_DIR: where <MUTANT>.cmake lives (default: next to this script).
if(NOT MUTANT_DIR)
  set(MUTANT_DIR ${CMAKE_CURRENT_LIST_DIR})
endif()
include(${MUTANT_DIR}/${MUTANT}.cmake)
file(READ "${SRC}" text)
string(FIND "${text}" "${FROM}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "mutant ${MUTANT}: its patch does not apply to ${SRC} any more")
endif()
string(REPLACE "${FROM}" "${TO}" mutated "${text}")
file(WRITE "${OUT}" "${mutated}")
