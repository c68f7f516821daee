# Runs the property program BIN (with the environment ctest set) and succeeds only if some property
# was falsified: the mutant is caught. A crash or an error without a falsified property fails.
execute_process(COMMAND "${BIN}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "mutant survived: every property passed\n${out}")
endif()
if(NOT out MATCHES "Falsifiable after")
  message(FATAL_ERROR "the program failed (${rc}) without a falsified property\n${out}\n${err}")
endif()
string(REGEX MATCH "\\[  FAILED  \\] [A-Za-z]+\\.[A-Za-z]+" first "${out}")
message(STATUS "caught: ${first}")
