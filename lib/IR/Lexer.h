//===- Lexer.h - Tokens of the .gir text form (private to lib/IR) -*- C++ -*-===//
#pragma once

#include <llvm/ADT/StringRef.h>

#include <string>

namespace graphopt {

struct Token {
  enum Kind {
    Eof,
    Error,    ///< text holds the message
    Ident,    ///< graph, input, f32, aten::add.Tensor, cuda, true, None, ...
    ValueRef, ///< %name (text without the %)
    GlobalRef, ///< @name (text without the @)
    Int,
    Float,
    String,   ///< text holds the unescaped contents
    LBrace, RBrace, LParen, RParen, LBracket, RBracket,
    Comma, Colon, Equal, Question,
  };
  Kind kind = Eof;
  std::string text;
  unsigned line = 1, col = 1;
};

/// Splits a buffer into tokens; `#` starts a comment that runs to the end of the line.
class Lexer {
public:
  explicit Lexer(llvm::StringRef buffer) : buf_(buffer) {}
  Token next();
  /// The full text of line `line` (1-based), for error carets.
  llvm::StringRef lineText(unsigned line) const;

private:
  char peek(size_t ahead = 0) const { return pos_ + ahead < buf_.size() ? buf_[pos_ + ahead] : '\0'; }
  void advance();
  void skipSpaceAndComments();
  Token lexNumber(Token tok);
  Token lexString(Token tok);

  llvm::StringRef buf_;
  size_t pos_ = 0;
  unsigned line_ = 1, col_ = 1;
};

} // namespace graphopt
