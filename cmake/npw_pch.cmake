# Precompiled headers: LibTorch's ATen headers cost ~6 s in every file that includes them, and
# Qt Test's a few more, so two precompiled headers are built once each and reused by every
# target that compiles such files (target_precompile_headers REUSE_FROM). GCC ignores a
# precompiled header whose compile flags do not match (-Winvalid-pch says so) and then
# compiles the headers as usual: a mismatch costs time, never correctness. Libraries compile
# with -fPIC and executables with -fPIE, which GCC counts as different settings, so each header
# has an owner of each kind where both kinds use it.
# NPW_PCH=OFF turns them off (for tools that cannot read GCC's .gch files).
option(NPW_PCH "Precompile LibTorch and Qt Test headers" ON)
set(NPW_PCH_DIR ${CMAKE_CURRENT_LIST_DIR})

# An owner of the same kind (library or executable) as the targets that reuse its header.
function(npw_pch_owner name kind)
  if(kind STREQUAL "EXECUTABLE")
    add_executable(${name} ${NPW_PCH_DIR}/pch_owner_main.cpp)
  else()
    add_library(${name} OBJECT ${NPW_PCH_DIR}/pch_owner.cpp)
  endif()
  target_link_libraries(${name} PRIVATE ${ARGN})
  target_compile_options(${name} PRIVATE -Winvalid-pch)
endfunction()

function(npw_target_kind target out)
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "EXECUTABLE")
    set(${out} EXECUTABLE PARENT_SCOPE)
  else()
    set(${out} LIBRARY PARENT_SCOPE)
  endif()
endfunction()

# Core's torch-using layers.
function(npw_use_torch_pch target)
  if(NOT NPW_PCH)
    return()
  endif()
  npw_target_kind(${target} kind)
  set(owner npw_pch_torch_${kind})
  if(NOT TARGET ${owner})
    npw_pch_owner(${owner} ${kind} ${TORCH_LIBRARIES} nlohmann_json::nlohmann_json)
    target_precompile_headers(${owner} PRIVATE <ATen/ATen.h> <nlohmann/json.hpp> <string> <vector>
                              <memory> <functional> <algorithm> <map>)
  endif()
  target_precompile_headers(${target} REUSE_FROM ${owner})
  target_compile_options(${target} PRIVATE -Winvalid-pch)
endfunction()

# The Qt Test suites: ATen and Qt Test (Qt6::Core + Qt6::Test, as most suites link).
function(npw_use_test_pch target)
  if(NOT NPW_PCH)
    return()
  endif()
  if(NOT TARGET npw_pch_test)
    npw_pch_owner(npw_pch_test EXECUTABLE ${TORCH_LIBRARIES} nlohmann_json::nlohmann_json Qt6::Core Qt6::Test)
    target_precompile_headers(npw_pch_test PRIVATE <ATen/ATen.h> <nlohmann/json.hpp> <QtTest/QtTest> <QObject>
                              <QString> <string> <vector> <memory> <functional> <algorithm> <map>)
  endif()
  target_precompile_headers(${target} REUSE_FROM npw_pch_test)
  target_compile_options(${target} PRIVATE -Winvalid-pch)
endfunction()
