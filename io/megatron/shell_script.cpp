// The shell-subset reader (see shell_script.h). Two phases: a lexer turns
// the text into words (each a list of parts: literals, parameter
// expansions, arithmetic, opaque command substitutions) and separators;
// then statements are interpreted in order against a variable store, which
// is where expansion happens. Values are expanded eagerly at assignment, as
// bash does, so a variable can never refer to itself and no expansion can
// recurse; sizes are capped so nothing grows without bound.
#include "io/megatron/shell_script.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <deque>
#include <optional>
#include <set>
#include <type_traits>
#include <utility>

#include "costmodel/errors.h"

#include <fnmatch.h>
#include <regex.h>

namespace hapmoe {

const ShellWord* ShellScript::find(const std::string& name) const {
  const auto it = variables.find(name);
  if (it == variables.end() || it->second.empty() || !it->second.front().known) return nullptr;
  return &it->second.front();
}

std::string shell_quote(const std::string& text) {
  const bool bare = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 ||
           std::string_view("_./:=,+@%-").find(c) != std::string_view::npos;
  });
  if (bare) return text;
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

namespace {

bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }
bool is_valid_name(const std::string& s) {
  return !s.empty() && is_name_start(s[0]) && std::all_of(s.begin(), s.end(), is_name_char);
}

// An exit status as far as it is known before the script runs.
enum class Tri { kFalse, kTrue, kUnknown };
Tri tri(bool b) { return b ? Tri::kTrue : Tri::kFalse; }
Tri tri_not(Tri a) { return a == Tri::kUnknown ? a : tri(a == Tri::kFalse); }
Tri tri_and(Tri a, Tri b) {
  if (a == Tri::kFalse || b == Tri::kFalse) return Tri::kFalse;
  return a == Tri::kTrue && b == Tri::kTrue ? Tri::kTrue : Tri::kUnknown;
}
Tri tri_or(Tri a, Tri b) { return tri_not(tri_and(tri_not(a), tri_not(b))); }

// A whole decimal integer ("-3", "42"), else nullopt.
std::optional<std::int64_t> parse_int64(const std::string& s) {
  std::int64_t v = 0;
  const char* end = s.data() + s.size();
  const auto [p, ec] = std::from_chars(s.data(), end, v);
  if (ec != std::errc() || p != end || s.empty()) return std::nullopt;
  return v;
}

// ---------------------------------------------------------------------------
// Lexer

enum class PartKind { kLiteral, kParam, kArith, kOpaque };

struct Part {
  PartKind kind = PartKind::kLiteral;
  std::string text;     // literal text, or the inside of ${...} / $((...))
  bool quoted = false;  // inside quotes: not split
  bool braced = false;  // kParam: ${...} (else $NAME)
};

struct Word {
  std::vector<Part> parts;
  std::string source;  // as written
  int line = 0;
  // Assignment NAME=value / NAME+=value (value = parts) or array
  // NAME=( elements ).
  std::string assign_name;
  bool append = false;
  bool is_array = false;
  std::vector<Word> elements;
  // An arithmetic command ((expr)): `arith` is expr.
  bool arith_command = false;
  std::string arith;
  // A redirection: the operator ("<<", "<<-", ">", ">>", "&>", ">&", ...,
  // with the file descriptor written before it, e.g. "2>") and the target
  // as written (a here-document's delimiter word). For a here-document,
  // the lines of its body (none if it is empty: last < first).
  std::string redirect;
  std::string target;
  int body_first = 0;
  int body_last = 0;
};

struct Token {
  bool separator = false;
  Word word;
  int line = 0;
  // A separator's kind: '\n', ';', '&', '|', '(', ')', or 'a' (&&),
  // 'o' (||), 'c' (;;), 'f' (;&), 'C' (;;&).
  char sep = 0;
};

class Lexer {
 public:
  Lexer(const std::string& text, const std::string& origin, const ShellLimits& limits, int line = 1)
      : s_(text), origin_(origin), limits_(limits), line_(line) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    while (true) {
      skip_blanks();
      if (pos_ >= s_.size()) break;
      const char c = s_[pos_];
      if (c == '#') {
        skip_comment();
      } else if (c == '(' && peek(1) == '(' && arith_command(out)) {
        continue;
      } else if (c == '&' && peek(1) == '>') {
        redirect(out);
      } else if (c == '\n' || c == ';' || c == '&' || c == '|' || c == '(' || c == ')') {
        out.push_back({true, {}, line_, c});
        ++pos_;
        if (c == '\n') {
          ++line_;
          read_heredoc_bodies(out);
        }
        if ((c == '&' || c == '|' || c == ';') && pos_ < s_.size() && s_[pos_] == c) {
          out.back().sep = c == '&' ? 'a' : c == '|' ? 'o' : 'c';
          ++pos_;
        }
        // The ends of a case branch: ";&" falls through, ";;&" tests the
        // next patterns.
        if ((out.back().sep == ';' || out.back().sep == 'c') && pos_ < s_.size() &&
            s_[pos_] == '&') {
          out.back().sep = out.back().sep == ';' ? 'f' : 'C';
          ++pos_;
        }
      } else if (c == '<' || c == '>') {
        redirect(out);
      } else {
        Word w = lex_word(0, false);
        if (!w.parts.empty() || !w.source.empty() || w.is_array) {
          if (out.size() >= limits_.max_words) fail(w.line, "the script has too many words");
          const int line = w.line;
          out.push_back({false, std::move(w), line});
        }
      }
    }
    if (!heredocs_.empty()) {
      // The last line has a here-document but the file ends there.
      const Word& h = out[heredocs_.front()].word;
      fail(h.line, "unterminated here-document " + h.redirect + h.target + ": no line \"" +
                       heredoc_delimiter(h) + "\" before the end of the file");
    }
    return out;
  }

  [[noreturn]] void fail(int line, const std::string& what) const {
    throw InputError(origin_ + ":" + std::to_string(line), what);
  }

  // Parses `text` (the default of ${VAR:-text}) as one word's parts.
  static std::vector<Part> parse_nested(const std::string& text, const std::string& origin,
                                        const ShellLimits& limits, int line, int depth) {
    Lexer sub(text, origin, limits);
    sub.line_ = line;
    Word w = sub.lex_word(depth, true);
    if (w.assign_name.empty()) return w.parts;
    // "a=b" is text here (a default, an arithmetic assignment).
    std::vector<Part> parts;
    parts.push_back({PartKind::kLiteral, w.assign_name + (w.append ? "+=" : "="), false, false});
    parts.insert(parts.end(), w.parts.begin(), w.parts.end());
    return parts;
  }

 private:
  char peek(std::size_t ahead) const { return pos_ + ahead < s_.size() ? s_[pos_ + ahead] : '\0'; }

  void skip_blanks() {
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == ' ' || c == '\t' || c == '\r') {
        ++pos_;
      } else if (c == '\\' && peek(1) == '\n') {
        pos_ += 2;
        ++line_;
      } else {
        break;
      }
    }
  }

  void skip_comment() {
    while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
  }

  // A redirection at pos_ (on '<', '>' or "&>"): a token with its operator
  // and target. A here-document's body is read at the end of the line.
  void redirect(std::vector<Token>& out) {
    Word r;
    r.line = line_;
    r.redirect = fd_;
    fd_.clear();
    const std::size_t start = pos_;
    if (s_[pos_] == '&') ++pos_;
    if (s_[pos_] == '<' && peek(1) == '<' && peek(2) == '<') {
      pos_ += 3;  // <<< here-string: one word
    } else if (s_[pos_] == '<' && peek(1) == '<') {
      pos_ += 2;
      if (pos_ < s_.size() && s_[pos_] == '-') ++pos_;
      r.redirect += s_.substr(start, pos_ - start);
      skip_blanks();
      const Word d = pos_ < s_.size() && s_[pos_] != '\n' ? lex_word(0, false) : Word{};
      r.target = d.source;
      if (heredoc_delimiter(r).empty() || d.is_array) {
        fail(r.line, "here-document " + r.redirect + " without a delimiter word");
      }
      heredocs_.push_back(out.size());
      const int line = r.line;
      out.push_back({false, std::move(r), line});
      return;
    } else {
      ++pos_;
      while (pos_ < s_.size() &&
             (s_[pos_] == '>' || s_[pos_] == '<' || s_[pos_] == '&' || s_[pos_] == '|')) {
        ++pos_;
      }
    }
    r.redirect += s_.substr(start, pos_ - start);
    skip_blanks();
    if (pos_ < s_.size() && s_[pos_] != '\n' && s_[pos_] != ';') {
      r.target = lex_word(0, false).source;
    }
    const int line = r.line;
    out.push_back({false, std::move(r), line});
  }

  // The delimiter line of a here-document: its word without quotes.
  static std::string heredoc_delimiter(const Word& h) {
    std::string d;
    for (char c : h.target) {
      if (c != '\'' && c != '"' && c != '\\') d += c;
    }
    return d;
  }

  // After a newline: the bodies of the here-documents of the line just
  // ended, up to their delimiter lines (not read as commands).
  void read_heredoc_bodies(std::vector<Token>& out) {
    for (const std::size_t k : heredocs_) {
      Word& h = out[k].word;
      const std::string delim = heredoc_delimiter(h);
      const bool strip_tabs = h.redirect.back() == '-';
      h.body_first = line_;
      while (true) {
        if (pos_ >= s_.size()) {
          fail(h.line, "unterminated here-document " + h.redirect + h.target + ": no line \"" +
                           delim + "\" before the end of the file");
        }
        std::size_t eol = s_.find('\n', pos_);
        if (eol == std::string::npos) eol = s_.size();
        std::size_t from = pos_;
        if (strip_tabs) {
          while (from < eol && s_[from] == '\t') ++from;
        }
        std::size_t to = eol;
        if (to > from && s_[to - 1] == '\r') --to;
        const bool end = s_.compare(from, to - from, delim) == 0;
        pos_ = eol < s_.size() ? eol + 1 : eol;
        if (end) {
          h.body_last = line_ - 1;
          ++line_;
          break;
        }
        ++line_;
      }
    }
    heredocs_.clear();
  }

  // ((expr)) at pos_: an arithmetic command (bash reads "((" as one when a
  // "))" closes it; else it is two subshells).
  bool arith_command(std::vector<Token>& out) {
    const std::size_t end = find_close('(', ')');
    if (end == std::string::npos || end - pos_ < 4 || s_[end - 2] != ')') return false;
    Word w;
    w.line = line_;
    w.arith_command = true;
    w.arith = s_.substr(pos_ + 2, end - pos_ - 4);
    w.source = s_.substr(pos_, end - pos_);
    out.push_back({false, w, line_});
    count_lines(pos_, end);
    pos_ = end;
    return true;
  }

  // Finds the index just past the bracket that closes the one at `pos_`
  // (`open` at s_[pos_]), skipping quoted text.
  std::size_t match_close(char open, char close, int line) const {
    const std::size_t end = find_close(open, close);
    if (end != std::string::npos) return end;
    fail(line, std::string("unterminated '") + open + "' (no matching '" + close + "')");
  }

  // As match_close; npos if nothing closes it.
  std::size_t find_close(char open, char close) const {
    int depth = 0;
    for (std::size_t i = pos_; i < s_.size(); ++i) {
      const char c = s_[i];
      if (c == '\\') {
        ++i;
      } else if (c == '\'') {
        const auto end = s_.find('\'', i + 1);
        if (end == std::string::npos) break;
        i = end;
      } else if (c == open) {
        ++depth;
      } else if (c == close) {
        if (--depth == 0) return i + 1;
      }
    }
    return std::string::npos;
  }

  // $... at pos_ (pos_ on '$'); appends the part.
  void lex_dollar(std::vector<Part>& parts, bool quoted, int depth) {
    const int line = line_;
    if (depth > limits_.max_nesting) fail(line, "expansions are nested too deeply");
    const char n = peek(1);
    if (n == '{') {
      ++pos_;
      const std::size_t end = match_close('{', '}', line);
      parts.push_back({PartKind::kParam, s_.substr(pos_ + 1, end - pos_ - 2), quoted, true});
      count_lines(pos_, end);
      pos_ = end;
    } else if (n == '(' && peek(2) == '(') {
      ++pos_;
      const std::size_t end = match_close('(', ')', line);
      const std::string inner = s_.substr(pos_, end - pos_);  // "((...))"
      if (inner.size() < 4 || inner[1] != '(' || inner[inner.size() - 2] != ')') {
        parts.push_back({PartKind::kOpaque, "$" + inner, quoted, false});
      } else {
        parts.push_back({PartKind::kArith, inner.substr(2, inner.size() - 4), quoted, false});
      }
      count_lines(pos_, end);
      pos_ = end;
    } else if (n == '(') {
      ++pos_;
      const std::size_t end = match_close('(', ')', line);
      parts.push_back({PartKind::kOpaque, "$" + s_.substr(pos_, end - pos_), quoted, false});
      count_lines(pos_, end);
      pos_ = end;
    } else if (is_name_start(n)) {
      std::size_t end = pos_ + 1;
      while (end < s_.size() && is_name_char(s_[end])) ++end;
      parts.push_back({PartKind::kParam, s_.substr(pos_ + 1, end - pos_ - 1), quoted, false});
      pos_ = end;
    } else if (std::isdigit(static_cast<unsigned char>(n)) != 0 ||
               std::string_view("@*#?$!-").find(n) != std::string_view::npos) {
      parts.push_back({PartKind::kParam, std::string(1, n), quoted, false});
      pos_ += 2;
    } else if (n == '\'') {
      // $'...' (ANSI-C quoting): read as plain single quotes.
      ++pos_;
    } else {
      parts.push_back({PartKind::kLiteral, "$", quoted, false});
      ++pos_;
    }
  }

  void count_lines(std::size_t from, std::size_t to) {
    line_ += static_cast<int>(std::count(s_.begin() + static_cast<std::ptrdiff_t>(from),
                                         s_.begin() + static_cast<std::ptrdiff_t>(to), '\n'));
  }

  static void add_literal(std::vector<Part>& parts, char c, bool quoted) {
    if (!parts.empty() && parts.back().kind == PartKind::kLiteral &&
        parts.back().quoted == quoted) {
      parts.back().text += c;
    } else {
      parts.push_back({PartKind::kLiteral, std::string(1, c), quoted, false});
    }
  }

  // One word from pos_. `whole` reads to the end of the text (nested
  // defaults, where blanks are literal).
  Word lex_word(int depth, bool whole) {
    Word w;
    w.line = line_;
    const std::size_t start = pos_;
    bool plain_prefix = true;  // only unquoted name characters so far
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (!whole && (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == ';' || c == '&' ||
                     c == '|' || c == '(' || c == ')' || c == '<' || c == '>')) {
        if (c == '(' && plain_prefix && !w.assign_name.empty() && w.parts.empty()) {
          lex_array(w, depth);
          break;
        }
        // "2>&1": a file-descriptor number glued to a redirection.
        if ((c == '<' || c == '>') && !w.parts.empty() && w.parts.size() == 1 &&
            w.parts[0].kind == PartKind::kLiteral && !w.parts[0].quoted &&
            std::all_of(w.parts[0].text.begin(), w.parts[0].text.end(),
                        [](char d) { return std::isdigit(static_cast<unsigned char>(d)) != 0; })) {
          if (!whole) fd_ = w.parts[0].text;
          w.parts.clear();
          w.source.clear();
          return w;
        }
        break;
      }
      if (c == '\\') {
        if (peek(1) == '\n') {
          pos_ += 2;
          ++line_;
          continue;
        }
        if (pos_ + 1 >= s_.size()) {
          ++pos_;
          break;
        }
        add_literal(w.parts, s_[pos_ + 1], true);
        pos_ += 2;
        plain_prefix = false;
      } else if (c == '\'') {
        const int line = line_;
        const auto end = s_.find('\'', pos_ + 1);
        if (end == std::string::npos) fail(line, "unterminated single quote");
        const std::string text = s_.substr(pos_ + 1, end - pos_ - 1);
        w.parts.push_back({PartKind::kLiteral, text, true, false});
        count_lines(pos_, end);
        pos_ = end + 1;
        plain_prefix = false;
      } else if (c == '"') {
        lex_double(w.parts, depth);
        plain_prefix = false;
      } else if (c == '$') {
        lex_dollar(w.parts, false, depth + 1);
        plain_prefix = false;
      } else if (c == '`') {
        const int line = line_;
        const auto end = s_.find('`', pos_ + 1);
        if (end == std::string::npos) fail(line, "unterminated backquote");
        w.parts.push_back({PartKind::kOpaque, s_.substr(pos_, end - pos_ + 1), false, false});
        count_lines(pos_, end);
        pos_ = end + 1;
        plain_prefix = false;
      } else if (c == '=' && plain_prefix && w.assign_name.empty() && !w.parts.empty()) {
        std::string name = w.parts[0].text;
        bool append = false;
        if (!name.empty() && name.back() == '+') {
          append = true;
          name.pop_back();
        }
        if (is_valid_name(name)) {
          w.assign_name = name;
          w.append = append;
          w.parts.clear();
          ++pos_;
          continue;
        }
        add_literal(w.parts, c, false);
        ++pos_;
      } else {
        if (plain_prefix && !is_name_char(c) && c != '+') plain_prefix = false;
        add_literal(w.parts, c, false);
        ++pos_;
      }
      if (w.parts.size() > limits_.max_words) fail(w.line, "a word is too long");
    }
    w.source = s_.substr(start, pos_ - start);
    return w;
  }

  void lex_double(std::vector<Part>& parts, int depth) {
    const int line = line_;
    ++pos_;
    parts.push_back({PartKind::kLiteral, "", true, false});  // "" is a word
    while (true) {
      if (pos_ >= s_.size()) fail(line, "unterminated double quote");
      const char c = s_[pos_];
      if (c == '"') {
        ++pos_;
        return;
      }
      if (c == '\\') {
        const char n = peek(1);
        if (n == '\n') {
          pos_ += 2;
          ++line_;
        } else if (n == '$' || n == '`' || n == '"' || n == '\\') {
          add_literal(parts, n, true);
          pos_ += 2;
        } else {
          add_literal(parts, c, true);
          ++pos_;
        }
      } else if (c == '$') {
        lex_dollar(parts, true, depth + 1);
      } else if (c == '`') {
        const auto end = s_.find('`', pos_ + 1);
        if (end == std::string::npos) fail(line_, "unterminated backquote");
        parts.push_back({PartKind::kOpaque, s_.substr(pos_, end - pos_ + 1), true, false});
        count_lines(pos_, end);
        pos_ = end + 1;
      } else {
        if (c == '\n') ++line_;
        add_literal(parts, c, true);
        ++pos_;
      }
    }
  }

  // NAME=( ... ) at pos_ on '('.
  void lex_array(Word& w, int depth) {
    const int line = line_;
    w.is_array = true;
    ++pos_;
    while (true) {
      skip_blanks();
      if (pos_ >= s_.size()) fail(line, "unterminated array assignment " + w.assign_name + "=(");
      const char c = s_[pos_];
      if (c == ')') {
        ++pos_;
        return;
      }
      if (c == '\n') {
        ++line_;
        ++pos_;
        continue;
      }
      if (c == '#') {
        skip_comment();
        continue;
      }
      if (c == ';' || c == '&' || c == '|' || c == '(' || c == '<' || c == '>') {
        fail(line_, std::string("unexpected '") + c + "' inside array " + w.assign_name + "=(");
      }
      Word e = lex_word(depth, false);
      e.assign_name.clear();  // "--a=b" inside an array is a plain word
      if (w.elements.size() >= limits_.max_words) fail(line, "an array has too many elements");
      w.elements.push_back(std::move(e));
    }
  }

  const std::string& s_;
  std::string origin_;
  const ShellLimits& limits_;
  std::size_t pos_ = 0;
  int line_;
  std::string fd_;                     // a file descriptor before a redirection
  std::vector<std::size_t> heredocs_;  // tokens of here-documents on this line
};

