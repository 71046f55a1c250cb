# The sanitizer build (GRAPHOPT_SANITIZE=ON; `make sanitize` uses build-sanitize/): every
# target, tests included, compiled and linked with AddressSanitizer and UndefinedBehaviorSanitizer
# by the project's usual compiler (gcc). Included before the dependencies are found.
#
# - vptr is off: LibTorch's classes, built without the RTTI the check needs in this build,
#   would be reported on every virtual call into them.
# - UBSan does not recover: a report aborts the test that caused it, so it fails.
# - Frame pointers kept, for ASan's stacks.
# What the run needs at run time (ASAN_OPTIONS, UBSAN_OPTIONS) is set by `make sanitize`
# (docs/Robustness.md, "Sanitizer build").
set(GRAPHOPT_SANITIZE_FLAGS -fsanitize=address,undefined -fno-sanitize=vptr
    -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
add_compile_options(${GRAPHOPT_SANITIZE_FLAGS})
add_link_options(-fsanitize=address,undefined -fno-sanitize=vptr)
