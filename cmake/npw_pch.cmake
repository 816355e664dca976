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

# Makes `target` reuse the header of `owner`, creating the owner (of the target's kind, linking
# LIBS, precompiling HEADERS) the first time it is asked for.
function(npw_share_pch target owner)
  cmake_parse_arguments(PCH "" "" "LIBS;HEADERS" ${ARGN})
  if(NOT NPW_PCH)
    return()
  endif()
  if(NOT TARGET ${owner})
    npw_target_kind(${target} kind)
    npw_pch_owner(${owner} ${kind} ${PCH_LIBS})
    target_precompile_headers(${owner} PRIVATE ${PCH_HEADERS})
  endif()
  target_precompile_headers(${target} REUSE_FROM ${owner})
  target_compile_options(${target} PRIVATE -Winvalid-pch)
endfunction()

# Core's torch-using layers and the command line.
function(npw_use_torch_pch target)
  npw_target_kind(${target} kind)
  npw_share_pch(${target} npw_pch_torch_${kind}
    LIBS ${TORCH_LIBRARIES} nlohmann_json::nlohmann_json
    HEADERS <ATen/ATen.h> <nlohmann/json.hpp> <string> <vector> <memory> <functional> <algorithm> <map>)
endfunction()

# The Qt Test suites: ATen and Qt Test (Qt6::Core + Qt6::Test, as most suites link).
function(npw_use_test_pch target)
  npw_share_pch(${target} npw_pch_test
    LIBS ${TORCH_LIBRARIES} nlohmann_json::nlohmann_json Qt6::Core Qt6::Test
    HEADERS <ATen/ATen.h> <nlohmann/json.hpp> <QtTest/QtTest> <QObject> <QString> <string> <vector> <memory>
            <functional> <algorithm> <map>)
endfunction()

# The Qt Widgets side (npwwidgets, npwstudio and the tst_widgets*/tst_studio* suites): ATen,
# Qt Widgets and QCustomPlot, ~4 s of headers in each of their ~35 files; the suites' header adds
# Qt Test. Its owner links what npwwidgets links; npwstudio's extra QT_CONCURRENT_LIB appears in
# no header, so GCC accepts the header there too (-Winvalid-pch would say otherwise).
function(npw_use_widgets_pch target)
  set(libs ${TORCH_LIBRARIES} nlohmann_json::nlohmann_json Qt6::Widgets Qt6::PrintSupport Qt6::Svg
      QCustomPlotQt6::QCustomPlotQt6)
  set(headers <ATen/ATen.h> <nlohmann/json.hpp> <QtWidgets/QtWidgets> <qcustomplot.h> <string> <vector>
      <memory> <functional> <algorithm> <map> <cmath>)
  npw_target_kind(${target} kind)
  if(kind STREQUAL "EXECUTABLE")  # the test suites
    npw_share_pch(${target} npw_pch_widgets_test LIBS ${libs} Qt6::Test HEADERS ${headers} <QtTest/QtTest>)
  else()
    npw_share_pch(${target} npw_pch_widgets_LIBRARY LIBS ${libs} HEADERS ${headers})
  endif()
endfunction()

# AUTOMOC's mocs_compilation.cpp is empty for a target whose sources include their own .moc
# (every test suite): a precompiled header force-included there costs ~2.5 s of loading for an
# empty file, 44 times in a build.
function(npw_skip_pch_in_moc_file target)
  set_source_files_properties(${CMAKE_CURRENT_BINARY_DIR}/${target}_autogen/mocs_compilation.cpp
                              TARGET_DIRECTORY ${target} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
endfunction()