// Words lexed as NAME=value inside an array keep their text: re-join them.
std::vector<Part> word_parts_with_assignment(const Word& w) {
  if (w.assign_name.empty()) return w.parts;
  std::vector<Part> parts;
  parts.push_back({PartKind::kLiteral, w.assign_name + (w.append ? "+=" : "="), false, false});
  parts.insert(parts.end(), w.parts.begin(), w.parts.end());
  return parts;
}

// ---------------------------------------------------------------------------
// Interpreter

// A piece of a value: known text, or an expansion the script does not
// define (`text` is then its source, e.g. "$1", "${DATA_PATH}", "$(cmd)").
struct Piece {
  std::string text;
  bool known = true;
};

// A word during interpretation: the word, and for a word that is partly
// unknown its known text and unknown expansions in order, so that a later
// unquoted expansion can still split the known text ("--lr $1 --layers 4"
// gives --lr, <$1>, --layers, 4).
struct Val : ShellWord {
  std::vector<Piece> pieces;  // only when !known
  // An array element added under a condition: the serial of the if / case
  // frame and the branch that added it, so that NAME=(...) in another
  // branch of it keeps it for a launcher (the branches exclude each other).
  int frame = 0;
  int branch = 0;
};

Val make_val(std::string text, std::string source, int line) {
  Val v;
  v.text = std::move(text);
  v.source = std::move(source);
  v.line = line;
  return v;
}

// Appends `add` to `to`, merging known text.
void append_piece(std::vector<Piece>& to, const Piece& add) {
  if (add.known && add.text.empty()) return;
  if (add.known && !to.empty() && to.back().known) {
    to.back().text += add.text;
  } else {
    to.push_back(add);
  }
}

void append_pieces(std::vector<Piece>& to, const Val& v) {
  if (v.known) {
    append_piece(to, {v.text, true});
  } else if (v.pieces.empty()) {
    append_piece(to, {v.source, false});
  } else {
    for (const Piece& p : v.pieces) append_piece(to, p);
  }
}

std::size_t pieces_size(const std::vector<Piece>& pieces) {
  std::size_t n = 0;
  for (const Piece& p : pieces) n += p.text.size();
  return n;
}

// A value during expansion: one or more fields.
struct Value {
  std::vector<Val> words;
  bool set = true;  // false: the variable is unset (not merely unknown)
};

class Interpreter {
 public:
  Interpreter(const std::string& origin, const ShellInputs& inputs, const ShellLimits& limits)
      : origin_(origin), env_(inputs.env), overrides_(inputs.overrides), limits_(limits) {
    for (const auto& [name, value] : overrides_) {
      vars_[name] = {make_val(value, shell_quote(value), 0)};
    }
    if (inputs.args) {
      positional_.emplace();
      for (const std::string& a : *inputs.args) {
        positional_->push_back(make_val(a, shell_quote(a), 0));
      }
    }
  }

  // The words of `tokens` as bash splits them (no separators allowed; every
  // word must be known).
  std::vector<std::string> words_of(const std::vector<Token>& tokens) {
    ShellScript script;
    script_ = &script;
    std::vector<std::string> out;
    for (const Token& t : tokens) {
      if (t.separator || !t.word.redirect.empty()) {
        fail(t.line, "only words, not shell operators (; & | < > ( ) or a new line)");
      }
      for (const Val& v : expand_word(t.word, true)) {
        if (!v.known) fail(t.line, v.source + " is not expanded here: write its value");
        out.push_back(v.text);
      }
    }
    return out;
  }

  ShellScript run(const std::vector<Token>& tokens) {
    ShellScript script;
    script.origin = origin_;
    script_ = &script;
    run_tokens(tokens, script);
    note_control(script);
    note_unread_inputs(script);
    if (!script.has_command) {
      if (bare_args_.empty() || bare_args_.front().text.rfind("--", 0) != 0) {
        throw InputError(origin_,
                         "no Megatron-LM launch command found (a torchrun / python / srun "
                         "command that runs a *.py entry point such as pretrain_gpt.py), and "
                         "the file is not a plain argument list starting with --flags");
      }
      script.launch.args = bare_args_;
      script.launch.line = bare_args_.front().line;
    }
    for (const auto& [name, words] : vars_) {
      script.variables[name].assign(words.begin(), words.end());
    }
    for (const auto& [name, alts] : alternatives_) {
      for (const Alt& a : alts) script.alternatives[name].push_back(a.value);
    }
    script.exported = exported_;
    return script;
  }

 private:
  [[noreturn]] void fail(int line, const std::string& what) const {
    throw InputError(origin_ + ":" + std::to_string(line), what);
  }

  void check_size(const std::string& s, int line) const {
    if (s.size() > limits_.max_value) {
      fail(line, "a value grows beyond " + std::to_string(limits_.max_value) +
                     " bytes (runaway variable expansion?)");
    }
  }

  static bool is_keyword(const Word& w) {
    static const std::set<std::string> kKeywords = {"if", "then", "else",  "elif",  "fi",
                                                    "do", "done", "while", "until", "{",
                                                    "}",  "!",    "time",  "esac"};
    return w.assign_name.empty() && w.parts.size() == 1 && w.parts[0].kind == PartKind::kLiteral &&
           !w.parts[0].quoted && kKeywords.count(w.parts[0].text) > 0;
  }

  static std::string literal_of(const Word& w) {
    if (!w.assign_name.empty() || w.parts.size() != 1 || w.parts[0].kind != PartKind::kLiteral) {
      return "";
    }
    return w.parts[0].text;
  }

  // Conditionals and loops: one frame per if ... fi, do ... done and
  // case ... esac being read.
  struct Frame {
    enum Kind { kIf, kLoop, kCase } kind = kIf;
    int serial = 0;              // of this frame among all frames read
    int branch = 0;              // kIf, kCase: which branch is read (counts them)
    bool outer = true;           // the statements around it run
    bool in_condition = false;   // reading the condition (if, elif, while)
    bool taken = false;          // kIf, kCase: a branch whose condition is true ran
    bool taken_assumed = false;  // ... true only with a variable assumed unset
    // kIf: the branch read now is not taken, but only because a variable
    // was assumed unset: its array appends are kept for the launcher.
    bool shadow = false;
    std::size_t assumed_mark = 0;        // assumed_count_ when the condition began
    bool active = true;                  // the statements read now run
    int line = 0;                        // of the if / elif / loop
    std::string condition;               // kIf: the condition being read, as written
    std::string guard;                   // kIf: when the branch read now runs (bash), if undecided
    std::vector<std::string> undecided;  // kIf, kCase: earlier conditions hapmoe could not decide
    // kCase: in_condition is "reading a pattern list". The word tested
    // (as written, and its value), whether an assumption decided it, how
    // the previous branch ended (0 for none, else the separator 'c' ;;,
    // 'f' ;&, 'C' ;;&), and the frame as the branch being read found it
    // (for ;;&, which tests the next patterns as if it had not run).
    std::string word_source;
    std::optional<std::string> word;  // nullopt: unknown
    bool word_assumed = false;
    char branch_end = 0;
    bool entry_taken = false, entry_taken_assumed = false;
    std::size_t entry_undecided = 0;

    std::string not_before() const {
      std::string out;
      for (const std::string& c : undecided) out += (out.empty() ? "! " : " && ! ") + c;
      return out;
    }
  };
  // True while `stmt` is an unfinished [[ ... ]] test.
  static bool in_double_bracket(const std::vector<const Word*>& stmt) {
    std::size_t i = 0;
    while (i < stmt.size() && is_keyword(*stmt[i])) ++i;
    if (i == stmt.size() || literal_of(*stmt[i]) != "[[") return false;
    return literal_of(*stmt.back()) != "]]";
  }

  // One statement; `before` is the separator before it (&& and || run it
  // only as bash would, when the status before it is known).
  void statement(const std::vector<const Word*>& words, char before, ShellScript& script) {
    std::size_t i = 0;
    bool chained = true;  // && / || apply (not after if, then, ...)
    bool negate = false;
    while (i < words.size() && is_keyword(*words[i])) {
      const std::string k = literal_of(*words[i]);
      if (k == "!") {
        negate = !negate;
      } else if (k != "{" && k != "}" && k != "time") {
        control(k, *words[i]);
        chained = false;
      }
      ++i;
    }
    if (i == words.size()) return;
    std::string source = negate ? "! " : "";
    for (std::size_t j = i; j < words.size(); ++j) source += (j > i ? " " : "") + words[j]->source;
    if (!frames_.empty() && frames_.back().kind == Frame::kIf && frames_.back().in_condition) {
      std::string& c = frames_.back().condition;
      c += (c.empty() ? "" : before == 'a' ? " && " : before == 'o' ? " || " : "; ") + source;
    }
    if (!active()) {
      if (!frames_.empty() && frames_.back().shadow) shadow_appends(words, i);
      return;
    }
    const bool and_or = chained && (before == 'a' || before == 'o');
    if (and_or) {
      if (status_ == (before == 'a' ? Tri::kFalse : Tri::kTrue)) return;  // skipped; status stays
      if (status_ == Tri::kUnknown) {
        add_line(unknown_conditions_, words[i]->line);
        // What it runs is added only if the status before it allows.
        chain_guard_ = (before == 'a' ? "" : "! ") + grouped(status_source_);
      }
    }
    Tri s = command(words, i, script);
    chain_guard_.clear();
    if (negate) s = tri_not(s);
    if (and_or) {
      status_ = before == 'a' ? tri_and(status_, s) : tri_or(status_, s);
      status_source_ += (before == 'a' ? " && " : " || ") + source;
    } else {
      status_ = s;
      status_source_ = source;
    }
  }

  // In a branch not taken only because a variable was assumed unset or a
  // default decided it: the array assignments and appends, whose words are
  // kept for a launcher under the branch's condition and not read
  // (ShellWord::launcher_only).
  void shadow_appends(const std::vector<const Word*>& words, std::size_t i) {
    const std::string g = guard();
    for (; i < words.size() && !words[i]->assign_name.empty(); ++i) {
      const Word& w = *words[i];
      if (overrides_.count(w.assign_name)) continue;
      if (!w.is_array) {
        // NAME=value: a value a launcher keeps, under the condition.
        // (NAME+=value is not kept.)
        if (w.append) continue;
        const std::string source = w.source.substr(w.source.find('=') + 1);
        Val v = expand_joined(w.parts, w.line, source);
        v.guard = and_guards(g, v.guard);
        v.launcher_only = true;
        add_alternatives(w.assign_name, std::move(v),
                         joined_alternatives(w.parts, w.line, source, g), g, w.line);
        continue;
      }
      // NAME=(...) too: the launcher keeps both branches' words, each under
      // its condition, so appending is what it needs.
      std::vector<Val>& target = vars_[w.assign_name];
      for (const Word& e : w.elements) {
        for (Val& v : expand_command_word(e)) {
          v.guard = g;
          charge(g.size(), w.line);
          v.launcher_only = true;
          v.frame = frames_.back().serial;
          v.branch = frames_.back().branch;
          target.push_back(std::move(v));
          if (target.size() > limits_.max_words) fail(w.line, "an array has too many elements");
        }
      }
    }
  }

  // `condition` as one operand of && or ! in bash.
  static std::string grouped(const std::string& condition) {
    const bool simple =
        condition.find("&&") == std::string::npos && condition.find("||") == std::string::npos &&
        condition.find(';') == std::string::npos && condition.find('\n') == std::string::npos;
    return simple ? condition : "{ " + condition + "; }";
  }

  // The condition (bash) under which what is read now runs, as far as
  // hapmoe could not decide it; empty when it surely runs.
  std::string guard() {
    std::string out;
    for (const Frame& f : frames_) {
      if (!f.guard.empty()) out += (out.empty() ? "" : " && ") + f.guard;
    }
    if (!chain_guard_.empty()) out += (out.empty() ? "" : " && ") + chain_guard_;
    charge(out.size(), frames_.empty() ? 0 : frames_.back().line);
    return out;
  }

  // Keeps the frames of if / elif / else / fi, loops and case as the
  // keyword `k` (starting `words`) says.
  void control(const std::string& k, const Word& w) {
    Frame* top = frames_.empty() ? nullptr : &frames_.back();
    if (k == "if") {
      push_frame(Frame::kIf, true, w.line);
      frames_.back().assumed_mark = assumed_count_;
      status_ = Tri::kTrue;
    } else if (k == "elif" && top && top->kind == Frame::kIf) {
      top->active = top->outer && !top->taken;
      top->shadow = false;
      top->in_condition = true;
      top->line = w.line;
      top->condition.clear();
      top->guard.clear();
      top->assumed_mark = assumed_count_;
      status_ = Tri::kTrue;
    } else if (k == "then" && top && top->kind == Frame::kIf && top->in_condition) {
      top->in_condition = false;
      if (enter_branch(*top, status_, assumed_count_ > top->assumed_mark, top->condition)) {
        add_line(unknown_conditions_, top->line);
      }
    } else if (k == "else" && top && top->kind == Frame::kIf) {
      (void)enter_branch(*top, Tri::kTrue, false, "");
    } else if (k == "fi" && top && top->kind == Frame::kIf) {
      frames_.pop_back();
    } else if (k == "while" || k == "until") {
      push_frame(Frame::kLoop, true, w.line);
      if (active()) add_line(loops_, w.line);
    } else if (k == "do") {
      if (top && top->kind == Frame::kLoop && top->in_condition) {
        top->in_condition = false;
      } else {
        push_frame(Frame::kLoop, false, w.line);
      }
    } else if (k == "done" && top && top->kind == Frame::kLoop) {
      frames_.pop_back();
    } else if (k == "esac" && top && top->kind == Frame::kCase) {
      frames_.pop_back();
    }
  }

