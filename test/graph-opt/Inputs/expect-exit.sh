#!/bin/sh
# Runs a command and fails unless it exits with exactly the expected code.
#   usage: expect-exit.sh CODE COMMAND [ARG...]
# The command's stdout and stderr pass through unchanged, so a lit RUN line can
# check both the exit code and the message:
#   RUN: sh %S/Inputs/expect-exit.sh 2 graph-opt %t/bad.gir 2>&1 | FileCheck %s
# (lit runs pipelines with pipefail, so a wrong exit code fails the RUN line).
if [ $# -lt 2 ]; then
  echo "expect-exit.sh: usage: expect-exit.sh CODE COMMAND [ARG...]" >&2
  exit 1
fi
expected=$1
shift
"$@"
actual=$?
if [ "$actual" -ne "$expected" ]; then
  echo "expect-exit.sh: expected exit code $expected, got $actual from: $*" >&2
  exit 1
fi
exit 0
