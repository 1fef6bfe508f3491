# Turns a .cu file into C++ for the CUDA-on-CPU runtime, line for line:
#   k<<<grid, block[, shared[, stream]]>>>(args);
#     -> ::cuda_on_cpu::launcher(k, "k", __FILE__, __LINE__, grid, block...) CUDA_ON_CPU_ARGS(args);
#   __shared__ T a[N], b[M];
#     -> auto& a = ::cuda_on_cpu::shared<T[N]>([]{}, "a", __FILE__, __LINE__); auto& b = ...;
# and starts it with #line, so compiler errors and the runtime's messages
# name the .cu file's own lines. Fails when the counts of "<<<" and ">>>("
# differ (a launch it could not rewrite) or a __shared__ declaration does not
# parse. Usage: cmake -DIN=a.cu -DOUT=a.cu.cpp -P rewrite_cu.cmake
cmake_minimum_required(VERSION 3.25)
if(NOT IN OR NOT OUT)
  message(FATAL_ERROR "rewrite_cu.cmake: pass -DIN=<file.cu> -DOUT=<file.cpp>")
endif()
file(READ "${IN}" src)

# --- launches ---------------------------------------------------------------
string(REGEX MATCHALL "<<<" opens "${src}")
string(REGEX MATCHALL ">>>[ \t\r\n]*\\(" closes "${src}")
list(LENGTH opens n_open)
list(LENGTH closes n_close)
if(NOT n_open EQUAL n_close)
  message(FATAL_ERROR "rewrite_cu.cmake: ${IN} has ${n_open} '<<<' but ${n_close} '>>>(': a launch is not of the form k<<<cfg>>>(args)")
endif()
# The kernel: an identifier, optionally qualified, with at most one level of
# template arguments; the configuration: everything up to ">>>(" (no ';').
string(REGEX REPLACE
  "([A-Za-z_][A-Za-z0-9_:]*(<[^<>;{}]*>)?)<<<([^;]*)>>>[ \t]*\\("
  "::cuda_on_cpu::launcher(\\1, \"\\1\", __FILE__, __LINE__, \\3) CUDA_ON_CPU_ARGS("
  src "${src}")
string(FIND "${src}" "<<<" left)
if(NOT left EQUAL -1)
  message(FATAL_ERROR "rewrite_cu.cmake: ${IN}: a '<<<' launch was not rewritten (kernel name not an identifier with simple template arguments?)")
endif()

# --- __shared__ declarations ---------------------------------------------------
set(out "")
set(rest "${src}")
while(TRUE)
  string(FIND "${rest}" "__shared__" pos)
  if(pos EQUAL -1)
    break()
  endif()
  string(SUBSTRING "${rest}" 0 ${pos} head)
  string(APPEND out "${head}")
  string(SUBSTRING "${rest}" ${pos} -1 rest)
  string(FIND "${rest}" ";" end)
  if(end EQUAL -1)
    message(FATAL_ERROR "rewrite_cu.cmake: ${IN}: a __shared__ declaration has no ';'")
  endif()
  string(SUBSTRING "${rest}" 0 ${end} decl)
  math(EXPR after "${end} + 1")
  string(SUBSTRING "${rest}" ${after} -1 rest)
  # Keep the line count: as many newlines as the declaration had.
  string(REGEX MATCHALL "\n" newlines "${decl}")
  string(REGEX REPLACE "[\r\n]" " " decl "${decl}")
  if(NOT decl MATCHES "^__shared__[ \t]+([A-Za-z_][A-Za-z0-9_: \t]*[ \t*])([A-Za-z_][A-Za-z0-9_]*[ \t]*(\\[[^]]*\\][ \t]*)*(,.*)?)$")
    message(FATAL_ERROR "rewrite_cu.cmake: ${IN}: cannot read the __shared__ declaration '${decl}' (write it as '__shared__ T a[N], b[M];')")
  endif()
  string(STRIP "${CMAKE_MATCH_1}" type)
  set(declarators "${CMAKE_MATCH_2}")
  string(REPLACE "," ";" declarators "${declarators}")
  foreach(d IN LISTS declarators)
    if(NOT d MATCHES "^[ \t]*([A-Za-z_][A-Za-z0-9_]*)[ \t]*((\\[[^]]*\\][ \t]*)*)$")
      message(FATAL_ERROR "rewrite_cu.cmake: ${IN}: cannot read the __shared__ declarator '${d}'")
    endif()
    set(name "${CMAKE_MATCH_1}")
    string(STRIP "${CMAKE_MATCH_2}" dims)
    string(APPEND out "auto& ${name} = ::cuda_on_cpu::shared<${type}${dims}>([] {}, \"${name}\", __FILE__, __LINE__); ")
  endforeach()
  foreach(nl IN LISTS newlines)
    string(APPEND out "\n")
  endforeach()
endwhile()
string(APPEND out "${rest}")

file(WRITE "${OUT}.tmp" "#line 1 \"${IN}\"\n${out}")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