  // Enters the next branch of an if (then, else) or a case in `f`: its
  // condition has exit status `status`, decided only by an assumption (a
  // variable taken as unset, a default) when `assumed`, and is written
  // `own` in bash (empty: always true, as else and *)). The branch runs if
  // no earlier branch surely ran, no earlier undecided condition held
  // and, when undecided, its own holds (Frame::guard). A branch not taken
  // only because of an assumption is a shadow: its array words are kept
  // for a launcher. True if the condition was evaluated and is unknown.
  bool enter_branch(Frame& f, Tri status, bool assumed, const std::string& own) {
    ++f.branch;
    f.shadow = false;
    f.guard.clear();
    if (!f.outer || (f.taken && !f.taken_assumed)) {
      f.active = false;  // not reached, or an earlier branch surely ran
      return false;
    }
    f.guard = f.not_before();
    const bool unknown = !f.taken && status == Tri::kUnknown;
    if (f.taken) status = Tri::kUnknown;  // not evaluated after a take
    if ((status == Tri::kUnknown || assumed) && !own.empty()) {
      const std::string g = grouped(own);
      f.guard += (f.guard.empty() ? "" : " && ") + g;
      f.undecided.push_back(g);
    }
    charge(f.guard.size(), f.line);
    if (f.taken) {
      // After a branch taken on an assumption: kept for the launcher only.
      f.active = false;
      f.shadow = true;
      return unknown;
    }
    f.active = status != Tri::kFalse;
    f.shadow = status == Tri::kFalse && assumed;
    if (status == Tri::kTrue) {
      f.taken = true;
      f.taken_assumed = assumed;
    }
    return unknown;
  }

  bool active() const { return frames_.empty() || frames_.back().active; }

  // A new if, loop or case frame, run if what surrounds it runs.
  void push_frame(Frame::Kind kind, bool in_condition, int line) {
    Frame f;
    f.kind = kind;
    f.outer = f.active = active();
    f.in_condition = in_condition;
    f.line = line;
    f.serial = ++frame_serial_;
    frames_.push_back(std::move(f));
  }

  static void add_line(std::vector<int>& lines, int line) {
    if (lines.empty() || lines.back() != line) lines.push_back(line);
  }

  // A command (words from `i`): run, with its exit status where known.
  Tri command(const std::vector<const Word*>& words, std::size_t i, ShellScript& script) {
    const std::string first = literal_of(*words[i]);
    // Loops and case: their control words are not commands; the bodies
    // are read as the statements that follow, once.
    if (first == "for" || first == "select") {
      push_frame(Frame::kLoop, true, words[i]->line);
      add_line(loops_, words[i]->line);
      return Tri::kTrue;
    }
    if (first == "function") return Tri::kTrue;
    // ((expr)): evaluated for its assignments; true if not 0.
    if (words[i]->arith_command) {
      const std::optional<std::int64_t> v =
          arith(words[i]->arith, words[i]->line, 1, "((" + words[i]->arith + "))");
      return v ? tri(*v != 0) : Tri::kUnknown;
    }
    if (first == "[" || first == "[[" || first == "test") return test(words, i);
    if (first == "true" || first == ":") return Tri::kTrue;
    if (first == "false") return Tri::kFalse;
    run_command(words, i, script);
    const bool assignments_only =
        std::all_of(words.begin() + static_cast<long>(i), words.end(),
                    [](const Word* w) { return !w->assign_name.empty(); });
    return assignments_only ? Tri::kTrue : Tri::kUnknown;
  }

  void run_command(const std::vector<const Word*>& words, std::size_t i, ShellScript& script) {
    std::vector<const Word*> assigns;
    while (i < words.size() && !words[i]->assign_name.empty()) assigns.push_back(words[i++]);
    if (i == words.size()) {
      for (const Word* a : assigns) assign(*a, false);
      return;
    }
    const std::string cmd = literal_of(*words[i]);
    if (cmd == "export" || cmd == "declare" || cmd == "typeset" || cmd == "local" ||
        cmd == "readonly") {
      bool export_all = cmd == "export";
      for (std::size_t j = i + 1; j < words.size(); ++j) {
        const Word& w = *words[j];
        if (!w.assign_name.empty()) {
          assign(w, export_all);
        } else {
          const std::string lit = literal_of(w);
          if (!lit.empty() && lit[0] == '-') {
            if (lit.find('x') != std::string::npos) export_all = true;
          } else if (export_all && is_valid_name(lit)) {
            mark_exported(lit);
          }
        }
      }
      return;
    }
    if (cmd == "eval") {
      eval(words, i + 1, script);
      return;
    }
    if (cmd == "let") {
      for (std::size_t j = i + 1; j < words.size(); ++j) {
        (void)arith(words[j]->source, words[j]->line, 1, "let " + words[j]->source);
      }
      return;
    }
    if (cmd == "shift") {
      shift(words, i + 1);
      return;
    }
    if ((cmd == "source" || cmd == ".") && i + 1 < words.size()) {
      script.notes.push_back("line " + std::to_string(words[i]->line) + " sources " +
                             words[i + 1]->source +
                             ", which is not read (hapmoe reads one file, runs nothing): give "
                             "what it sets with --megatron-env");
      return;
    }
    if (cmd == "unset") {
      for (std::size_t j = i + 1; j < words.size(); ++j) {
        const std::string name = literal_of(*words[j]);
        if (may_assign(name, words[j]->line)) {
          vars_.erase(name);
          forget_alternatives(name);
        }
      }
      return;
    }
    // A command: expand its words (prefix assignments are its environment
    // and do not change the script's variables).
    std::vector<ShellWord> expanded;
    for (std::size_t j = i; j < words.size(); ++j) {
      for (Val& w : expand_command_word(*words[j])) {
        expanded.push_back(std::move(static_cast<ShellWord&>(w)));
        if (expanded.size() > limits_.max_words) fail(words[i]->line, "a command is too long");
      }
    }
    if (expanded.empty()) return;
    if (bare_args_.empty() && !script.has_command) {
      if (expanded.front().known && expanded.front().text.rfind("--", 0) == 0) {
        bare_args_ = expanded;
      } else {
        bare_args_.clear();
      }
    } else if (!bare_args_.empty() && !script.has_command) {
      bare_args_.insert(bare_args_.end(), expanded.begin(), expanded.end());
    }
    launch_candidate(expanded, script);
  }

  // A here-document is skipped with a note naming its line, the command it
  // feeds and the file that command writes; its body was not read as
  // commands (the lexer consumed it).
  void note_heredocs(const std::vector<const Word*>& words,
                     const std::vector<const Word*>& redirects, bool launch,
                     ShellScript& script) const {
    std::string command;
    for (const Word* w : words) {
      if (!is_keyword(*w) && w->assign_name.empty() && !w->arith_command) {
        command = w->source;
        break;
      }
    }
    std::string file;
    for (const Word* r : redirects) {
      static const std::set<std::string> kOut = {">",   ">>", ">|",  "1>", "1>>",
                                                 "1>|", "&>", "&>>", ">&"};
      if (kOut.count(r->redirect) && !r->target.empty() &&
          !std::all_of(r->target.begin(), r->target.end(), [](char c) {
            return std::isdigit(static_cast<unsigned char>(c)) != 0 || c == '-';
          })) {
        file = r->target;
      }
    }
    for (const Word* r : redirects) {
      if (r->redirect.find("<<") == std::string::npos ||
          r->redirect.find("<<<") != std::string::npos) {
        continue;  // not a here-document (a here-string <<< is one word)
      }
      const std::string body =
          r->body_last < r->body_first
              ? "with no lines"
              : (r->body_last == r->body_first ? "line " + std::to_string(r->body_first)
                                               : "lines " + std::to_string(r->body_first) + "-" +
                                                     std::to_string(r->body_last));
      const std::string doc = "the here-document " + r->redirect + r->target + " on line " +
                              std::to_string(r->line) + " (" + body + ")";
      if (launch) {
        script.notes.push_back(
            "the launch command on line " + std::to_string(script.launch.line) + " reads " + doc +
            " on its standard input; only its command line is read, not what the here-document "
            "gives the program");
      } else {
        script.notes.push_back(doc + " feeds " + (command.empty() ? "no command" : command) +
                               (file.empty() ? "" : ", written to " + file) +
                               "; it is skipped: hapmoe runs nothing, and its lines are not read "
                               "as commands");
      }
    }
  }

  // The statements of `tokens`, in order. Inside [[ ... ]], && || ( )
  // are operators of the test, not separators.
  void run_tokens(const std::vector<Token>& tokens, ShellScript& script) {
    std::vector<const Word*> stmt;
    std::vector<const Word*> redirects;
    char before = '\n';  // the separator before the statement
    for (std::size_t i = 0; i <= tokens.size(); ++i) {
      if (i < tokens.size() && stmt.empty() && in_case_patterns()) {
        i = case_patterns(tokens, i);
        before = '\n';
        continue;
      }
      if (i < tokens.size() && !tokens[i].separator && tokens[i].word.redirect.empty() &&
          is_case(tokens[i].word) &&
          std::all_of(stmt.begin(), stmt.end(), [](const Word* w) { return is_keyword(*w); })) {
        if (!stmt.empty()) statement(stmt, before, script);  // then, do, ... before it
        stmt.clear();
        i = case_header(tokens, i, before);
        continue;
      }
      if (i < tokens.size() && tokens[i].separator && in_double_bracket(stmt) &&
          std::string_view("ao()").find(tokens[i].sep) != std::string_view::npos) {
        const char k = tokens[i].sep;
        Word& op = test_operators_.emplace_back();
        op.parts.push_back({PartKind::kLiteral, k == 'a'   ? "&&"
                                                : k == 'o' ? "||"
                                                           : std::string(1, k)});
        op.source = op.parts[0].text;
        op.line = tokens[i].line;
        stmt.push_back(&op);
      } else if (i == tokens.size() || tokens[i].separator) {
        const bool had_command = script.has_command;
        if (!stmt.empty()) statement(stmt, before, script);
        note_heredocs(stmt, redirects, !had_command && script.has_command, script);
        stmt.clear();
        redirects.clear();
        if (i < tokens.size()) before = tokens[i].sep;
        if (i < tokens.size() && (before == 'c' || before == 'f' || before == 'C') &&
            !frames_.empty() && frames_.back().kind == Frame::kCase &&
            !frames_.back().in_condition) {
          // The end of a case branch: patterns follow.
          frames_.back().in_condition = true;
          frames_.back().branch_end = before;
        }
      } else if (!tokens[i].word.redirect.empty()) {
        redirects.push_back(&tokens[i].word);
      } else {
        stmt.push_back(&tokens[i].word);
      }
    }
  }

  // -------------------------------------------------------------------------
  // case WORD in PATTERN|PATTERN) ... ;; ... esac, evaluated as bash does:
  // the branches are if / elif branches whose conditions are "WORD matches
  // one of the patterns" (enter_branch), so a known word reads only the
  // branch it selects, an unknown one reads every branch in order, and one
  // decided only by an assumption keeps the other branches' array words
  // and values for a launcher, under [[ WORD == PATTERN || ... ]].

  static bool is_case(const Word& w) {
    return w.assign_name.empty() && w.parts.size() == 1 && w.parts[0].kind == PartKind::kLiteral &&
           !w.parts[0].quoted && w.parts[0].text == "case";
  }

  bool in_case_patterns() const {
    return !frames_.empty() && frames_.back().kind == Frame::kCase && frames_.back().in_condition;
  }

  // `case WORD in` at tokens[i]: a new case frame, reading patterns next;
  // returns the index of `in`. The word is expanded as a test's operand
  // (a variable nothing sets is unset, a default is an assumption).
  std::size_t case_header(const std::vector<Token>& tokens, std::size_t i, char before) {
    const int line = tokens[i].line;
    const auto is_word = [&](std::size_t k) {
      return k < tokens.size() && !tokens[k].separator && tokens[k].word.redirect.empty();
    };
    if (!is_word(i + 1)) fail(line, "case without a word to test");
    std::size_t in = i + 2;
    while (in < tokens.size() && tokens[in].separator && tokens[in].sep == '\n') ++in;
    if (!is_word(in) || literal_of(tokens[in].word) != "in") {
      fail(line, "case " + tokens[i + 1].word.source + " without 'in'");
    }
    push_frame(Frame::kCase, true, line);
    Frame& f = frames_.back();
    // After && / || whose status decides, the case does not run.
    if (((before == 'a' && status_ == Tri::kFalse) || (before == 'o' && status_ == Tri::kTrue))) {
      f.outer = f.active = false;
    }
    const Word& w = tokens[i + 1].word;
    f.word_source = w.source;
    if (!f.outer) return in;
    const std::size_t mark = assumed_count_;
    testing_ = true;
    Val v;
    try {
      v = expand_joined(word_parts_with_assignment(w), w.line, w.source);
    } catch (...) {
      testing_ = false;
      throw;
    }
    testing_ = false;
    if (v.known) f.word = v.text;
    if (v.defaulted) add_line(defaulted_tests_, line);
    f.word_assumed = assumed_count_ > mark || v.defaulted;
    status_ = Tri::kTrue;  // bash: 0 when no pattern matches
    return in;
  }

  // A case's pattern list from tokens[i] (or its esac): `(`? PATTERN
  // (`|` PATTERN)* `)`, then the branch is entered; returns the index of
  // the last token read.
  std::size_t case_patterns(const std::vector<Token>& tokens, std::size_t i) {
    const int line = frames_.back().line;
    std::vector<const Word*> patterns;
    bool open = false;
    bool want = true;  // a pattern is expected next
    for (; i < tokens.size(); ++i) {
      const Token& t = tokens[i];
      if (t.separator) {
        if (t.sep == '\n' && patterns.empty() && !open) continue;
        if (t.sep == '(' && patterns.empty() && !open) {
          open = true;
        } else if (t.sep == '|' && !want) {
          want = true;
        } else if (t.sep == ')' && !want) {
          case_branch(patterns);
          return i;
        } else {
          fail(t.line, "the case on line " + std::to_string(line) +
                           ": a pattern and ')' expected, not '" + separator_text(t.sep) + "'");
        }
        continue;
      }
      if (!t.word.redirect.empty() || !want) {
        fail(t.line, "the case on line " + std::to_string(line) +
                         ": '|' or ')' expected after a pattern, not " +
                         (t.word.redirect.empty() ? t.word.source : t.word.redirect));
      }
      if (patterns.empty() && !open && literal_of(t.word) == "esac") {
        frames_.pop_back();
        return i;
      }
      if (patterns.size() >= limits_.max_words) fail(t.line, "a case has too many patterns");
      patterns.push_back(&t.word);
      want = false;
    }
    return i;
  }

  static std::string separator_text(char sep) {
    switch (sep) {
      case '\n':
        return "a new line";
      case 'a':
        return "&&";
      case 'o':
        return "||";
      case 'c':
        return ";;";
      case 'f':
        return ";&";
      case 'C':
        return ";;&";
      default:
        return std::string(1, sep);
    }
  }

  // Enters the branch of the case on top whose patterns are `patterns`.
  void case_branch(const std::vector<const Word*>& patterns) {
    Frame& f = frames_.back();
    f.in_condition = false;
    const char end = f.branch_end;
    if (end == 'C') {
      // ;;& : the next patterns are tested as if the branch had not run
      // (so its values are not exclusive with theirs: a new serial).
      f.serial = ++frame_serial_;
      f.taken = f.entry_taken;
      f.taken_assumed = f.entry_taken_assumed;
      f.undecided.resize(f.entry_undecided);
    }
    const bool prev_active = f.active, prev_shadow = f.shadow;
    const std::string prev_guard = f.guard;
    f.entry_taken = f.taken;
    f.entry_taken_assumed = f.taken_assumed;
    f.entry_undecided = f.undecided.size();
    if (end == 'f' && f.outer && prev_active && prev_guard.empty()) return;  // ;& after a run
    // The condition: does the word match one of the patterns?
    Tri status = Tri::kFalse;
    bool assumed = f.word_assumed;
    std::string own;
    bool always = false;
    if (f.outer) {
      const std::size_t mark = assumed_count_;
      for (const Word* p : patterns) {
        const std::optional<std::string> glob = case_pattern(*p);
        if (glob && *glob == "*") always = true;
        Tri m = Tri::kUnknown;
        if (glob && f.word) m = tri(fnmatch(glob->c_str(), f.word->c_str(), 0) == 0);
        status = tri_or(status, m);
        own += (own.empty() ? "[[ " : " || ") + f.word_source + " == " + p->source;
      }
      own += " ]]";
      assumed = assumed || assumed_count_ > mark;
    }
    if (always) {
      status = Tri::kTrue;  // * matches whatever the word is
      assumed = false;
      own.clear();
    }
    const int prev_branch = f.branch;
    if (enter_branch(f, status, assumed, own)) add_line(cases_, f.line);
    if (end != 'f' || !(prev_active || prev_shadow)) return;
    // ;& after a branch that may run: this one runs when that one did too
    // (what that one set, this one replaces: the same branch).
    f.branch = prev_branch;
    if (f.active && f.guard.empty()) return;
    if (!f.active && !f.shadow) {
      f.active = prev_active;
      f.shadow = prev_shadow;
      f.guard = prev_guard;
      return;
    }
    f.guard = "{ " + grouped(prev_guard) + " || " + grouped(f.guard) + "; }";
    charge(f.guard.size(), f.line);
    f.active = f.active || prev_active;
    f.shadow = !f.active;
  }

