# tests/layering/check_includes.cmake — includes point down only: base/ below overlay/ below migration/ and
# phoenix/. Run with -DSOURCE_DIR=<the source tree>; fails naming every include that points up.
# base/        includes only base/ (its public headers are <phoenix/bytes.hpp> and <phoenix/visibility.h>);
# overlay/     nothing from migration/, phoenix/ or apps/, and of phoenix's public headers only base's;
# migration/   nothing from overlay/, phoenix/ or apps/ (the protocol links base alone);
# phoenix/     nothing from apps/.
set(base_public "phoenix/(bytes\\.hpp|visibility\\.h)")
set(rules
  "base|\"(overlay|migration|phoenix|apps)/|<phoenix/"
  "overlay|\"(migration|phoenix|apps)/|<phoenix/"
  "migration|\"(overlay|phoenix|apps)/|<phoenix/"
  "phoenix|\"apps/")
set(violations "")
foreach(rule IN LISTS rules)
  string(REPLACE "|" ";" parts "${rule}")
  list(GET parts 0 folder)
  list(SUBLIST parts 1 -1 alternatives)
  list(JOIN alternatives "|" forbidden)
  file(GLOB_RECURSE sources "${SOURCE_DIR}/${folder}/*.hpp" "${SOURCE_DIR}/${folder}/*.cpp"
                            "${SOURCE_DIR}/${folder}/*.h")
  foreach(source IN LISTS sources)
    file(STRINGS "${source}" includes REGEX "^#include ")
    foreach(line IN LISTS includes)
      if(line MATCHES "#include (${forbidden})" AND NOT line MATCHES "#include <${base_public}>")
        file(RELATIVE_PATH rel "${SOURCE_DIR}" "${source}")
        string(APPEND violations "\n  ${rel}: ${line}")
      endif()
    endforeach()
  endforeach()
endforeach()
if(violations)
  message(FATAL_ERROR "includes that point up a layer:${violations}")
endif()
message(STATUS "every include of base/, overlay/, migration/ and phoenix/ points down")
