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
# Appends to `violations` each include of `sources` that matches `forbidden` (base's public headers excepted).
function(check_includes forbidden)
  foreach(source IN LISTS ARGN)
    file(STRINGS "${source}" includes REGEX "^#include ")
    foreach(line IN LISTS includes)
      if(line MATCHES "^#include (${forbidden})" AND NOT line MATCHES "^#include ${base_public}")
        file(RELATIVE_PATH rel "${SOURCE_DIR}" "${source}")
        string(APPEND violations "\n  ${rel}: ${line}")
      endif()
    endforeach()
  endforeach()
  set(violations "${violations}" PARENT_SCOPE)
endfunction()

foreach(folder IN ITEMS base overlay overlay/links overlay/transports overlay/routing overlay/forwarding migration
                        phoenix)
  string(REPLACE "/" "_" key "${folder}")
  file(GLOB_RECURSE sources "${SOURCE_DIR}/${folder}/*.hpp" "${SOURCE_DIR}/${folder}/*.cpp"
                            "${SOURCE_DIR}/${folder}/*.h")
  check_includes("${forbidden_in_${key}}" ${sources})
endforeach()

# At the top of overlay/, the classes that run those nouns each wire only the ones before them: link_manager,
# routing_driver, forwarder, departure, and the overlay facade over all.
set(overlay_drivers link_manager routing_driver forwarder departure overlay)
list(LENGTH overlay_drivers count)
foreach(index RANGE 0 ${count})
  math(EXPR next "${index} + 1")
  if(next GREATER_EQUAL count)
    break()
  endif()
  list(GET overlay_drivers ${index} driver)
  list(SUBLIST overlay_drivers ${next} -1 above)
  list(JOIN above "|" above)
  check_includes("\"overlay/(${above})\\.hpp\"" "${SOURCE_DIR}/overlay/${driver}.hpp"
                 "${SOURCE_DIR}/overlay/${driver}.cpp")
endforeach()

if(violations)
  message(FATAL_ERROR "includes that point up a layer:${violations}")
endif()
message(STATUS "every include of base/, overlay/ (its nouns and drivers), migration/ and phoenix/ points down")