  // A case pattern as an fnmatch pattern (its quoted parts literal), or
  // nullopt if it is not known.
  std::optional<std::string> case_pattern(const Word& p) {
    std::string glob;
    testing_ = true;
    struct Reset {
      bool& flag;
      ~Reset() { flag = false; }
    } reset{testing_};
    for (const Part& part : word_parts_with_assignment(p)) {
      for (const Val& v : expand_part(part, p.line, 1)) {
        if (!v.known) return std::nullopt;
        for (char c : v.text) {
          if (part.quoted && std::string_view("\\*?[]").find(c) != std::string_view::npos) {
            glob += '\\';
          }
          glob += c;
        }
        check_size(glob, p.line);
      }
    }
    return glob;
  }

  // eval WORDS: the words expanded, joined by blanks and read again as
  // commands, as bash does (run_cmd="torchrun ..."; eval ${run_cmd}). An
  // unknown word is read again from its source, so it stays unknown.
  void eval(const std::vector<const Word*>& words, std::size_t from, ShellScript& script) {
    const int line = words[from - 1]->line;
    const std::string text = eval_text(words, from, line);
    if (eval_depth_ >= limits_.max_nesting) fail(line, "eval is nested too deeply");
    Lexer lexer(text, origin_, limits_, line);
    const std::vector<Token> tokens = lexer.run();
    const bool had_command = script.has_command;
    ++eval_depth_;
    run_tokens(tokens, script);
    --eval_depth_;
    if (!had_command && script.has_command) eval_alternatives(words, from, line, script);
  }

  std::string eval_text(const std::vector<const Word*>& words, std::size_t from, int line) {
    std::string text;
    for (std::size_t j = from; j < words.size(); ++j) {
      for (const Val& w : expand_word(*words[j], true)) {
        if (w.launcher_only) continue;  // not what the script runs with the reading's values
        if (!text.empty()) text += ' ';
        text += w.known ? w.text : w.source;
        check_size(text, line);
      }
    }
    return text;
  }

  // After `eval WORDS` ran the launch command: the command each other value
  // of a variable WORDS read would run (Pai-Megatron-Patch's
  // eval ${run_cmd}, run_cmd built from options set in branches), compared
  // flag by flag with the launch read. A flag (with its values) only the
  // other value passes is kept for a launcher under its condition; one it
  // does not pass carries "! its condition". Only a simple command with the
  // same entry point is compared.
  void eval_alternatives(const std::vector<const Word*>& words, std::size_t from, int line,
                         ShellScript& script) {
    if (alternatives_.empty() || swapping_ > 0) return;
    std::set<std::string> seen;
    for (std::size_t j = from; j < words.size(); ++j) {
      for (const Part& p : word_parts_with_assignment(*words[j])) {
        const std::string name = scalar_name(p);
        const auto a = name.empty() ? alternatives_.end() : alternatives_.find(name);
        if (a == alternatives_.end() || !seen.insert(name).second) continue;
        const std::vector<Alt> alts = a->second;
        for (const Alt& alt : alts) {
          std::vector<ShellWord> args;
          const bool same = with_value(name, alt.value, [&] {
            return eval_launch_args(eval_text(words, from, line), line, script, args);
          });
          if (same) merge_launch(script.launch.args, args, alt.value.guard, line);
        }
      }
    }
  }

  // The words after the entry point of `text`'s first simple command, if
  // it runs the launch's entry point.
  bool eval_launch_args(const std::string& text, int line, const ShellScript& script,
                        std::vector<ShellWord>& out) {
    std::vector<Token> tokens;
    try {
      Lexer lexer(text, origin_, limits_, line);
      tokens = lexer.run();
    } catch (const InputError&) {
      return false;  // bash would fail there too
    }
    std::vector<ShellWord> w;
    for (const Token& t : tokens) {
      if (t.separator) {
        if (t.sep == '\n' && w.empty()) continue;
        break;
      }
      if (!t.word.redirect.empty() || (w.empty() && !t.word.assign_name.empty())) continue;
      for (Val& v : expand_word(t.word, true)) {
        if (!v.launcher_only) w.push_back(std::move(static_cast<ShellWord&>(v)));
      }
      if (w.size() > limits_.max_words) fail(line, "a command is too long");
    }
    for (std::size_t j = 1; j < w.size(); ++j) {
      if (w[j].known && w[j].text == script.launch.entry.text) {
        out.assign(w.begin() + static_cast<std::ptrdiff_t>(j) + 1, w.end());
        return true;
      }
    }
    return false;
  }

  // The flags of `args` as groups [begin, end): a --flag and the words up
  // to the next one; a word kept for a launcher only is a group of its own.
  template <class W>
  static std::vector<std::pair<std::size_t, std::size_t>> flag_groups(const std::vector<W>& args) {
    std::vector<std::pair<std::size_t, std::size_t>> out;
    for (std::size_t i = 0; i < args.size(); ++i) {
      const bool starts = args[i].launcher_only || out.empty() ||
                          args[out.back().first].launcher_only ||
                          (args[i].known && args[i].text.rfind("--", 0) == 0);
      if (starts) {
        out.emplace_back(i, i + 1);
      } else {
        out.back().second = i + 1;
      }
    }
    return out;
  }

  template <class W>
  static std::string group_key(const std::vector<W>& args, std::pair<std::size_t, std::size_t> g) {
    std::string key;
    for (std::size_t i = g.first; i < g.second; ++i) {
      key += (args[i].known ? args[i].text : "\x01" + args[i].source) + '\x02';
    }
    return key;
  }

  // `launch` (the words read) and `other` (the words another value gives,
  // under `g`), flag by flag: a flag (with its values) only `other` has is
  // added, kept for a launcher under `g`; one only `launch` has gets
  // "! g".
  template <class W>
  void merge_launch(std::vector<W>& launch, const std::vector<W>& other, const std::string& g,
                    int line) {
    std::map<std::string, std::vector<std::size_t>> unmatched;  // key -> groups of `launch`
    const auto groups = flag_groups(launch);
    for (std::size_t k = groups.size(); k-- > 0;) {
      if (!launch[groups[k].first].launcher_only) {
        unmatched[group_key(launch, groups[k])].push_back(k);
      }
    }
    std::vector<W> added;
    for (const auto& og : flag_groups(other)) {
      const auto it = unmatched.find(group_key(other, og));
      if (it != unmatched.end() && !it->second.empty()) {
        // In both: passed when either value is.
        const std::size_t k = it->second.back();
        it->second.pop_back();
        const std::string both = and_guards(g, other[og.first].guard);
        for (std::size_t i = groups[k].first; i < groups[k].second; ++i) {
          launch[i].guard = or_guards(launch[i].guard, both);
          charge(launch[i].guard.size(), line);
        }
        continue;
      }
      for (std::size_t i = og.first; i < og.second; ++i) {
        W w = other[i];
        w.launcher_only = true;
        w.guard = and_guards(g, w.guard);
        charge(w.guard.size(), line);
        added.push_back(std::move(w));
      }
    }
    for (const auto& [key, left] : unmatched) {
      for (const std::size_t k : left) {
        for (std::size_t i = groups[k].first; i < groups[k].second; ++i) {
          launch[i].guard = and_guards(launch[i].guard, negated(g));
          charge(launch[i].guard.size(), line);
        }
      }
    }
    if (launch.size() + added.size() > limits_.max_words) fail(line, "a command is too long");
    launch.insert(launch.end(), std::make_move_iterator(added.begin()),
                  std::make_move_iterator(added.end()));
  }

  // [ ... ], test ... and [[ ... ]] (words from `i`): their status, unknown
  // when an operand is or the test reads files, patterns of =~ or
  // anything else it does not evaluate.
  Tri test(const std::vector<const Word*>& words, std::size_t i) {
    const std::string cmd = literal_of(*words[i]);
    const bool dbl = cmd == "[[";
    std::size_t end = words.size();
    if (cmd != "test") {
      if (end - i < 2 || literal_of(*words[end - 1]) != (dbl ? "]]" : "]")) return Tri::kUnknown;
      --end;
    }
    TestArgs t;
    t.dbl = dbl;
    t.line = words[i]->line;
    testing_ = true;
    struct Reset {
      bool& flag;
      ~Reset() { flag = false; }
    } reset{testing_};
    for (std::size_t j = i + 1; j < end; ++j) {
      const Word& w = *words[j];
      const std::string op = literal_of(w);
      if (dbl && (op == "&&" || op == "||" || op == "(" || op == ")")) {
        t.args.push_back({op, true, false, true});
        continue;
      }
      // [[ ]] does not split; an unquoted right side of == is a pattern,
      // of =~ a regular expression (a quoted one is literal text).
      const auto unquoted = [](const Part& p) { return !p.quoted; };
      const bool pattern = dbl && std::any_of(w.parts.begin(), w.parts.end(), unquoted);
      const bool mixed = pattern && !std::all_of(w.parts.begin(), w.parts.end(), unquoted);
      if (mixed && !t.args.empty() && t.args.back().bare && t.args.back().text == "=~") {
        // A partly quoted expression: its quoted parts are literal text.
        TestArg re{"", true, true, false, false};
        for (const Part& part : w.parts) {
          for (const Val& v : expand_part(part, w.line, 1)) {
            re.known = re.known && v.known;
            re.text += part.quoted ? regex_escape(v.text) : v.text;
          }
        }
        t.args.push_back(re);
        continue;
      }
      for (const Val& v : expand_word(w, !dbl)) {
        t.args.push_back({v.text, v.known, pattern, !op.empty() && op == v.text, mixed});
        // A default (${2:-MOCK}) decides the test only as an assumption:
        // the launcher keeps the test (see assumed_unset_).
        if (v.defaulted) {
          add_line(defaulted_tests_, w.line);
          ++assumed_count_;
        }
      }
    }
    try {
      const Tri r = test_or(t);
      return t.pos == t.args.size() ? r : Tri::kUnknown;
    } catch (const TestUnknown&) {
      return Tri::kUnknown;
    }
  }

  struct TestArg {
    std::string text;
    bool known = true;
    bool pattern = false;  // [[ ]]: matched as a glob on the right of == / !=
    bool bare = false;     // written as a plain word (an operator can be one)
    bool mixed = false;    // partly quoted, partly not
  };
  struct TestArgs {
    std::vector<TestArg> args;
    std::size_t pos = 0;
    bool dbl = false;
    int line = 0;
    int depth = 0;  // of ! and ( ), bounded like other nesting
    bool at(const char* op) const {
      return pos < args.size() && args[pos].known && args[pos].text == op &&
             (args[pos].bare || !dbl);
    }
  };
  struct TestUnknown {};

  Tri test_or(TestArgs& t) {
    Tri r = test_and(t);
    while (t.at(t.dbl ? "||" : "-o")) {
      ++t.pos;
      r = tri_or(r, test_and(t));
    }
    return r;
  }
  Tri test_and(TestArgs& t) {
    Tri r = test_not(t);
    while (t.at(t.dbl ? "&&" : "-a")) {
      ++t.pos;
      r = tri_and(r, test_not(t));
    }
    return r;
  }
  Tri test_not(TestArgs& t) {
    if (++t.depth > limits_.max_nesting) fail(t.line, "a test is nested too deeply");
    Tri r = Tri::kUnknown;
    if (t.at("!") && t.pos + 1 < t.args.size()) {
      ++t.pos;
      r = tri_not(test_not(t));
    } else {
      r = test_primary(t);
    }
    --t.depth;
    return r;
  }
  Tri test_primary(TestArgs& t) {
    const std::size_t left = t.args.size() - t.pos;
    if (left == 0) throw TestUnknown{};
    if (t.at("(") && left >= 3) {
      ++t.pos;
      const Tri r = test_or(t);
      if (!t.at(")")) throw TestUnknown{};
      ++t.pos;
      return r;
    }
    static const std::set<std::string> kBinary = {"=",   "==",  "!=",  "<",   ">",
                                                  "-eq", "-ne", "-lt", "-le", "-gt",
                                                  "-ge", "=~",  "-nt", "-ot", "-ef"};
    if (left >= 3 && t.args[t.pos + 1].known && kBinary.count(t.args[t.pos + 1].text) &&
        (t.args[t.pos + 1].bare || !t.dbl)) {
      const TestArg& a = t.args[t.pos];
      const std::string op = t.args[t.pos + 1].text;
      const TestArg& b = t.args[t.pos + 2];
      t.pos += 3;
      if (!a.known || !b.known) return Tri::kUnknown;
      if (op == "=" || op == "==" || op == "!=") {
        const bool equal =
            b.pattern ? fnmatch(b.text.c_str(), a.text.c_str(), 0) == 0 : a.text == b.text;
        return tri(equal == (op != "!="));
      }
      if (op == "=~") return t.dbl ? regex_match(a.text, b) : Tri::kUnknown;
      if (op == "<") return tri(a.text < b.text);
      if (op == ">") return tri(a.text > b.text);
      if (op.size() == 3 && op[0] == '-' && op != "-nt" && op != "-ot" && op != "-ef") {
        const std::optional<std::int64_t> x = test_integer(t, a.text);
        const std::optional<std::int64_t> y = test_integer(t, b.text);
        if (!x || !y) return Tri::kUnknown;
        if (op == "-eq") return tri(*x == *y);
        if (op == "-ne") return tri(*x != *y);
        if (op == "-lt") return tri(*x < *y);
        if (op == "-le") return tri(*x <= *y);
        if (op == "-gt") return tri(*x > *y);
        return tri(*x >= *y);
      }
      return Tri::kUnknown;  // =~, files
    }
    const TestArg& a = t.args[t.pos];
    if (left >= 2 && a.known && a.text.size() == 2 && a.text[0] == '-' && (a.bare || !t.dbl) &&
        std::isalpha(static_cast<unsigned char>(a.text[1])) != 0) {
      const TestArg& b = t.args[t.pos + 1];
      t.pos += 2;
      if (a.text == "-z" || a.text == "-n") {
        if (!b.known) return Tri::kUnknown;
        return tri(b.text.empty() == (a.text == "-z"));
      }
      if (a.text == "-v" && b.known && is_valid_name(b.text)) {
        const auto it = vars_.find(b.text);
        if (it != vars_.end()) return Tri::kTrue;
      }
      return Tri::kUnknown;  // files, terminals, options, variables from outside
    }
    ++t.pos;
    if (!a.known) return Tri::kUnknown;
    return tri(!a.text.empty());
  }
  static std::string regex_escape(const std::string& text) {
    std::string out;
    for (char c : text) {
      if (std::string_view("\\.[]{}()*+?^$|").find(c) != std::string_view::npos) out += '\\';
      out += c;
    }
    return out;
  }

  // [[ A =~ B ]]: B quoted is a substring of A; unquoted, a POSIX extended
  // regular expression that matches part of A (bash's regcomp/regexec).
  // Partly quoted, with back-references (time not bounded) or not a valid
  // expression: unknown.
  static Tri regex_match(const std::string& text, const TestArg& re) {
    if (!re.pattern) return tri(text.find(re.text) != std::string::npos);
    if (re.mixed) return Tri::kUnknown;
    for (std::size_t k = 0; k + 1 < re.text.size(); ++k) {
      if (re.text[k] == '\\' && std::isdigit(static_cast<unsigned char>(re.text[k + 1])) != 0) {
        return Tri::kUnknown;
      }
    }
    regex_t compiled;
    if (regcomp(&compiled, re.text.c_str(), REG_EXTENDED | REG_NOSUB) != 0) return Tri::kUnknown;
    const bool found = regexec(&compiled, text.c_str(), 0, nullptr, 0) == 0;
    regfree(&compiled);
    return tri(found);
  }

  // An operand of -eq ...: an integer in [ ], an arithmetic expression in
  // [[ ]].
  std::optional<std::int64_t> test_integer(const TestArgs& t, const std::string& text) {
    if (t.dbl) return arith(text, t.line, 1, "", false);
    const auto first = text.find_first_not_of(" \t\n");
    const auto last = text.find_last_not_of(" \t\n");
    if (first == std::string::npos) return std::nullopt;
    return parse_int64(text.substr(first, last - first + 1));
  }

