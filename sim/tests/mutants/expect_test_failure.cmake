# Runs the gtest program BIN and succeeds only if some test failed on an assertion: the mutant is
# caught. A crash, or an exit without a failed assertion, fails.
execute_process(COMMAND "${BIN}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "mutant survived: every test passed\n${out}")
endif()
if(NOT out MATCHES "Failure\n")
  message(FATAL_ERROR "the program failed (${rc}) without a failed assertion\n${out}\n${err}")
endif()
string(REGEX MATCHALL "\\[  FAILED  \\] [A-Za-z0-9/_]+\\.[A-Za-z0-9/_]+" caught "${out}")
list(REMOVE_DUPLICATES caught)
message(STATUS "caught by: ${caught}")
