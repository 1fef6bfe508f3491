# Compiler launcher of strata_kernels_cuda (see kernels/CMakeLists.txt):
#   cmake -P check_resources.cmake -- <nvcc command line>
# Runs the compile with --resource-usage and fails it when ptxas reports, for
# any architecture compiled, a function that spills registers to local memory
# or a kernel with more static shared memory than a block may have (48 KiB on
# every architecture, without a dynamic-shared-memory opt-in). ptxas alone
# rejects both (with -Xptxas --warn-on-spills and --Werror=all-warnings), but
# with mangled names, hex sizes and no architecture; this says which kernel,
# which sm_XX and how many bytes. The ptxas info lines are not shown, so a
# clean compile stays silent; everything else nvcc prints is passed on.
set(smem_limit 49152)

set(cmd "")
set(src "")
set(prev "")
set(after_dashes OFF)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE ${last})
  if(after_dashes)
    list(APPEND cmd "${CMAKE_ARGV${i}}")
    if(prev STREQUAL "-c")
      set(src "${CMAKE_ARGV${i}}")
    endif()
    set(prev "${CMAKE_ARGV${i}}")
  elseif("${CMAKE_ARGV${i}}" STREQUAL "--")
    set(after_dashes ON)
  endif()
endforeach()
if(NOT cmd)
  message(FATAL_ERROR "usage: cmake -P check_resources.cmake -- <nvcc command line>")
endif()

execute_process(COMMAND ${cmd} --resource-usage RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)

# Lines in the order ptxas prints them: per architecture, each entry function
# ("Compiling entry function", its "Function properties" and "Used" lines),
# then the properties of non-inlined device functions.
string(REGEX MATCHALL "ptxas info    : (Compiling entry function '[^'\n]*' for '[^'\n]*'|Function properties for [^\n]*\n *[0-9]+ bytes stack frame, [0-9]+ bytes spill stores, [0-9]+ bytes spill loads|Used [0-9]+ registers[^\n]*)"
       infos "${out}")
find_program(STRATA_CXXFILT c++filt)
set(problems "")
set(arch "?")
set(fn "?")
foreach(line IN LISTS infos)
  if(line MATCHES "Compiling entry function '([^']*)' for '([^']*)'")
    set(fn "${CMAKE_MATCH_1}")
    set(arch "${CMAKE_MATCH_2}")
    set(what "kernel")
    continue()
  elseif(line MATCHES "Function properties for ([^\n]*)\n *[0-9]+ bytes stack frame, ([0-9]+) bytes spill stores, ([0-9]+) bytes spill loads")
    if(CMAKE_MATCH_1 STREQUAL fn)
      set(what "kernel")
    else()
      set(what "device function")
    endif()
    set(name "${CMAKE_MATCH_1}")
    set(stores ${CMAKE_MATCH_2})
    set(loads ${CMAKE_MATCH_3})
    if(stores EQUAL 0 AND loads EQUAL 0)
      continue()
    endif()
    set(issue "spills registers to local memory: ${stores} bytes spill stores, ${loads} bytes spill loads")
  elseif(line MATCHES "Used ([0-9]+) registers")
    set(name "${fn}")
    set(smem 0)
    if(line MATCHES ", ([0-9]+) bytes smem")
      set(smem ${CMAKE_MATCH_1})
    endif()
    if(smem LESS_EQUAL smem_limit)
      continue()
    endif()
    set(issue "uses ${smem} bytes of static shared memory, over the ${smem_limit}-byte (48 KiB) per-block limit")
  endif()
  set(pretty "${name}")
  if(STRATA_CXXFILT)
    execute_process(COMMAND ${STRATA_CXXFILT} "${name}" OUTPUT_VARIABLE pretty OUTPUT_STRIP_TRAILING_WHITESPACE)
  endif()
  string(APPEND problems "  ${arch}: ${what} ${pretty} ${issue}\n")
endforeach()

string(REGEX REPLACE "ptxas info    : Function properties for [^\n]*\n *[0-9]+ bytes stack frame[^\n]*\n" "" out "${out}")
string(REGEX REPLACE "ptxas info    : [^\n]*\n" "" out "${out}")
string(REGEX REPLACE "\n$" "" out "${out}")
if(NOT out STREQUAL "")
  message(NOTICE "${out}")
endif()
if(problems)
  string(REGEX REPLACE "\n$" "" problems "${problems}")
  message(FATAL_ERROR "Strata: ${src}: CUDA kernels must not spill registers nor use over "
                      "48 KiB of static shared memory on any architecture built:\n${problems}")
endif()
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "Strata: compiling ${src} failed (nvcc: ${rc})")
endif()
