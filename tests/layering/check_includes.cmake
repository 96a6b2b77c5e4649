# tests/layering/check_includes.cmake — includes point down only: base/ below overlay/ below migration/ and
# phoenix/. Run with -DSOURCE_DIR=<the source tree>; fails naming every include that points up.
#
# Each folder's forbidden includes, as a regular expression over what follows "#include ". Of phoenix's public
# headers (<phoenix/...>), the layers below phoenix/ may include only base's own.
set(base_public "<phoenix/(bytes\\.hpp|interval\\.hpp|visibility\\.h)>")
set(forbidden_in_base "\"(overlay|migration|phoenix|apps)/|<phoenix/")
set(forbidden_in_overlay "\"(migration|phoenix|apps)/|<phoenix/")
# Inside overlay/, the nouns point down too: links know nothing of transports, routing or forwarding, transports
# only the connection they make, and none of them the overlay that wires them together.
set(forbidden_in_overlay_links "${forbidden_in_overlay}|\"overlay/(overlay\\.hpp|transports/|routing/|forwarding/)")
set(forbidden_in_overlay_transports "${forbidden_in_overlay}|\"overlay/(overlay\\.hpp|routing/|forwarding/)")
set(forbidden_in_overlay_routing "${forbidden_in_overlay}|\"overlay/(overlay\\.hpp|links/|transports/|forwarding/|packet)")
set(forbidden_in_overlay_forwarding "${forbidden_in_overlay}|\"overlay/(overlay\\.hpp|links/|transports/|routing/)")
set(forbidden_in_migration "\"(overlay|phoenix|apps)/|<phoenix/")  # the protocol links base alone
set(forbidden_in_phoenix "\"apps/")

set(violations "")
foreach(folder IN ITEMS base overlay overlay/links overlay/transports overlay/routing overlay/forwarding migration
                        phoenix)
  string(REPLACE "/" "_" key "${folder}")
  set(forbidden "${forbidden_in_${key}}")
  file(GLOB_RECURSE sources "${SOURCE_DIR}/${folder}/*.hpp" "${SOURCE_DIR}/${folder}/*.cpp"
                            "${SOURCE_DIR}/${folder}/*.h")
  foreach(source IN LISTS sources)
    file(STRINGS "${source}" includes REGEX "^#include ")
    foreach(line IN LISTS includes)
      if(line MATCHES "^#include (${forbidden})" AND NOT line MATCHES "^#include ${base_public}")
        file(RELATIVE_PATH rel "${SOURCE_DIR}" "${source}")
        string(APPEND violations "\n  ${rel}: ${line}")
      endif()
    endforeach()
  endforeach()
endforeach()
if(violations)
  message(FATAL_ERROR "includes that point up a layer:${violations}")
endif()
message(STATUS "every include of base/, overlay/ (and its nouns), migration/ and phoenix/ points down")
