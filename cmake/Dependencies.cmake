# The project's dependencies, each for its job (see ../shared/DESIGN.md):
# LibTorch (IR operators, later execution), LLVM 14 (ADT, cl, json, FileCheck/lit),
# abseil (Status), GoogleTest and Google Benchmark.

# --- Python and LibTorch -------------------------------------------------------
# GRAPHOPT_PYTHON is the project's virtual environment (scripts/setup.sh); its torch
# wheel carries LibTorch and tells CMake where its config lives.
set(GRAPHOPT_PYTHON "" CACHE FILEPATH "Python of the project's virtual environment")
if(NOT GRAPHOPT_PYTHON AND SKBUILD)
  # pip install: the Python pip runs with, whose torch the extension is built against.
  foreach(_var Python_EXECUTABLE Python3_EXECUTABLE PYTHON_EXECUTABLE)
    if(${_var})
      set(GRAPHOPT_PYTHON "${${_var}}" CACHE FILEPATH "" FORCE)
      break()
    endif()
  endforeach()
endif()
if(NOT GRAPHOPT_PYTHON)
  execute_process(COMMAND ${CMAKE_SOURCE_DIR}/scripts/venv-dir.sh
                  OUTPUT_VARIABLE _venv OUTPUT_STRIP_TRAILING_WHITESPACE)
  set(GRAPHOPT_PYTHON "${_venv}/bin/python" CACHE FILEPATH "" FORCE)
endif()
if(NOT EXISTS "${GRAPHOPT_PYTHON}")
  message(FATAL_ERROR "GRAPHOPT_PYTHON=${GRAPHOPT_PYTHON} does not exist: run scripts/setup.sh "
                      "(or `make test`, which runs it) first")
endif()
execute_process(
  COMMAND ${GRAPHOPT_PYTHON} -c "import torch.utils; print(torch.utils.cmake_prefix_path)"
  OUTPUT_VARIABLE TORCH_CMAKE_PREFIX OUTPUT_STRIP_TRAILING_WHITESPACE
  RESULT_VARIABLE _torch_rc)
if(NOT _torch_rc EQUAL 0)
  message(FATAL_ERROR "${GRAPHOPT_PYTHON} cannot import torch: run scripts/setup.sh")
endif()
list(APPEND CMAKE_PREFIX_PATH ${TORCH_CMAKE_PREFIX})
# The wheel is the CUDA build: its config needs the CUDA toolkit (nvcc on PATH) to load,
# even though no GPU is needed to build or test. Name the architectures so it does not
# try to detect a GPU.
if(NOT DEFINED TORCH_CUDA_ARCH_LIST)
  set(TORCH_CUDA_ARCH_LIST "8.0;9.0")
endif()
find_package(Torch REQUIRED)
# The IR only needs the operator registry (libtorch_cpu) and c10; CUDA comes with the runtime.
set(GRAPHOPT_TORCH_LIBS torch_cpu c10)

# --- LLVM 14 -----------------------------------------------------------------------
# Include dirs and LLVM_DEFINITIONS only: `llvm-config --cxxflags` adds -fno-exceptions,
# which LibTorch cannot live with.
find_package(LLVM 14 REQUIRED CONFIG)
separate_arguments(GRAPHOPT_LLVM_DEFINITIONS NATIVE_COMMAND "${LLVM_DEFINITIONS}")
add_library(graphopt_llvm INTERFACE)
target_include_directories(graphopt_llvm SYSTEM INTERFACE ${LLVM_INCLUDE_DIRS})
target_compile_definitions(graphopt_llvm INTERFACE ${GRAPHOPT_LLVM_DEFINITIONS})
llvm_map_components_to_libnames(GRAPHOPT_LLVM_LIBS support)
target_link_libraries(graphopt_llvm INTERFACE ${GRAPHOPT_LLVM_LIBS})

# --- abseil, GoogleTest, Google Benchmark ----------------------------------------------
find_package(absl REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
if(NOT SKBUILD) # what the tests and benchmarks need; a pip install builds neither
  find_package(GTest REQUIRED)
  find_package(benchmark REQUIRED)
  find_package(Python3 REQUIRED COMPONENTS Interpreter)

  # Tools for lit tests: LLVM 14 ships FileCheck, not and split-file; lit.py sits in its
  # build tree on Debian.
  find_program(GRAPHOPT_FILECHECK FileCheck HINTS ${LLVM_TOOLS_BINARY_DIR} REQUIRED)
  find_program(GRAPHOPT_LIT lit.py llvm-lit lit
               HINTS ${LLVM_TOOLS_BINARY_DIR} ${LLVM_TOOLS_BINARY_DIR}/../build/utils/lit REQUIRED)
endif()

# Shared compile settings and the precompiled header of heavy LibTorch/LLVM headers.
add_library(graphopt_options INTERFACE)
target_compile_options(graphopt_options INTERFACE -Wall -Wextra -Wno-unused-parameter)
target_include_directories(graphopt_options INTERFACE ${CMAKE_SOURCE_DIR}/include)