  // What the reading of conditionals and loops approximated.
  void note_control(ShellScript& script) const {
    auto lines = [](const std::vector<int>& v) {
      std::string out;
      for (std::size_t k = 0; k < v.size() && k < 8; ++k)
        out += (k ? ", " : "") + std::to_string(v[k]);
      if (v.size() > 8) out += " and " + std::to_string(v.size() - 8) + " more";
      return out;
    };
    if (!assumed_unset_.empty()) {
      std::string names;
      for (const auto& [name, line] : assumed_unset_) {
        names += (names.empty() ? "" : ", ") + name + " (line " + std::to_string(line) + ")";
      }
      script.notes.push_back(
          "tests of variables that neither the script nor --megatron-env sets take them as "
          "unset, as bash does when the environment lacks them: " +
          names + " (give --megatron-env NAME=VALUE for another value)");
    }
    if (!defaulted_tests_.empty()) {
      script.notes.push_back(
          std::string(defaulted_tests_.size() > 1 ? "the tests" : "the test") + " on line " +
          lines(defaulted_tests_) +
          " read a default (${VAR:-default} of a variable or argument nothing gives): decided "
          "with it; a launcher keeps the test, so another value at run time still decides");
    }
    if (!unknown_conditions_.empty()) {
      script.notes.push_back(
          std::string(unknown_conditions_.size() > 1 ? "the conditions" : "the condition") +
          " on line " + lines(unknown_conditions_) +
          " cannot be evaluated before the script runs (--megatron-env or "
          "--megatron-script-args may give what they test): each branch is read, in order, "
          "so flags set in any of them are kept");
    }
    if (!loops_.empty()) {
      script.notes.push_back("loops (line " + lines(loops_) + ") are read once: their bodies " +
                             "are not repeated");
    }
    if (!cases_.empty()) {
      script.notes.push_back(
          std::string(cases_.size() > 1 ? "the case statements" : "the case statement") +
          " on line " + lines(cases_) + (cases_.size() > 1 ? " test" : " tests") +
          " a word unknown before the script runs (--megatron-env or "
          "--megatron-script-args may give it): each branch is read, in order, so flags set in "
          "any of them are kept");
    }
  }

  static std::string basename(const std::string& s) {
    const auto slash = s.find_last_of('/');
    return slash == std::string::npos ? s : s.substr(slash + 1);
  }

  void launch_candidate(const std::vector<ShellWord>& all, ShellScript& script) {
    // Words a launcher keeps from other branches are not what runs.
    std::vector<ShellWord> w;
    for (const ShellWord& x : all) {
      if (!x.launcher_only || !w.empty()) w.push_back(x);
    }
    if (w.empty()) return;
    const ShellWord& first = w.front();
    if (first.known) {
      static const std::set<std::string> kLaunchers = {"torchrun",  "srun", "mpirun",  "mpiexec",
                                                       "deepspeed", "env",  "exec",    "nohup",
                                                       "numactl",   "nsys", "taskset", "uv"};
      const std::string b = basename(first.text);
      if (kLaunchers.count(b) == 0 && b.rfind("python", 0) != 0) return;
    }
    std::size_t entry = 0;
    for (std::size_t j = 1; j < w.size(); ++j) {
      if (w[j].known && !w[j].launcher_only && w[j].text.size() > 3 &&
          w[j].text.compare(w[j].text.size() - 3, 3, ".py") == 0) {
        entry = j;
        break;
      }
    }
    if (entry == 0) return;
    if (script.has_command) {
      script.notes.push_back("a second launch command on line " + std::to_string(first.line) +
                             " is ignored; the one on line " + std::to_string(script.launch.line) +
                             " is read");
      return;
    }
    script.has_command = true;
    script.launch.prefix.assign(w.begin(), w.begin() + static_cast<std::ptrdiff_t>(entry));
    std::erase_if(script.launch.prefix, [](const ShellWord& x) { return x.launcher_only; });
    script.launch.entry = w[entry];
    script.launch.args.assign(w.begin() + static_cast<std::ptrdiff_t>(entry) + 1, w.end());
    script.launch.line = first.line;
  }

  // shift [N]: drops the first N positional parameters; nothing when there
  // are fewer (bash's shift fails); all are unknown after a shift by an
  // unknown count.
  void shift(const std::vector<const Word*>& words, std::size_t from) {
    if (!positional_) return;
    std::size_t n = 1;
    if (from < words.size()) {
      const std::vector<Val> count = expand_word(*words[from], true);
      const std::optional<std::int64_t> k =
          count.size() == 1 && count[0].known ? parse_int64(count[0].text) : std::nullopt;
      if (!k || *k < 0) {
        script_->notes.push_back("line " + std::to_string(words[from]->line) + ": shift " +
                                 words[from]->source +
                                 " is not evaluated; the positional parameters after it are "
                                 "unknown");
        positional_.reset();
        return;
      }
      n = static_cast<std::size_t>(*k);
    }
    if (n > positional_->size()) return;  // bash: shift fails, nothing changes
    positional_->erase(positional_->begin(), positional_->begin() + static_cast<long>(n));
  }

  // Says which --megatron-env / --megatron-env-override values the script
  // never read, and why.
  void note_unread_inputs(ShellScript& script) const {
    for (const auto& [name, value] : env_) {
      if (read_.count(name)) continue;
      const std::string given = "--megatron-env " + name + "=" + value;
      if (const auto it = assigned_.find(name); it != assigned_.end()) {
        script.notes.push_back(given + " is not used: the script sets " + name + " on line " +
                               std::to_string(it->second) +
                               " before reading it (--megatron-env-override " + name + "=" + value +
                               " replaces the script's value)");
      } else {
        script.notes.push_back(given + " is not used: the script never reads " + name);
      }
    }
    for (const auto& [name, value] : overrides_) {
      if (!read_.count(name)) {
        script.notes.push_back("--megatron-env-override " + name + "=" + value +
                               " is not used: the script never reads " + name);
      }
    }
  }

  // False (with a note, once per name) if NAME is given by
  // --megatron-env-override, whose value wins over the script's
  // assignments; else records where the script first sets a name that
  // --megatron-env gives.
  bool may_assign(const std::string& name, int line) {
    if (const auto it = overrides_.find(name); it != overrides_.end()) {
      if (override_noted_.insert(name).second) {
        script_->notes.push_back("line " + std::to_string(line) + " sets " + name +
                                 "; --megatron-env-override " + name + "=" + it->second +
                                 " keeps its value (and at every later assignment)");
      }
      return false;
    }
    if (env_.count(name)) assigned_.try_emplace(name, line);
    return true;
  }

  void mark_exported(const std::string& name) {
    if (std::find(exported_.begin(), exported_.end(), name) == exported_.end()) {
      exported_.push_back(name);
    }
  }

  void assign(const Word& w, bool exported) {
    if (exported) mark_exported(w.assign_name);
    if (!may_assign(w.assign_name, w.line)) return;
    // Expand first: the value may read the variable's old value.
    if (w.is_array) {
      // The new elements (they may read the old ones), then appended in
      // place: NAME+=(x) repeated stays linear.
      std::vector<Val> elements;
      const std::string g = guard();
      const Frame* in = frames_.empty() || g.empty() ? nullptr : &frames_.back();
      for (const Word& e : w.elements) {
        for (Val& sw : expand_command_word(e)) {
          if (!g.empty()) sw.guard = sw.guard.empty() ? g : g + " && " + sw.guard;
          if (in != nullptr) {
            sw.frame = in->serial;
            sw.branch = in->branch;
          }
          charge(sw.guard.size(), w.line);
          elements.push_back(std::move(sw));
          if (elements.size() > limits_.max_words) fail(w.line, "an array has too many elements");
        }
      }
      forget_alternatives(w.assign_name);  // an array now
      const std::vector<Val>* old = w.append ? stored(w.assign_name, w.line) : nullptr;
      if (old != nullptr && old->size() + elements.size() > limits_.max_words) {
        fail(w.line, "an array has too many elements");
      }
      if (old == nullptr) {
        std::vector<Val>& target = vars_[w.assign_name];
        // The words another branch of this if / case added (each under its
        // own condition) stay for a launcher: the branches exclude each
        // other, so NAME=(...) here replaces only what the reading uses.
        std::erase_if(target, [&](const Val& e) {
          return in == nullptr || e.frame != in->serial ||
                 (e.branch == in->branch && !e.launcher_only);
        });
        for (Val& e : target) e.launcher_only = true;
        target.insert(target.end(), std::make_move_iterator(elements.begin()),
                      std::make_move_iterator(elements.end()));
      } else {
        std::vector<Val>& target = vars_[w.assign_name];
        if (&target != old) target = *old;  // NAME+=() of a --megatron-env value
        target.insert(target.end(), std::make_move_iterator(elements.begin()),
                      std::make_move_iterator(elements.end()));
      }
    } else {
      const std::string source = w.source.substr(w.source.find('=') + 1);
      script_->assignments[w.assign_name] = {source, w.line};
      const std::string g = guard();
      Val v = expand_joined(w.parts, w.line, source);
      const auto it = vars_.find(w.assign_name);
      if (w.append && it != vars_.end() && !it->second.empty()) {
        // NAME+=value extends the value, and every value a launcher keeps
        // (also under a condition: an approximation).
        append_to(it->second.front(), v, w.line);
        if (const auto a = alternatives_.find(w.assign_name); a != alternatives_.end()) {
          for (Alt& alt : a->second) append_to(alt.value, v, w.line);
        }
      } else {
        // A value set under an undecided condition carries it.
        v.guard = and_guards(g, v.guard);
        set_value(w.assign_name, std::move(v), joined_alternatives(w.parts, w.line, source, g), g,
                  w.line);
      }
    }
  }

  void append_to(Val& old, const Val& v, int line) const {
    if (!old.known || !v.known) {
      std::vector<Piece> pieces;
      append_pieces(pieces, old);
      append_pieces(pieces, v);
      check_size(pieces, line);
      old.pieces = std::move(pieces);
    }
    old.known = old.known && v.known;
    old.text += v.text;
    old.source += v.source;
    check_size(old.text, line);
  }

  // -------------------------------------------------------------------------
  // Values a launcher keeps. A scalar assigned in a branch hapmoe did not
  // decide, or decided only by an assumption, has one value the reading
  // uses (vars_) and others a launcher writes (alternatives_), each under
  // the condition (bash) that sets it. Where a value is assigned is a path:
  // the frames with a condition around it and their branches. A new value
  // under condition g replaces the earlier ones it surely overwrites (same
  // branch, or g empty), leaves those of another branch of a frame around
  // both as they are (the branches exclude each other), and keeps the rest
  // under "! g".

  using Path = std::vector<std::pair<int, int>>;  // (Frame::serial, Frame::branch)
  struct Alt {
    Val value;  // launcher_only, its guard the condition
    Path path;
  };
  static constexpr std::size_t kMaxAlternatives = 16;

  static std::string and_guards(const std::string& a, const std::string& b) {
    if (a.empty()) return b;
    if (b.empty() || a == b || a.starts_with(b + " && ") || a.ends_with(" && " + b)) return a;
    return a + " && " + b;
  }

  Path path_now(int line) {
    Path p;
    for (const Frame& f : frames_) {
      if (!f.guard.empty()) p.emplace_back(f.serial, f.branch);
    }
    charge(p.size() * sizeof(p[0]), line);
    return p;
  }

  // Whether a value assigned at `old` is still there after one assigned
  // at `p` under `g`; if so, `guard` is its condition then.
  bool survives(const Path& old, std::string& guard, const std::string& g, const Path& p,
                int line) {
    if (g.empty()) return false;
    if (p.size() <= old.size() && std::equal(p.begin(), p.end(), old.begin())) return false;
    for (const auto& [serial, branch] : p) {
      for (const auto& [old_serial, old_branch] : old) {
        if (serial == old_serial && branch != old_branch) return true;  // exclusive
      }
    }
    guard = and_guards(guard, negated(g));
    charge(guard.size(), line);
    return true;
  }

  // a || b (empty: always), without the obvious "c || ! c".
  static std::string or_guards(const std::string& a, const std::string& b) {
    if (a.empty() || b.empty()) return "";
    if (a == b) return a;
    if (negated(a) == b || negated(b) == a) return "";
    return "{ " + grouped(a) + " || " + grouped(b) + "; }";
  }

  // ! condition, without a double negation.
  static std::string negated(const std::string& condition) {
    if (condition.starts_with("! ") && grouped(condition.substr(2)) == condition.substr(2)) {
      return condition.substr(2);
    }
    return "! " + grouped(condition);
  }

  // NAME = v (the reading's value) under `g`, with `alts` (the values of
  // other branches its expansion reads, for a launcher).
  void set_value(const std::string& name, Val v, std::vector<Alt> alts, const std::string& g,
                 int line) {
    std::vector<Val>& target = vars_[name];
    const auto a = alternatives_.find(name);
    if (g.empty() && alts.empty()) {  // surely runs: no other value is left
      if (a != alternatives_.end()) alternatives_.erase(a);
      primary_path_.erase(name);
      target.clear();
      target.push_back(std::move(v));
      return;
    }
    const Path p = path_now(line);
    std::vector<Alt> kept;
    if (a != alternatives_.end()) {
      for (Alt& old : a->second) {
        if (survives(old.path, old.value.guard, g, p, line)) kept.push_back(std::move(old));
      }
    }
    if (!target.empty()) {
      Alt old{std::move(target.front()), primary_path_[name]};
      if (survives(old.path, old.value.guard, g, p, line)) {
        old.value.launcher_only = true;
        kept.push_back(std::move(old));
      }
    }
    for (Alt& x : alts) {
      x.path = p;
      kept.push_back(std::move(x));
    }
    target.clear();
    target.push_back(std::move(v));
    primary_path_[name] = p;
    store_alternatives(name, std::move(kept), line);
  }

  // A value of NAME a launcher keeps, set in a branch not taken only by an
  // assumption (under `g`), with `alts` as set_value.
  void add_alternatives(const std::string& name, Val v, std::vector<Alt> alts, const std::string& g,
                        int line) {
    const Path p = path_now(line);
    std::vector<Alt> kept;
    if (const auto a = alternatives_.find(name); a != alternatives_.end()) {
      for (Alt& old : a->second) {
        if (survives(old.path, old.value.guard, g, p, line)) kept.push_back(std::move(old));
      }
    }
    // The reading's value stays; it holds only when this one is not set.
    if (const auto it = vars_.find(name); it != vars_.end() && it->second.size() == 1) {
      Path& old = primary_path_[name];
      (void)survives(old, it->second.front().guard, g, p, line);
    }
    kept.push_back({std::move(v), p});
    for (Alt& x : alts) {
      x.path = p;
      kept.push_back(std::move(x));
    }
    store_alternatives(name, std::move(kept), line);
  }

  // NAME was set another way (unset, an array, arithmetic, ${NAME:=d}):
  // its other values are no longer known to the launcher. (Under a
  // condition this drops them: the launcher then writes the value read, as
  // it did before values of other branches were kept.)
  void forget_alternatives(const std::string& name) {
    if (swapping_ > 0) return;  // expanding with one of them
    alternatives_.erase(name);
    primary_path_.erase(name);
  }

  void store_alternatives(const std::string& name, std::vector<Alt> kept, int line) {
    if (kept.empty()) {
      alternatives_.erase(name);
      return;
    }
    if (kept.size() > kMaxAlternatives) {
      if (alternatives_noted_.insert(name).second) {
        script_->notes.push_back("line " + std::to_string(line) + ": " + name + " has more than " +
                                 std::to_string(kMaxAlternatives) +
                                 " values under conditions hapmoe does not decide; a launcher "
                                 "keeps the last " +
                                 std::to_string(kMaxAlternatives));
      }
      kept.erase(kept.begin(), kept.end() - static_cast<long>(kMaxAlternatives));
    }
    alternatives_[name] = std::move(kept);
  }

  // The variable a ${...} or $NAME part reads, if it is a scalar (not an
  // array element, a length or a special parameter); else "".
  static std::string scalar_name(const Part& p) {
    if (p.kind != PartKind::kParam || p.text.empty() || !is_name_start(p.text[0])) return "";
    std::size_t i = 0;
    while (i < p.text.size() && is_name_char(p.text[i])) ++i;
    if (i < p.text.size() && p.text[i] == '[') return "";
    return p.text.substr(0, i);
  }

  // f() with NAME's value replaced by `value` (and no alternatives).
  template <class F>
  std::invoke_result_t<F> with_value(const std::string& name, const Val& value, F f) {
    const auto it = vars_.find(name);
    const bool had = it != vars_.end();
    std::vector<Val> saved;
    if (had) saved = std::move(it->second);
    Val v = value;
    v.launcher_only = false;
    v.guard.clear();
    vars_[name] = {std::move(v)};
    ++swapping_;
    auto restore = [&]() {
      --swapping_;
      if (had) {
        vars_[name] = std::move(saved);
      } else {
        vars_.erase(name);
      }
    };
    try {
      auto r = f();
      restore();
      return r;
    } catch (...) {
      restore();
      throw;
    }
  }

  // The values a launcher keeps for an assignment NAME=parts under `g`:
  // the value again with each other value of each variable it reads.
  std::vector<Alt> joined_alternatives(const std::vector<Part>& parts, int line,
                                       const std::string& source, const std::string& g) {
    std::vector<Alt> out;
    if (swapping_ > 0 || alternatives_.empty()) return out;
    for_each_alternative(parts, [&](const std::string& name, const Alt& alt) {
      // NAME's other value with the other variables' values read: under
      // NAME's condition only (what differs from the value read is
      // NAME's doing).
      Val x = with_value(name, alt.value, [&] { return expand_joined(parts, line, source); });
      x.guard = and_guards(g, alt.value.guard);
      x.launcher_only = true;
      charge({x}, line);
      out.push_back({std::move(x), {}});
    });
    return out;
  }

