# A program's standard output written to a file, for build steps (add_custom_command cannot
# redirect): written beside the target and renamed into place, so that an interrupted or failed
# run leaves no half-written file that the build would take as up to date.
#   cmake -DPROGRAM=... "-DARGS=a;b" -DOUT=file -P run_to_file.cmake
execute_process(COMMAND "${PROGRAM}" ${ARGS} OUTPUT_FILE "${OUT}.tmp" ERROR_VARIABLE error RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  file(REMOVE "${OUT}.tmp")
  message(FATAL_ERROR "'${PROGRAM} ${ARGS}' failed (${rc}): ${error}")
endif()
file(RENAME "${OUT}.tmp" "${OUT}")
