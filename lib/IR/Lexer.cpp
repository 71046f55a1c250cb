//===- Lexer.cpp - Tokens of the .gir text form ---------------------------===//
#include "Lexer.h"

#include <cctype>

namespace graphopt {

namespace {
bool isIdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool isIdentChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
}
bool isDigit(char c) { return std::isdigit(static_cast<unsigned char>(c)); }
} // namespace

void Lexer::advance() {
  if (pos_ >= buf_.size())
    return;
  if (buf_[pos_] == '\n') {
    ++line_;
    col_ = 1;
  } else {
    ++col_;
  }
  ++pos_;
}

void Lexer::skipSpaceAndComments() {
  for (;;) {
    char c = peek();
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
      advance();
    } else if (c == '#') {
      while (peek() != '\n' && peek() != '\0')
        advance();
    } else {
      return;
    }
  }
}

llvm::StringRef Lexer::lineText(unsigned line) const {
  llvm::StringRef rest = buf_;
  for (unsigned i = 1; i < line && !rest.empty(); ++i)
    rest = rest.split('\n').second;
  return rest.split('\n').first.rtrim('\r');
}

Token Lexer::next() {
  skipSpaceAndComments();
  Token tok;
  tok.line = line_;
  tok.col = col_;
  char c = peek();
  if (c == '\0' && pos_ >= buf_.size()) {
    tok.kind = Token::Eof;
    return tok;
  }
  auto single = [&](Token::Kind k) {
    tok.kind = k;
    tok.text = std::string(1, c);
    advance();
    return tok;
  };
  switch (c) {
  case '{': return single(Token::LBrace);
  case '}': return single(Token::RBrace);
  case '(': return single(Token::LParen);
  case ')': return single(Token::RParen);
  case '[': return single(Token::LBracket);
  case ']': return single(Token::RBracket);
  case ',': return single(Token::Comma);
  case '=': return single(Token::Equal);
  case '?': return single(Token::Question);
  case ':': return single(Token::Colon);
  case '"': return lexString(tok);
  default: break;
  }
  if (c == '%' || c == '@') {
    advance();
    tok.kind = c == '%' ? Token::ValueRef : Token::GlobalRef;
    while (isIdentChar(peek()))
      tok.text.push_back(peek()), advance();
    if (tok.text.empty()) {
      tok.kind = Token::Error;
      tok.text = std::string("expected a name after '") + c + "'";
    }
    return tok;
  }
  if (isDigit(c) || (c == '-' && (isDigit(peek(1)) || peek(1) == 'i')))
    return lexNumber(tok);
  if (isIdentStart(c)) {
    tok.kind = Token::Ident;
    for (;;) {
      if (isIdentChar(peek())) {
        tok.text.push_back(peek());
        advance();
      } else if (peek() == ':' && peek(1) == ':' && isIdentStart(peek(2))) {
        tok.text += "::";
        advance();
        advance();
      } else {
        break;
      }
    }
    return tok;
  }
  tok.kind = Token::Error;
  tok.text = std::string("unexpected character '") + c + "'";
  advance();
  return tok;
}

Token Lexer::lexNumber(Token tok) {
  if (peek() == '-') {
    tok.text.push_back('-');
    advance();
    if (peek() == 'i') { // -inf
      while (std::isalpha(static_cast<unsigned char>(peek())))
        tok.text.push_back(peek()), advance();
      tok.kind = tok.text == "-inf" ? Token::Float : Token::Error;
      if (tok.kind == Token::Error)
        tok.text = "expected a number after '-'";
      return tok;
    }
  }
  tok.kind = Token::Int;
  while (isDigit(peek()))
    tok.text.push_back(peek()), advance();
  if (peek() == '.' && isDigit(peek(1))) {
    tok.kind = Token::Float;
    tok.text.push_back('.');
    advance();
    while (isDigit(peek()))
      tok.text.push_back(peek()), advance();
  }
  if ((peek() == 'e' || peek() == 'E') &&
      (isDigit(peek(1)) || ((peek(1) == '-' || peek(1) == '+') && isDigit(peek(2))))) {
    tok.kind = Token::Float;
    tok.text.push_back(peek());
    advance();
    if (peek() == '-' || peek() == '+')
      tok.text.push_back(peek()), advance();
    while (isDigit(peek()))
      tok.text.push_back(peek()), advance();
  }
  return tok;
}

Token Lexer::lexString(Token tok) {
  advance(); // opening quote
  tok.kind = Token::String;
  for (;;) {
    char c = peek();
    if (c == '\0' || c == '\n') {
      tok.kind = Token::Error;
      tok.text = "unterminated string";
      return tok;
    }
    advance();
    if (c == '"')
      return tok;
    if (c != '\\') {
      tok.text.push_back(c);
      continue;
    }
    char e = peek();
    advance();
    switch (e) {
    case 'n': tok.text.push_back('\n'); break;
    case 't': tok.text.push_back('\t'); break;
    case '"': tok.text.push_back('"'); break;
    case '\\': tok.text.push_back('\\'); break;
    case 'x': {
      std::string hex;
      for (int i = 0; i < 2 && std::isxdigit(static_cast<unsigned char>(peek())); ++i)
        hex.push_back(peek()), advance();
      if (hex.size() != 2) {
        tok.kind = Token::Error;
        tok.text = "expected two hex digits after \\x";
        return tok;
      }
      tok.text.push_back(static_cast<char>(std::stoi(hex, nullptr, 16)));
      break;
    }
    default:
      tok.kind = Token::Error;
      tok.text = std::string("unknown escape '\\") + e + "' in string";
      return tok;
    }
  }
}

} // namespace graphopt