  // f(name, alternative) for each other value of each variable `parts`
  // read (each variable once); true when any variable read has some.
  template <class F>
  bool for_each_alternative(const std::vector<Part>& parts, F f) {
    std::set<std::string> seen;
    for (const Part& p : parts) {
      const std::string name = scalar_name(p);
      const auto a = name.empty() ? alternatives_.end() : alternatives_.find(name);
      if (a == alternatives_.end() || !seen.insert(name).second) continue;
      const std::vector<Alt> alts = a->second;  // f may change alternatives_
      for (const Alt& alt : alts) f(name, alt);
    }
    return !seen.empty();
  }

  // A word of a command or an array element: expand_word, and the words a
  // launcher keeps from the other values of the variables it reads. A
  // word that is one variable, a value rather than flags in all of them,
  // stays one word that `varies`: a launcher writes the variable and
  // defines it as the script does.
  std::vector<Val> expand_command_word(const Word& w) {
    std::vector<Val> out = expand_word(w, true);
    if (swapping_ > 0 || alternatives_.empty()) return out;
    const std::vector<Part> parts = word_parts_with_assignment(w);
    std::vector<std::pair<std::vector<Val>, std::string>> others;  // words, condition
    const bool any = for_each_alternative(parts, [&](const std::string& name, const Alt& alt) {
      std::vector<Val> fields = with_value(name, alt.value, [&] { return expand_word(w, true); });
      std::erase_if(fields, [](const Val& f) { return f.launcher_only; });
      charge(fields, w.line);
      others.emplace_back(std::move(fields), alt.value.guard);
    });
    if (!any) return out;
    const bool single =
        parts.size() == 1 || (parts.size() == 2 && parts[0].kind == PartKind::kLiteral &&
                              parts[0].quoted && parts[0].text.empty());
    const auto is_flag = [](const Val& f) { return f.known && f.text.rfind("--", 0) == 0; };
    if (single && out.size() == 1 && !is_flag(out[0]) &&
        std::all_of(others.begin(), others.end(), [&](const auto& o) {
          return std::none_of(o.first.begin(), o.first.end(), is_flag);
        })) {
      out[0].varies = true;
      out[0].source = w.source;
      out[0].guard.clear();
      return out;
    }
    // Flags: what each other value adds or leaves out, under its condition.
    for (const auto& [fields, g] : others) merge_launch(out, fields, g, w.line);
    return out;
  }

  // The words of NAME (a scalar or an array), or null if it is unset;
  // not copied (an array may be large).
  const std::vector<Val>* stored(const std::string& name, int line) {
    if (const auto it = vars_.find(name); it != vars_.end()) {
      if (overrides_.count(name)) read_.insert(name);
      return &it->second;
    }
    if (const auto it = env_.find(name); it != env_.end()) {
      read_.insert(name);
      auto [cached, added] = env_vals_.try_emplace(name);
      if (added) cached->second.push_back(make_val(it->second, shell_quote(it->second), line));
      return &cached->second;
    }
    return nullptr;
  }

  // $N, $#, $@ and $* when --megatron-script-args gave the positional
  // parameters: true, with `value` their words ($N beyond the last: none).
  // False for the others ($0, $$, $?, ...) and without the arguments.
  bool positional(const std::string& name, int line, std::vector<Val>& value) const {
    value.clear();
    if (!positional_) return false;
    const std::vector<Val>& args = *positional_;
    if (name == "@" || name == "*") {
      value = args;
    } else if (name == "#") {
      value.push_back(make_val(std::to_string(args.size()), std::to_string(args.size()), line));
    } else if (std::isdigit(static_cast<unsigned char>(name[0])) != 0 && name != "0") {
      const std::size_t n = name.size() > 9 ? args.size() + 1 : std::stoul(name);
      if (n <= args.size()) value.push_back(args[n - 1]);
    } else {
      return false;
    }
    for (Val& w : value) w.line = line;
    return true;
  }

  // A copy of the value of NAME, charged to the expansion budget.
  Value lookup(const std::string& name, int line) {
    Value v;
    const std::vector<Val>* w = stored(name, line);
    v.set = w != nullptr;
    if (w != nullptr) v.words = *w;
    charge(v.words, line);
    return v;
  }

  // Counts what expansions copy, so a script that copies a large value
  // many times fails in bounded time.
  void charge(const std::vector<Val>& words, int line) {
    std::size_t n = 0;
    for (const Val& w : words) n += w.text.size() + pieces_size(w.pieces) + w.guard.size() + 1;
    charge(n, line);
  }

  // The same for `n` bytes of conditions (Frame::guard, ShellWord::guard),
  // which grow with every undecided branch before them: a chain of
  // thousands of undecided elif or case branches fails in bounded time.
  void charge(std::size_t n, int line) {
    expanded_ += n;
    if (expanded_ > limits_.max_expanded) {
      fail(line, "the script's expansions copy more than " + std::to_string(limits_.max_expanded) +
                     " bytes (runaway variable expansion?)");
    }
  }

  static Val unknown(const std::string& source, int line) {
    Val v = make_val("", source, line);
    v.known = false;
    v.pieces.push_back({source, false});
    return v;
  }

  // ${inner} or $NAME -> fields (several only for arrays with [@]/[*]).
  Value expand_param(const Part& p, int line, int depth) {
    if (depth > limits_.max_nesting) fail(line, "expansions are nested too deeply");
    const std::string src = p.braced ? "${" + p.text + "}" : "$" + p.text;
    const std::string& s = p.text;
    Value out;
    if (s.empty()) fail(line, "bad substitution " + src);
    if (s[0] == '#' && s.size() > 1) {  // ${#NAME} / ${#NAME[@]}
      std::string name = s.substr(1);
      bool count = false;
      if (name.size() > 3 && name.compare(name.size() - 3, 3, "[@]") == 0) {
        name.resize(name.size() - 3);
        count = true;
      }
      const std::vector<Val>* v = stored(name, line);
      if (v == nullptr || (!count && !v->empty() && !v->front().known)) {
        out.words.push_back(unknown(src, line));
      } else {
        const std::size_t n = count ? v->size() : (v->empty() ? 0 : v->front().text.size());
        out.words.push_back(make_val(std::to_string(n), std::to_string(n), line));
      }
      return out;
    }
    std::size_t i = 0;
    if (is_name_start(s[0])) {
      while (i < s.size() && is_name_char(s[i])) ++i;
    } else {
      i = 1;  // positional or special parameter
      while (std::isdigit(static_cast<unsigned char>(s[0])) != 0 && i < s.size() &&
             std::isdigit(static_cast<unsigned char>(s[i])) != 0) {
        ++i;
      }
    }
    const std::string name = s.substr(0, i);
    std::string index;
    if (i < s.size() && s[i] == '[') {
      const auto close = s.find(']', i);
      if (close == std::string::npos) fail(line, "bad substitution " + src);
      index = s.substr(i + 1, close - i - 1);
      i = close + 1;
    }
    const std::string op_and_word = s.substr(i);
    const bool special = !is_name_start(name[0]);
    std::vector<Val> special_value;
    // A special parameter is unknown unless it is positional and
    // --megatron-script-args gave them.
    const bool unknown_special = special && !positional(name, line, special_value);
    const std::vector<Val>* all = nullptr;
    if (!special) {
      all = stored(name, line);
    } else if (!unknown_special && (!special_value.empty() || name == "@" || name == "*")) {
      all = &special_value;
    }
    Value v;
    v.set = all != nullptr;
    // Select by index (copying only what is selected).
    if (v.set && !index.empty() && index != "@" && index != "*") {
      // An index that is not arithmetic (an associative array's key, a
      // command substitution) is not evaluated.
      const bool arithmetic =
          std::all_of(index.begin(), index.end(),
                      [](char c) {
                        return is_name_char(c) ||
                               std::string_view(" \t$+-*/%(){}<>=!&|^~?:,#").find(c) !=
                                   std::string_view::npos;
                      }) &&
          index.find("$(") == std::string::npos;
      const std::optional<std::int64_t> k =
          arithmetic ? arith(index, line, depth + 1, src, false) : std::nullopt;
      if (!special) all = stored(name, line);  // the index may have assigned variables
      const std::int64_t kv = k.value_or(-1);
      if (!k) {
        v.words.assign(1, unknown(src, line));
      } else if (all == nullptr || kv < 0 || static_cast<std::size_t>(kv) >= all->size()) {
        v.set = false;
      } else {
        v.words = {(*all)[static_cast<std::size_t>(kv)]};
      }
    } else if (v.set && index.empty() && name != "@" && name != "*") {
      if (!all->empty()) v.words = {all->front()};  // $ARR is its first element
    } else if (v.set) {
      v.words = *all;
    }
    charge(v.words, line);
    const bool empty = !v.set || v.words.empty() ||
                       (v.words.size() == 1 && v.words[0].known && v.words[0].text.empty());
    if (op_and_word.empty()) {
      if (!v.set && !special && testing_) {
        // A test of a variable nothing sets ([ -z ${MP_VP} ]): unset, as
        // when the environment does not have it; said in a note.
        assumed_unset_.try_emplace(name, line);
        ++assumed_count_;
        return out;
      }
      if (unknown_special || (!v.set && !special)) {
        // Not defined by the script: unknown until run time.
        out.words.push_back(unknown(src, line));
        return out;
      }
      out.words = v.words;
      return out;
    }
    std::string op;
    for (const char* candidate : {":-", ":=", ":?", ":+", "-", "=", "?", "+"}) {
      if (op_and_word.rfind(candidate, 0) == 0) {
        op = candidate;
        break;
      }
    }
    if (op.empty()) {
      // ${VAR%suffix}, ${VAR/a/b}, ${VAR:1:2}, ...: not evaluated.
      out.words.push_back(unknown(src, line));
      return out;
    }
    const std::string arg = op_and_word.substr(op.size());
    const bool use_alternative = op[0] == ':' ? empty : !v.set;
    const char kind = op.back();
    auto expand_arg = [&]() {
      const std::vector<Part> parts = Lexer::parse_nested(arg, origin_, limits_, line, depth + 1);
      Value r;
      r.words.push_back(expand_joined(parts, line, arg, depth + 1));
      return r;
    };
    if (kind == '-' || kind == '=') {
      if (!use_alternative) {
        out.words = v.words;
        return out;
      }
      out = expand_arg();
      if (all == nullptr && (!special || !positional_)) {
        for (Val& x : out.words) x.defaulted = true;
      }
      if (kind == '=' && !special && swapping_ == 0 && may_assign(name, line)) {
        vars_[name] = out.words;
        forget_alternatives(name);
      }
      return out;
    }
    if (kind == '?') {
      if (use_alternative) {
        out.words.push_back(unknown(src, line));
      } else {
        out.words = v.words;
      }
      return out;
    }
    // '+'
    if (use_alternative) {
      out.words.push_back(make_val("", "", line));
      return out;
    }
    return expand_arg();
  }

  // -------------------------------------------------------------------------
  // Arithmetic: $((expr)), ((expr)), let, array indices. Bash's operators
  // and precedence over 64-bit integers that wrap as bash's do. Expansions
  // in the expression are done first, as bash does; an unknown one becomes
  // a marker \x01K\x02 (K indexes `unknowns`) that reads as an unknown
  // operand. An expression that cannot be evaluated (an unknown value, a
  // division by zero, syntax the reader does not know) gives an unknown
  // value and a note, never an error; only the bounds (nesting, steps) are
  // errors.

  // Thrown inside the evaluator: the expression cannot be evaluated.
  struct ArithFailure {
    std::string why;
  };

  struct Num {
    std::int64_t v = 0;
    bool known = true;
  };

  struct ArithUnknown {
    std::string text;   // as it reads back inside $((...)): "$1", "$(cmd)"
    std::string shown;  // as the note names it: "$NNODES"
  };

  struct Arith {
    std::string e;  // the expression, expansions done
    std::vector<ArithUnknown> unknowns;
    bool markers = true;  // false: a variable's value (no markers)
    std::size_t pos = 0;
    int line = 0;
    int depth = 0;              // nesting, against max_nesting
    int skip = 0;               // > 0: in a branch not taken (no errors, no effects)
    int uncertain = 0;          // > 0: in a branch that may not run
    std::string first_unknown;  // the first unknown value used, for the note
  };

  // A note on arithmetic; the first kArithNotes are kept, then one that
  // says there are more.
  static constexpr int kArithNotes = 20;
  void arith_note(const std::string& text) {
    if (script_ == nullptr || arith_notes_ > kArithNotes || !arith_noted_.insert(text).second) {
      return;
    }
    if (++arith_notes_ > kArithNotes) {
      script_->notes.push_back(
          "more arithmetic the reader cannot evaluate is not named (the first " +
          std::to_string(kArithNotes) + " are)");
    } else {
      script_->notes.push_back(text);
    }
  }

  // The value of `expr` (as written in the script), or nullopt if it is
  // unknown, with a note naming it as `shown` (default "$((expr))"), unless
  // it merely uses an unknown value and `note_unknown` is false.
  std::optional<std::int64_t> arith(const std::string& expr, int line, int depth,
                                    const std::string& shown = "", bool note_unknown = true) {
    if (depth > limits_.max_nesting) fail(line, "expansions are nested too deeply");
    const std::string name = shown.empty() ? "$((" + expr + "))" : shown;
    Arith a;
    a.line = line;
    a.depth = depth;
    std::string why;
    try {
      a.e = arith_expand(expr, line, depth, a.unknowns);
      const Num n = arith_comma(a);
      arith_ws(a);
      if (a.pos < a.e.size()) arith_syntax(a, "unexpected");
      if (n.known) return n.v;
      // No name: unknown inside a nested $((...)), noted there.
      if (a.first_unknown.empty() || !note_unknown) return std::nullopt;
      why = "it uses " + a.first_unknown + ", which has no value the script defines";
    } catch (const ArithFailure& f) {
      why = f.why;
    }
    arith_note(name + " on line " + std::to_string(line) + " is not evaluated (" + why +
               "); its value is unknown");
    return std::nullopt;
  }

  // The expression with its expansions done (see above).
  std::string arith_expand(const std::string& expr, int line, int depth,
                           std::vector<ArithUnknown>& unknowns) {
    const std::vector<Part> parts = Lexer::parse_nested(expr, origin_, limits_, line, depth + 1);
    std::string out;
    for (const Part& p : parts) {
      if (p.kind == PartKind::kLiteral) {
        if (p.text.find_first_of("\x01\x02") != std::string::npos) {
          throw ArithFailure{"a control character in the expression"};
        }
        out += p.text;
        continue;
      }
      const std::vector<Val> vals = p.kind == PartKind::kParam
                                        ? expand_param(p, line, depth + 1).words
                                        : expand_part(p, line, depth + 1);
      ArithUnknown u;
      bool known = true;
      std::string text;
      for (std::size_t k = 0; k < vals.size(); ++k) {
        if (k > 0) text += ' ';
        known = known && vals[k].known;
        if (vals[k].known) {
          text += vals[k].text;
          u.text += vals[k].text;
        } else {
          for (const Piece& q : vals[k].pieces) u.text += q.text;
          if (vals[k].pieces.empty()) u.text += vals[k].source;
        }
      }
      if (known) {
        if (text.find_first_of("\x01\x02") != std::string::npos) {
          throw ArithFailure{"a control character in the expression"};
        }
        out += text;
      } else if (p.kind == PartKind::kArith) {
        // Unknown inside: noted where it was evaluated.
        u.text = "$((" + p.text + "))";
        out += "\x01" + std::to_string(unknowns.size()) + "\x02";
        unknowns.push_back(std::move(u));
      } else {
        u.shown =
            p.kind == PartKind::kParam ? (p.braced ? "${" + p.text + "}" : "$" + p.text) : p.text;
        out += "\x01" + std::to_string(unknowns.size()) + "\x02";
        unknowns.push_back(std::move(u));
      }
      check_size(out, line);
    }
    return out;
  }

  void arith_step(Arith& a, std::size_t n = 1) {
    arith_steps_ += n;
    if (arith_steps_ > limits_.max_arith_steps) {
      fail(a.line, "the script's arithmetic takes more than " +
                       std::to_string(limits_.max_arith_steps) + " steps");
    }
  }

  void arith_nest(Arith& a) {
    if (++a.depth > limits_.max_nesting) fail(a.line, "expansions are nested too deeply");
  }

  [[noreturn]] static void arith_syntax(const Arith& a, const std::string& what) {
    std::string at = a.pos < a.e.size() ? a.e.substr(a.pos, 20) : "";
    for (char& c : at) {
      if (c == '\x01' || c == '\x02' || c == '\n') c = ' ';
    }
    throw ArithFailure{"cannot read it: " + what +
                       (at.empty() ? " at the end" : " at \"" + at + "\"")};
  }

