# Compile settings of the fuzzing build (GRAPHOPT_FUZZ=ON; docs/Robustness.md, "Fuzzing").
# Included from the top-level CMakeLists.txt before the dependencies are found, so that every
# project library is compiled with the same instrumentation.
#
# - clang only: libFuzzer (-fsanitize=fuzzer) is a clang feature (Debian: clang-14 and
#   libclang-rt-14-dev, which holds libclang_rt.fuzzer).
# - The project's code is instrumented for coverage (fuzzer-no-link), ASan and UBSan; only the
#   harness executables link libFuzzer's main (-fsanitize=fuzzer, fuzz/CMakeLists.txt).
# - vptr is off: LibTorch is built with gcc and its classes lack the RTTI the vptr check needs.
# - No recovery: any UBSan report aborts, so that libFuzzer records it as a crash.
# - LibTorch, LLVM and abseil are the distribution's gcc builds; clang links them through
#   libstdc++ as gcc does (torch's wheel uses the default _GLIBCXX_USE_CXX11_ABI=1).
# - -O1 with line tables: fast enough to fuzz, symbolised stacks, and assert() stays on
#   (no NDEBUG): a failed assertion is a bug the fuzzers should see.
# - fuzz/coverage-ignorelist.txt: nlohmann's JSON parser and the standard library's templates get
#   no coverage instrumentation (still ASan and UBSan): a .pt2 input of the zoo takes 35-45% less
#   time (cnn-train, 130 KB of model JSON: 62 -> 40 ms; mlp-eval 7.2 -> 3.9 ms).
if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "GRAPHOPT_FUZZ=ON needs clang (configure with CC=clang CXX=clang++); "
                      "CMAKE_CXX_COMPILER_ID is ${CMAKE_CXX_COMPILER_ID}")
endif()
set(GRAPHOPT_SANITIZERS "address,undefined" CACHE STRING
    "Sanitizers of the fuzzing build (besides fuzzer coverage)")
set(GRAPHOPT_FUZZ_OPT_FLAGS "-O1 -gline-tables-only" CACHE STRING
    "Optimisation and debug flags of the fuzzing build (no -DNDEBUG: asserts stay on)")
foreach(_cfg RELWITHDEBINFO RELEASE DEBUG MINSIZEREL)
  set(CMAKE_CXX_FLAGS_${_cfg} "${GRAPHOPT_FUZZ_OPT_FLAGS}")
  set(CMAKE_C_FLAGS_${_cfg} "${GRAPHOPT_FUZZ_OPT_FLAGS}")
endforeach()
# GRAPHOPT_SANITIZERS empty: coverage only, no sanitizers (make fuzz-long's release build).
if(GRAPHOPT_SANITIZERS STREQUAL "")
  set(_fuzz_sanitize "fuzzer-no-link")
else()
  set(_fuzz_sanitize "fuzzer-no-link,${GRAPHOPT_SANITIZERS}")
  add_link_options(-fsanitize=${GRAPHOPT_SANITIZERS} -fno-sanitize=vptr)
endif()
add_compile_options(
  $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${_fuzz_sanitize}>
  $<$<COMPILE_LANGUAGE:CXX>:-fno-sanitize=vptr>
  $<$<COMPILE_LANGUAGE:CXX>:-fno-sanitize-recover=all>
  $<$<COMPILE_LANGUAGE:CXX>:-fno-omit-frame-pointer>
  $<$<COMPILE_LANGUAGE:CXX>:-fsanitize-coverage-ignorelist=${CMAKE_CURRENT_LIST_DIR}/coverage-ignorelist.txt>)
