#!/bin/sh
# Stands in for graph-opt in the sweep's failure tests (--graph-opt this file): the batches
# from $FAKE_FROM on fail as $FAKE_FAIL says, the smaller ones run the real graph-opt (lit's
# PATH has this build's). The batch is read from the export's name (...-train-b<N>...pt2).
#   FAKE_FAIL=alloc  LibTorch's message for a failed CPU allocation, exit 2
#   FAKE_FAIL=kill   killed by SIGKILL, as the kernel's OOM killer does
#   FAKE_FAIL=error  another failure, exit 2
batch=0
for arg in "$@"; do
  case $arg in
    *.pt2) batch=$(basename "$arg" | sed -n 's/.*-train-b\([0-9][0-9]*\).*/\1/p') ;;
  esac
done
if [ "${batch:-0}" -ge "${FAKE_FROM:-1000000}" ]; then
  case ${FAKE_FAIL:-} in
    alloc)
      echo "graph-opt: error: node #12 addmm (aten::addmm) failed with inputs self=[64]: [enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to allocate 1125899906842624 bytes. Error code 12 (Cannot allocate memory)" >&2
      exit 2 ;;
    kill)
      kill -9 $$ ;;
    error)
      echo "graph-opt: error: node #3 t (aten::t) failed: something else went wrong" >&2
      exit 2 ;;
  esac
fi
exec graph-opt "$@"