  static void arith_ws(Arith& a) {
    while (a.pos < a.e.size() &&
           (a.e[a.pos] == ' ' || a.e[a.pos] == '\t' || a.e[a.pos] == '\n' || a.e[a.pos] == '\r')) {
      ++a.pos;
    }
  }

  // Whether the text at pos is `op` (and not a longer operator that starts
  // with it, listed in `longer`).
  static bool arith_at(Arith& a, std::string_view op,
                       std::initializer_list<std::string_view> longer = {}) {
    arith_ws(a);
    if (a.e.compare(a.pos, op.size(), op) != 0) return false;
    for (std::string_view l : longer) {
      if (a.e.compare(a.pos, l.size(), l) == 0) return false;
    }
    return true;
  }

  static bool arith_take(Arith& a, std::string_view op,
                         std::initializer_list<std::string_view> longer = {}) {
    if (!arith_at(a, op, longer)) return false;
    a.pos += op.size();
    return true;
  }

  static std::int64_t wrap_add(std::int64_t x, std::int64_t y) {
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(x) + static_cast<std::uint64_t>(y));
  }
  static std::int64_t wrap_sub(std::int64_t x, std::int64_t y) {
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(x) - static_cast<std::uint64_t>(y));
  }
  static std::int64_t wrap_mul(std::int64_t x, std::int64_t y) {
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(x) * static_cast<std::uint64_t>(y));
  }

  // x op y for the binary operators (and the assignments x op= y).
  static std::int64_t arith_apply(const Arith& a, std::string_view op, std::int64_t x,
                                  std::int64_t y) {
    if (op == "+") return wrap_add(x, y);
    if (op == "-") return wrap_sub(x, y);
    if (op == "*") return wrap_mul(x, y);
    if (op == "/" || op == "%") {
      if (y == 0) {
        if (a.skip > 0) return 0;
        throw ArithFailure{"division by 0"};
      }
      if (x == INT64_MIN && y == -1) return op == "/" ? INT64_MIN : 0;  // as bash
      return op == "/" ? x / y : x % y;
    }
    if (op == "**") {
      if (y < 0) {
        if (a.skip > 0) return 0;
        throw ArithFailure{"exponent less than 0"};
      }
      std::int64_t r = 1;
      std::int64_t b = x;
      for (std::uint64_t n = static_cast<std::uint64_t>(y); n > 0; n >>= 1) {
        if (n & 1) r = wrap_mul(r, b);
        b = wrap_mul(b, b);
      }
      return r;
    }
    if (op == "<<") {
      return static_cast<std::int64_t>(static_cast<std::uint64_t>(x) << (y & 63));
    }
    if (op == ">>") return x >> (y & 63);
    if (op == "&") return x & y;
    if (op == "|") return x | y;
    if (op == "^") return x ^ y;
    if (op == "<") return x < y;
    if (op == "<=") return x <= y;
    if (op == ">") return x > y;
    if (op == ">=") return x >= y;
    if (op == "==") return x == y;
    if (op == "!=") return x != y;
    throw ArithFailure{"operator " + std::string(op)};
  }

  // expr , expr
  Num arith_comma(Arith& a) {
    Num v = arith_assign(a);
    while (arith_take(a, ",")) v = arith_assign(a);
    return v;
  }

  // NAME = expr, NAME op= expr, or a conditional.
  Num arith_assign(Arith& a) {
    arith_ws(a);
    const std::size_t start = a.pos;
    if (a.pos < a.e.size() && is_name_start(a.e[a.pos])) {
      std::size_t end = a.pos;
      while (end < a.e.size() && is_name_char(a.e[end])) ++end;
      const std::string name = a.e.substr(a.pos, end - a.pos);
      a.pos = end;
      static constexpr std::string_view kOps[] = {
          "<<=", ">>=", "+=", "-=", "*=", "/=", "%=", "&=", "^=", "|=", "="};
      for (std::string_view op : kOps) {
        if (!arith_at(a, op, {"=="})) continue;
        a.pos += op.size();
        arith_nest(a);
        const std::size_t rhs_start = a.pos;
        const Num rhs = arith_assign(a);
        --a.depth;
        Num v = rhs;
        if (op != "=") {
          const Num old = arith_variable(a, name);
          v.known = old.known && rhs.known;
          if (v.known) v.v = arith_apply(a, op.substr(0, op.size() - 1), old.v, rhs.v);
        }
        std::string rhs_text = arith_source(a, rhs_start, a.pos);
        if (op != "=") {
          rhs_text = "(" + arith_text_of(name) + ")" + std::string(op.substr(0, op.size() - 1)) +
                     "(" + rhs_text + ")";
        }
        arith_store(a, name, v, rhs_text);
        return v;
      }
      a.pos = start;
    }
    return arith_cond(a);
  }

  // The text of e[from, to) as it reads back inside $((...)).
  std::string arith_source(const Arith& a, std::size_t from, std::size_t to) const {
    std::string out;
    for (std::size_t i = from; i < to; ++i) {
      if (a.markers && a.e[i] == '\x01') {
        const std::size_t close = a.e.find('\x02', i);
        out += a.unknowns[std::stoul(a.e.substr(i + 1, close - i - 1))].text;
        i = close;
      } else {
        out += a.e[i];
      }
    }
    const auto first = out.find_first_not_of(" \t\n");
    const auto last = out.find_last_not_of(" \t\n");
    return first == std::string::npos ? "" : out.substr(first, last - first + 1);
  }

  // NAME's value as it reads back inside $((...)).
  std::string arith_text_of(const std::string& name) {
    const std::vector<Val>* v = stored(name, 0);
    if (v == nullptr || v->empty()) return name;
    const Val& w = v->front();
    if (w.known) return w.text.empty() ? "0" : w.text;
    std::string out;
    for (const Piece& q : w.pieces) out += q.text;
    return out.empty() ? w.source : out;
  }

  // NAME = v (unknown: its value reads back as $((rhs))).
  void arith_store(Arith& a, const std::string& name, const Num& v, const std::string& rhs) {
    // Not again while a word is expanded with another value of a variable
    // (expand_command_word): the script assigns once.
    if (a.skip > 0 || swapping_ > 0 || !may_assign(name, a.line)) return;
    forget_alternatives(name);
    if (!v.known || a.uncertain > 0) {
      Val u = unknown("$((" + rhs + "))", a.line);
      vars_[name] = {u};
    } else {
      vars_[name] = {make_val(std::to_string(v.v), std::to_string(v.v), a.line)};
    }
  }

  // c ? x : y
  Num arith_cond(Arith& a) {
    const Num c = arith_binary(a, 1);
    if (!arith_take(a, "?")) return c;
    arith_nest(a);
    const bool taken = c.known && c.v != 0;
    const bool not_taken = c.known && c.v == 0;
    if (!c.known) ++a.uncertain;
    if (not_taken) ++a.skip;
    const Num x = arith_comma(a);
    if (not_taken) --a.skip;
    if (!arith_take(a, ":")) arith_syntax(a, "':' expected for the conditional");
    if (taken) ++a.skip;
    const Num y = arith_cond(a);
    if (taken) --a.skip;
    if (!c.known) --a.uncertain;
    --a.depth;
    if (!c.known) return {0, false};
    return taken ? x : y;
  }

  // Binary operators by precedence, lowest (1: ||) to highest (10: * / %);
  // 11 is **.
  Num arith_binary(Arith& a, int level) {
    if (level == 11) return arith_power(a);
    Num x = arith_binary(a, level + 1);
    while (true) {
      arith_step(a);
      if (level == 1 || level == 2) {
        const std::string_view op = level == 1 ? "||" : "&&";
        if (!arith_take(a, op)) return x;
        // Short-circuit: the right side is read, not evaluated, when the
        // left decides.
        const bool decided = x.known && (level == 1 ? x.v != 0 : x.v == 0);
        if (decided) ++a.skip;
        if (!x.known) ++a.uncertain;
        const Num y = arith_binary(a, level + 1);
        if (decided) --a.skip;
        if (!x.known) --a.uncertain;
        if (decided) {
          x = {level == 1 ? 1 : 0, true};
        } else if (y.known && (level == 1 ? y.v != 0 : y.v == 0)) {
          x = {level == 1 ? 1 : 0, true};
        } else if (x.known && y.known) {
          x = {y.v != 0 ? 1 : 0, true};
        } else {
          x = {0, false};
        }
        continue;
      }
      std::string_view op;
      switch (level) {
        case 3:
          if (arith_at(a, "|", {"||", "|="})) op = "|";
          break;
        case 4:
          if (arith_at(a, "^", {"^="})) op = "^";
          break;
        case 5:
          if (arith_at(a, "&", {"&&", "&="})) op = "&";
          break;
        case 6:
          if (arith_at(a, "==")) op = "==";
          if (arith_at(a, "!=")) op = "!=";
          break;
        case 7:
          if (arith_at(a, "<="))
            op = "<=";
          else if (arith_at(a, ">="))
            op = ">=";
          else if (arith_at(a, "<", {"<<"}))
            op = "<";
          else if (arith_at(a, ">", {">>"}))
            op = ">";
          break;
        case 8:
          if (arith_at(a, "<<", {"<<="}))
            op = "<<";
          else if (arith_at(a, ">>", {">>="}))
            op = ">>";
          break;
        case 9:
          if (arith_at(a, "+", {"+="}) && !arith_incdec(a))
            op = "+";
          else if (arith_at(a, "-", {"-="}) && !arith_incdec(a))
            op = "-";
          break;
        default:  // 10
          if (arith_at(a, "*", {"**", "*="}))
            op = "*";
          else if (arith_at(a, "/", {"/="}))
            op = "/";
          else if (arith_at(a, "%", {"%="}))
            op = "%";
          break;
      }
      if (op.empty()) return x;
      a.pos += op.size();
      const Num y = arith_binary(a, level + 1);
      if (x.known && y.known) {
        x.v = arith_apply(a, op, x.v, y.v);
      } else {
        x = {0, false};
      }
    }
  }

  // x ** y (right-associative; binds less tightly than unary minus).
  Num arith_power(Arith& a) {
    Num x = arith_unary(a);
    if (!arith_take(a, "**", {"**="})) return x;
    arith_nest(a);
    const Num y = arith_power(a);
    --a.depth;
    if (!x.known || !y.known) return {0, false};
    return {arith_apply(a, "**", x.v, y.v), true};
  }

  // Whether "++" / "--" at pos is an increment: followed by a name (as
  // bash reads it; else 5--3 is 5 - -3).
  static bool arith_incdec(const Arith& a) {
    if (a.pos + 1 >= a.e.size() || a.e[a.pos + 1] != a.e[a.pos]) return false;
    std::size_t i = a.pos + 2;
    while (i < a.e.size() && (a.e[i] == ' ' || a.e[i] == '\t' || a.e[i] == '\n')) ++i;
    return i < a.e.size() && is_name_start(a.e[i]);
  }

  Num arith_unary(Arith& a) {
    arith_step(a);
    arith_ws(a);
    if (a.pos >= a.e.size()) arith_syntax(a, "an operand expected");
    const char c = a.e[a.pos];
    const char n = a.pos + 1 < a.e.size() ? a.e[a.pos + 1] : '\0';
    if ((c == '+' || c == '-') && n == c && arith_incdec(a)) {
      // ++NAME / --NAME
      a.pos += 2;
      arith_ws(a);
      const std::size_t start = a.pos;
      while (a.pos < a.e.size() && is_name_char(a.e[a.pos])) ++a.pos;
      const std::string name = a.e.substr(start, a.pos - start);
      if (!is_valid_name(name)) arith_syntax(a, "a variable expected after ++/--");
      const Num old = arith_variable(a, name);
      const Num v =
          old.known ? Num{c == '+' ? wrap_add(old.v, 1) : wrap_sub(old.v, 1), true} : Num{0, false};
      arith_store(a, name, v, "(" + arith_text_of(name) + (c == '+' ? ")+1" : ")-1"));
      return v;
    }
    if (c == '+' || c == '-' || c == '!' || c == '~') {
      ++a.pos;
      arith_nest(a);
      const Num v = arith_unary(a);
      --a.depth;
      if (!v.known) return v;
      switch (c) {
        case '-':
          return {wrap_sub(0, v.v), true};
        case '!':
          return {v.v == 0 ? 1 : 0, true};
        case '~':
          return {~v.v, true};
        default:
          return v;
      }
    }
    return arith_primary(a);
  }

  Num arith_primary(Arith& a) {
    const char c = a.e[a.pos];
    if (c == '(') {
      ++a.pos;
      arith_nest(a);
      const Num v = arith_comma(a);
      --a.depth;
      if (!arith_take(a, ")")) arith_syntax(a, "')' expected");
      return v;
    }
    if (c == '\x01' && a.markers) {
      const std::size_t close = a.e.find('\x02', a.pos);
      const ArithUnknown& u = a.unknowns[std::stoul(a.e.substr(a.pos + 1, close - a.pos - 1))];
      a.pos = close + 1;
      if (a.skip == 0 && a.first_unknown.empty() && !u.shown.empty()) a.first_unknown = u.shown;
      return {0, false};
    }
    if (std::isdigit(static_cast<unsigned char>(c)) != 0) return arith_number(a);
    if (is_name_start(c)) {
      const std::size_t start = a.pos;
      while (a.pos < a.e.size() && is_name_char(a.e[a.pos])) ++a.pos;
      const std::string name = a.e.substr(start, a.pos - start);
      arith_step(a, name.size());
      if (a.pos < a.e.size() && a.e[a.pos] == '[') {
        // NAME[index]: an array element.
        ++a.pos;
        arith_nest(a);
        const Num k = arith_comma(a);
        --a.depth;
        if (!arith_take(a, "]")) arith_syntax(a, "']' expected");
        if (a.skip > 0) return {0, true};
        const std::vector<Val>* v = stored(name, a.line);
        if (!k.known || v == nullptr) {
          if (a.first_unknown.empty()) a.first_unknown = name;
          return {0, false};
        }
        if (k.v < 0 || static_cast<std::size_t>(k.v) >= v->size()) return {0, true};
        const Val element = (*v)[static_cast<std::size_t>(k.v)];
        return arith_value(a, name, element);
      }
      // NAME++ / NAME--
      if (arith_at(a, "++") || arith_at(a, "--")) {
        const bool inc = a.e[a.pos] == '+';
        a.pos += 2;
        const Num old = arith_variable(a, name);
        const Num v =
            old.known ? Num{inc ? wrap_add(old.v, 1) : wrap_sub(old.v, 1), true} : Num{0, false};
        arith_store(a, name, v, "(" + arith_text_of(name) + (inc ? ")+1" : ")-1"));
        return old;
      }
      return arith_variable(a, name);
    }
    arith_syntax(a, "an operand expected");
  }

  // 42, 0x2a, 052, 16#2a, 2#101010.
  Num arith_number(Arith& a) {
    const std::size_t start = a.pos;
    while (a.pos < a.e.size() &&
           (is_name_char(a.e[a.pos]) || a.e[a.pos] == '#' || a.e[a.pos] == '@')) {
      ++a.pos;
    }
    const std::string t = a.e.substr(start, a.pos - start);
    arith_step(a, t.size());
    int base = 10;
    std::string digits = t;
    if (const auto hash = t.find('#'); hash != std::string::npos) {
      const std::string b = t.substr(0, hash);
      if (b.empty() || b.size() > 2 || !std::all_of(b.begin(), b.end(), [](char d) {
            return std::isdigit(static_cast<unsigned char>(d)) != 0;
          })) {
        throw ArithFailure{"invalid number " + t};
      }
      base = std::stoi(b);
      if (base < 2 || base > 64) throw ArithFailure{"invalid arithmetic base in " + t};
      digits = t.substr(hash + 1);
    } else if (t.size() > 1 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) {
      base = 16;
      digits = t.substr(2);
    } else if (t.size() > 1 && t[0] == '0') {
      base = 8;
      digits = t.substr(1);
    }
    if (digits.empty()) throw ArithFailure{"invalid number " + t};
    std::uint64_t v = 0;
    for (char d : digits) {
      int k = 0;
      if (std::isdigit(static_cast<unsigned char>(d)) != 0) {
        k = d - '0';
      } else if (d >= 'a' && d <= 'z') {
        k = d - 'a' + 10;
      } else if (d >= 'A' && d <= 'Z') {
        k = d - 'A' + (base <= 36 ? 10 : 36);
      } else if (d == '@') {
        k = 62;
      } else if (d == '_') {
        k = 63;
      } else {
        k = 64;
      }
      if (k >= base) throw ArithFailure{"value too great for base in " + t};
      v = v * static_cast<std::uint64_t>(base) + static_cast<std::uint64_t>(k);
    }
    return {static_cast<std::int64_t>(v), true};
  }

  // A variable's value in arithmetic: unknown if the script does not
  // define it, 0 if empty, else its text read as an expression (as bash
  // does: A=B B=3 gives $((A)) = 3).
  Num arith_variable(Arith& a, const std::string& name) {
    if (a.skip > 0) return {0, true};
    const std::vector<Val>* v = stored(name, a.line);
    if (v == nullptr || v->empty()) {
      if (a.first_unknown.empty()) a.first_unknown = name;
      return {0, false};
    }
    const Val first = v->front();  // evaluating it may assign the variable
    return arith_value(a, name, first);
  }

  Num arith_value(Arith& a, const std::string& name, const Val& w) {
    if (!w.known) {
      if (a.first_unknown.empty()) a.first_unknown = name;
      return {0, false};
    }
    if (w.text.find_first_not_of(" \t\n") == std::string::npos) return {0, true};
    Arith sub;
    sub.e = w.text;
    sub.markers = false;
    sub.line = a.line;
    sub.depth = a.depth;
    arith_nest(sub);
    const Num r = arith_comma(sub);
    arith_ws(sub);
    if (sub.pos < sub.e.size()) {
      throw ArithFailure{name + "=\"" + w.text.substr(0, 40) + "\" is not a number"};
    }
    if (!r.known && a.first_unknown.empty()) {
      a.first_unknown = sub.first_unknown.empty() ? name : sub.first_unknown;
    }
    return r;
  }

  void check_size(const std::vector<Piece>& pieces, int line) const {
    if (pieces_size(pieces) > limits_.max_value) {
      fail(line, "a value grows beyond " + std::to_string(limits_.max_value) +
                     " bytes (runaway variable expansion?)");
    }
  }

  // One word without field splitting (assignments, ${VAR:-default}).
  Val expand_joined(const std::vector<Part>& parts, int line, const std::string& source,
                    int depth = 0) {
    Val w = make_val("", source, line);
    for (const Part& p : parts) {
      for (const Val& f : expand_part(p, line, depth)) {
        if (f.launcher_only) continue;  // not part of a value the reading uses
        w.known = w.known && f.known;
        w.defaulted = w.defaulted || f.defaulted;
        if (w.guard.empty()) w.guard = f.guard;
        w.text += f.text;
        append_pieces(w.pieces, f);
      }
      check_size(w.text, line);
      check_size(w.pieces, line);
    }
    if (w.known) {
      if (!w.defaulted) w.source = shell_quote(w.text);
      w.pieces.clear();
    }
    return w;
  }

  std::vector<Val> expand_part(const Part& p, int line, int depth) {
    switch (p.kind) {
      case PartKind::kLiteral:
        return {make_val(p.text, p.text, line)};
      case PartKind::kOpaque:
        return {unknown(p.text, line)};
      case PartKind::kArith: {
        const auto v = arith(p.text, line, depth + 1);
        if (!v) return {unknown("$((" + p.text + "))", line)};
        return {make_val(std::to_string(*v), std::to_string(*v), line)};
      }
      case PartKind::kParam: {
        Value v = expand_param(p, line, depth + 1);
        if (v.words.size() > 1) {
          // Joined: "a b c".
          Val j = make_val("", "", line);
          for (std::size_t k = 0; k < v.words.size(); ++k) {
            if (k > 0) append_piece(j.pieces, {" ", true});
            j.text += (k ? " " : "") + v.words[k].text;
            j.known = j.known && v.words[k].known;
            append_pieces(j.pieces, v.words[k]);
          }
          check_size(j.pieces, line);
          if (j.known) j.pieces.clear();
          return {j};
        }
        return v.words;
      }
    }
    return {};
  }

  static bool splits(char c) { return c == ' ' || c == '\t' || c == '\n'; }

  // '@' or '*' if `p` is ${NAME[@]} / ${NAME[*]} (possibly with an
  // operator after the subscript) or $@ / $*, else 0.
  static char array_subscript(const Part& p) {
    if (p.kind == PartKind::kParam && (p.text == "@" || p.text == "*")) return p.text[0];
    if (p.kind != PartKind::kParam || !p.braced || p.text.empty() || !is_name_start(p.text[0])) {
      return 0;
    }
    std::size_t i = 0;
    while (i < p.text.size() && is_name_char(p.text[i])) ++i;
    if (p.text.compare(i, 3, "[@]") == 0) return '@';
    if (p.text.compare(i, 3, "[*]") == 0) return '*';
    return 0;
  }

  // The source of an unknown piece: as written, in double quotes when it
  // was quoted (so that it is not split when written back).
  static std::string unknown_piece_source(const std::string& source, bool quoted) {
    if (!quoted || source.empty() || source.find_first_of("\"'\\") != std::string::npos) {
      return source;
    }
    return "\"" + source + "\"";
  }

  // A command or array word -> fields, with bash's splitting of unquoted
  // expansions on blanks (IFS unset: space, tab, newline) and one field per
  // element of "${ARR[@]}". An expansion the script does not define cannot
  // be split: it stays in one field (glued to the known text around it),
  // with its source as written, which bash splits the same way when a
  // launcher writes it back unquoted.
  std::vector<Val> expand_word(const Word& w, bool split) {
    const std::vector<Part> parts = word_parts_with_assignment(w);
    // The word is one expansion, possibly in double quotes.
    const bool single =
        parts.size() == 1 || (parts.size() == 2 && parts[0].kind == PartKind::kLiteral &&
                              parts[0].quoted && parts[0].text.empty());
    if (single) {
      const Part& p = parts.back();
      // Exactly "${ARR[@]}": the elements as stored, with their own lines
      // and sources (none if the array is empty).
      if (p.quoted && array_subscript(p) == '@' &&
          is_valid_name(p.text.substr(0, p.text.size() - 3))) {
        const Value v = lookup(p.text.substr(0, p.text.size() - 3), w.line);
        if (v.set) return v.words;
        return {unknown(w.source, w.line)};
      }
      // Exactly ${ARR[@]} unquoted, whose elements are known words without
      // blanks (the usual "--flag value" arrays): split gives the elements
      // as stored, with their sources (a default stays a default).
      if (!p.quoted && split && array_subscript(p) == '@' &&
          is_valid_name(p.text.substr(0, p.text.size() - 3))) {
        const std::vector<Val>* v = stored(p.text.substr(0, p.text.size() - 3), w.line);
        if (v != nullptr && std::all_of(v->begin(), v->end(), [](const Val& e) {
              return e.known && !e.text.empty() &&
                     std::none_of(e.text.begin(), e.text.end(), splits);
            })) {
          std::vector<Val> out = *v;
          charge(out, w.line);
          return out;
        }
      }
      // Exactly "$@": the arguments, one word each (none if there are none).
      std::vector<Val> args;
      if (p.quoted && p.text == "@" && positional("@", w.line, args)) {
        charge(args, w.line);
        return args;
      }
      // A plain $NAME / "${NAME}" whose value is unknown and is not split:
      // the value's own source (CKPT=$1 ... --save $CKPT keeps "$1"), so a
      // launcher written from the words needs nothing the script defined.
      if (p.kind == PartKind::kParam && is_valid_name(p.text)) {
        const std::vector<Val>* v = stored(p.text, w.line);
        if (v != nullptr && v->size() == 1 && !v->front().known &&
            (p.quoted || !split ||
             std::none_of(v->front().pieces.begin(), v->front().pieces.end(), [](const Piece& q) {
               return q.known && std::any_of(q.text.begin(), q.text.end(), splits);
             }))) {
          Val out = v->front();
          out.line = w.line;
          charge({out}, w.line);
          return {out};
        }
      }
    }
    std::vector<Val> fields;
    Val cur = make_val("", "", w.line);
    bool have = false;   // cur holds a field (possibly empty but quoted)
    bool multi = false;  // the word gave (or could give) several fields
    // Of the value being added: a field it starts inherits them.
    std::string guard_now;
    bool defaulted_now = false;
    std::vector<bool> whole;  // per field: an array element as stored (its own source)
    auto flush = [&]() {
      if (have) {
        fields.push_back(cur);
        whole.push_back(false);
      }
      cur = make_val("", "", w.line);
      cur.guard = guard_now;
      cur.defaulted = defaulted_now;
      have = false;
    };
    // Appends known text to the current field; `line` is where a field
    // that starts here was written (an array element's line).
    auto add_known = [&](const std::string& text, int line) {
      if (!have) cur.line = line;
      cur.text += text;
      cur.source += shell_quote(text);
      append_piece(cur.pieces, {text, true});
      have = true;
    };
    auto add_unknown = [&](const std::string& source, bool quoted, int line) {
      if (!have) cur.line = line;
      cur.known = false;
      cur.source += unknown_piece_source(source, quoted);
      append_piece(cur.pieces, {source, false});
      have = true;
    };
    // Known text of an expansion: split unless quoted.
    auto add_split = [&](const std::string& text, bool quoted, int line) {
      if (quoted || !split) {
        add_known(text, line);
        return;
      }
      std::size_t a = 0;
      while (a < text.size()) {
        if (splits(text[a])) {
          flush();
          multi = true;
          while (a < text.size() && splits(text[a])) ++a;
          continue;
        }
        std::size_t b = a;
        while (b < text.size() && !splits(text[b])) ++b;
        add_known(text.substr(a, b - a), line);
        a = b;
      }
    };
    for (const Part& p : parts) {
      if (p.kind == PartKind::kLiteral) {
        if (p.quoted || !p.text.empty()) add_known(p.text, w.line);
        continue;
      }
      const char subscript = array_subscript(p);
      std::vector<Val> vals;
      if (p.kind == PartKind::kParam) {
        vals = expand_param(p, w.line, 1).words;
        if (subscript == 0) {
          for (Val& v : vals) v.line = w.line;
        }
      } else {
        vals = expand_part(p, w.line, 1);
      }
      if (p.quoted && subscript != '@' && vals.size() > 1) {
        // "${ARR[*]}": one word, the elements joined by a blank.
        Val j = make_val("", "${" + p.text + "}", w.line);
        std::erase_if(vals, [](const Val& v) { return v.launcher_only; });
        for (std::size_t k = 0; k < vals.size(); ++k) {
          if (k > 0) append_piece(j.pieces, {" ", true});
          j.text += (k ? " " : "") + vals[k].text;
          j.known = j.known && vals[k].known;
          append_pieces(j.pieces, vals[k]);
        }
        check_size(j.text, w.line);
        check_size(j.pieces, w.line);
        vals = {j};
      }
      for (std::size_t k = 0; k < vals.size(); ++k) {
        const Val& v = vals[k];
        // (An unknown value is never split, so one kept only for a
        // launcher can stand alone too.)
        const bool alone =
            subscript == '@' && (k > 0 || !have) && (k + 1 < vals.size() || &p == &parts.back()) &&
            ((v.known && !v.text.empty() && std::none_of(v.text.begin(), v.text.end(), splits)) ||
             (!v.known && v.launcher_only));
        // A word kept only for a launcher stays a word of its own, or is
        // left out: it must not become part of one the reading uses.
        if (v.launcher_only && !alone) continue;
        if (alone) {
          // An element that needs no splitting and is glued to nothing:
          // one word as stored (a default stays a default).
          flush();
          fields.push_back(v);
          whole.push_back(true);
          multi = true;
          continue;
        }
        guard_now = v.guard;
        defaulted_now = v.defaulted;
        if (k > 0) {
          // Array elements are separate words, quoted or not.
          flush();
          multi = true;
        }
        if (cur.guard.empty()) cur.guard = v.guard;
        cur.defaulted = cur.defaulted || v.defaulted;
        if (v.known) {
          add_split(v.text, p.quoted, v.line);
        } else if (v.pieces.empty()) {
          add_unknown(v.source, p.quoted, v.line);
        } else {
          for (const Piece& q : v.pieces) {
            if (q.known) {
              add_split(q.text, p.quoted, v.line);
            } else {
              add_unknown(q.text, p.quoted, v.line);
            }
          }
        }
        check_size(cur.text, w.line);
        check_size(cur.source, w.line);
      }
      guard_now.clear();
      defaulted_now = false;
      if (fields.size() > limits_.max_words) fail(w.line, "a command is too long");
    }
    flush();
    for (std::size_t k = 0; k < fields.size(); ++k) {
      Val& f = fields[k];
      if (f.known) f.pieces.clear();
      if (whole[k]) continue;
      if (!multi) {
        f.source = w.source;  // one word: as written
      } else if (f.known) {
        f.source = shell_quote(f.text);
        f.defaulted = false;  // one of several fields: its own source is not written anywhere
      }
    }
    return fields;
  }

  std::string origin_;
  std::map<std::string, std::string> env_;        // --megatron-env
  std::map<std::string, std::string> overrides_;  // --megatron-env-override
  std::optional<std::vector<Val>> positional_;    // $1 ... (--megatron-script-args)
  std::set<std::string> read_;                    // names of env_ / overrides_ the script read
  std::map<std::string, int> assigned_;           // names of env_: where the script first sets them
  std::set<std::string> override_noted_;
  const ShellLimits& limits_;
  std::map<std::string, std::vector<Val>> vars_;
  std::vector<std::string> exported_;
  std::vector<ShellWord> bare_args_;
  std::vector<Frame> frames_;
  Tri status_ = Tri::kTrue;                   // exit status of the last statement run
  std::deque<Word> test_operators_;           // && || ( ) inside [[ ]], as words
  std::string status_source_;                 // the statements that gave status_, as written
  bool testing_ = false;                      // expanding the operands of a test
  std::size_t assumed_count_ = 0;             // variables tests took as unset, counted each time
  std::map<std::string, int> assumed_unset_;  // variables tests took as unset: first line
  std::vector<int> defaulted_tests_;          // lines of tests decided by a ${VAR:-default}
  std::string chain_guard_;                   // while a statement after && / || runs undecided
  std::vector<int> unknown_conditions_, loops_, cases_;  // lines, for notes
  ShellScript* script_ = nullptr;                        // for notes, while run() reads
  std::map<std::string, std::vector<Val>> env_vals_;     // --megatron-env values as words
  std::size_t expanded_ = 0;                             // bytes copied by expansions
  std::size_t arith_steps_ = 0;
  std::set<std::string> arith_noted_;
  int arith_notes_ = 0;
  int eval_depth_ = 0;
  int frame_serial_ = 0;                                  // frames pushed so far
  std::map<std::string, std::vector<Alt>> alternatives_;  // values a launcher keeps
  std::map<std::string, Path> primary_path_;              // where vars_'s value was set
  std::set<std::string> alternatives_noted_;
  int swapping_ = 0;  // > 0: expanding with a value of alternatives_
};

}  // namespace

