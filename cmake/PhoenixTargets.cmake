# Interface targets every phoenix target links: one for options (sanitizers), one for warnings.
add_library(phoenix_options INTERFACE)
add_library(phoenix_warnings INTERFACE)

target_compile_options(phoenix_warnings INTERFACE -Wall -Wextra -Wshadow -Wpedantic $<$<COMPILE_LANGUAGE:CXX>:-Wnon-virtual-dtor>)
# GCC 12 at -O3 reports false -Wrestrict overlaps inside std::string's operator+ (GCC bug 105329).
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 12
   AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(phoenix_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Wno-restrict>)
endif()
if(PHOENIX_WERROR)
  target_compile_options(phoenix_warnings INTERFACE -Werror)
endif()

if(PHOENIX_SANITIZER STREQUAL "address")
  target_compile_options(phoenix_options INTERFACE -fsanitize=address,undefined -fno-omit-frame-pointer
                                                   -fno-sanitize-recover=undefined)
  target_link_options(phoenix_options INTERFACE -fsanitize=address,undefined)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # GCC's null, alignment and pointer-overflow checks at every dereference took a third of the ASan build's
    # compile time. ASan reports a null dereference itself (SEGV), and the fuzz harnesses (clang) keep every
    # check on the code that reads the network's bytes.
    target_compile_options(phoenix_options INTERFACE -fno-sanitize=null,alignment,pointer-overflow)
  endif()
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    # clang links a C program with the C half of UBSan's runtime only; libphoenix's C++ code needs the other.
    target_link_options(phoenix_options INTERFACE $<$<LINK_LANGUAGE:C>:-fsanitize-link-c++-runtime>)
    target_link_libraries(phoenix_options INTERFACE $<$<LINK_LANGUAGE:C>:stdc++>)
  endif()
elseif(PHOENIX_SANITIZER STREQUAL "thread")
  # -Wno-tsan: Asio's fenced blocks use atomic_thread_fence, which TSan does not model; its scheduler's
  # mutex already orders handler data between threads.
  target_compile_options(phoenix_options INTERFACE -fsanitize=thread -fno-omit-frame-pointer -Wno-tsan)
  target_link_options(phoenix_options INTERFACE -fsanitize=thread)
elseif(PHOENIX_BUILD_FUZZ)
  # Coverage for libFuzzer in the libraries too, not only in the harness.
  target_compile_options(phoenix_options INTERFACE -fsanitize=fuzzer-no-link,address,undefined)
  target_link_options(phoenix_options INTERFACE -fsanitize=address,undefined)
elseif(NOT PHOENIX_SANITIZER STREQUAL "none")
  message(FATAL_ERROR "PHOENIX_SANITIZER must be none, address or thread, not '${PHOENIX_SANITIZER}'")
endif()

# phoenix_module(NAME SOURCES...) — one library per folder, aliased phoenix::NAME.
function(phoenix_internal_library name)
  add_library(phoenix_${name} STATIC ${ARGN})
  add_library(phoenix::${name} ALIAS phoenix_${name})
  target_include_directories(phoenix_${name} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>)
  target_link_libraries(phoenix_${name} PUBLIC $<BUILD_INTERFACE:phoenix_options>
                                        PRIVATE $<BUILD_INTERFACE:phoenix_warnings>)
  set_target_properties(phoenix_${name} PROPERTIES CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
endfunction()
