//===- Exceptions.cpp -----------------------------------------------------===//
#include "graphopt/IR/Exceptions.h"

#include <c10/util/Exception.h>

#include <exception>
#include <new>

namespace graphopt {

std::string describeCurrentException() {
  try {
    throw;
  } catch (const c10::Error &e) {
    return e.what_without_backtrace();
  } catch (const std::bad_alloc &) {
    return "out of memory";
  } catch (const std::exception &e) {
    return e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

} // namespace graphopt