ShellScript read_shell_script(const std::string& text, const std::string& origin,
                              const ShellInputs& inputs, const ShellLimits& limits) {
  if (text.size() > limits.max_bytes) {
    throw InputError(origin, "the script is " + std::to_string(text.size()) + " bytes; at most " +
                                 std::to_string(limits.max_bytes) + " are read");
  }
  if (text.find('\0') != std::string::npos) {
    throw InputError(origin, "the script contains a NUL byte (not a shell script)");
  }
  int line = 1;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == '\n') {
      if (i - start > limits.max_line) {
        throw InputError(origin + ":" + std::to_string(line),
                         "line is " + std::to_string(i - start) + " bytes long; at most " +
                             std::to_string(limits.max_line) + " are read");
      }
      start = i + 1;
      ++line;
    }
  }
  for (const auto* given : {&inputs.env, &inputs.overrides}) {
    const char* option = given == &inputs.env ? "--megatron-env" : "--megatron-env-override";
    for (const auto& [k, v] : *given) {
      if (!is_valid_name(k)) {
        throw InputError(option, "\"" + k + "\" is not a shell variable name");
      }
      if (given == &inputs.overrides && inputs.env.count(k)) {
        throw InputError(option, k + " is given to both --megatron-env and " + option);
      }
    }
  }
  // Windows line ends (an editor's, not bash's): read as after dos2unix.
  std::string unix_text;
  int crlf_line = 0;
  if (const auto crlf = text.find("\r\n"); crlf != std::string::npos) {
    crlf_line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + crlf, '\n'));
    unix_text.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
      if (text[i] != '\r' || i + 1 == text.size() || text[i + 1] != '\n') unix_text += text[i];
    }
  }
  Lexer lexer(crlf_line ? unix_text : text, origin, limits);
  const std::vector<Token> tokens = lexer.run();
  Interpreter interp(origin, inputs, limits);
  ShellScript script = interp.run(tokens);
  if (crlf_line) {
    script.notes.insert(script.notes.begin(),
                        "the script has Windows line ends (CRLF, first on line " +
                            std::to_string(crlf_line) +
                            "): read as after dos2unix (bash itself would stop at the \\r)");
  }
  return script;
}

std::vector<std::string> split_shell_words(const std::string& text, const std::string& origin) {
  const ShellLimits limits;
  if (text.size() > limits.max_line) {
    throw InputError(origin, "is " + std::to_string(text.size()) + " bytes long; at most " +
                                 std::to_string(limits.max_line) + " are read");
  }
  Lexer lexer(text, origin, limits);
  Interpreter interp(origin, {}, limits);
  return interp.words_of(lexer.run());
}

}  // namespace hapmoe
