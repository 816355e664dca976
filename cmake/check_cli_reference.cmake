# The CLI reference test (tests/CMakeLists.txt, cli_reference_current): the committed
# resources/manual/cli-reference.md must be what the built npw generates from its table of flags
# (`npw help --markdown`), so that the manual cannot drift from the program. On a difference it
# prints the diff and the command that regenerates the page, and fails.
#   cmake -DNPW=path/to/npw -DREFERENCE=resources/manual/cli-reference.md -DSCRATCH=file -P check_cli_reference.cmake
foreach(var NPW REFERENCE SCRATCH)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_cli_reference: -D${var}=... is required")
  endif()
endforeach()
execute_process(COMMAND "${NPW}" help --markdown OUTPUT_VARIABLE generated ERROR_VARIABLE error RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "'${NPW} help --markdown' failed (${rc}): ${error}")
endif()
set(regenerate "${NPW} help --markdown > ${REFERENCE}")
if(NOT EXISTS "${REFERENCE}")
  message(FATAL_ERROR "${REFERENCE} is missing: generate it with\n  ${regenerate}")
endif()
file(READ "${REFERENCE}" committed)
if(generated STREQUAL committed)
  message(STATUS "${REFERENCE} is what '${NPW} help --markdown' prints")
  return()
endif()
file(WRITE "${SCRATCH}" "${generated}")
find_program(DIFF diff)
if(DIFF)
  execute_process(COMMAND "${DIFF}" -u --label "${REFERENCE} (committed)" --label "npw help --markdown (generated)"
                          "${REFERENCE}" "${SCRATCH}")
endif()
message(FATAL_ERROR "${REFERENCE} differs from what the table of flags generates (the diff above: - committed, "
                    "+ generated). Regenerate it and commit the result:\n  ${regenerate}")
