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
#include <cstdint>
#include <optional>
#include <set>
#include <utility>

#include "costmodel/errors.h"

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
};

struct Token {
  bool separator = false;
  Word word;
  int line = 0;
};

class Lexer {
 public:
  Lexer(const std::string& text, const std::string& origin, const ShellLimits& limits)
      : s_(text), origin_(origin), limits_(limits) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    while (true) {
      skip_blanks();
      if (pos_ >= s_.size()) break;
      const char c = s_[pos_];
      if (c == '#') {
        skip_comment();
      } else if (c == '\n' || c == ';' || c == '&' || c == '|' || c == '(' || c == ')') {
        if (c == '&' && peek(1) == '>') {
          pos_ += 2;
          skip_redirect_target();
          continue;
        }
        out.push_back({true, {}, line_});
        if (c == '\n') ++line_;
        ++pos_;
        if ((c == '&' || c == '|' || c == ';') && pos_ < s_.size() && s_[pos_] == c) ++pos_;
      } else if (c == '<' || c == '>') {
        redirect();
      } else {
        Word w = lex_word(0, false);
        if (!w.parts.empty() || !w.source.empty() || w.is_array) {
          if (out.size() >= limits_.max_words) fail(w.line, "the script has too many words");
          const int line = w.line;
          out.push_back({false, std::move(w), line});
        }
      }
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
    return w.parts;
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

  void redirect() {
    const int line = line_;
    if (s_[pos_] == '<' && peek(1) == '<') {
      fail(line, "here-documents (<<) are not supported; write the arguments in the script");
    }
    ++pos_;
    while (pos_ < s_.size() && (s_[pos_] == '>' || s_[pos_] == '&' || s_[pos_] == '|')) ++pos_;
    skip_redirect_target();
  }

  void skip_redirect_target() {
    skip_blanks();
    if (pos_ < s_.size() && s_[pos_] != '\n' && s_[pos_] != ';') (void)lex_word(0, false);
  }

  // Finds the index just past the bracket that closes the one at `pos_`
  // (`open` at s_[pos_]), skipping quoted text.
  std::size_t match_close(char open, char close, int line) const {
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
    fail(line, std::string("unterminated '") + open + "' (no matching '" + close + "')");
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
  int line_ = 1;
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
  Interpreter(const std::string& origin, const std::map<std::string, std::string>& env,
              const ShellLimits& limits)
      : origin_(origin), env_(env), limits_(limits) {}

  ShellScript run(const std::vector<Token>& tokens) {
    ShellScript script;
    script.origin = origin_;
    std::vector<const Word*> stmt;
    for (std::size_t i = 0; i <= tokens.size(); ++i) {
      if (i == tokens.size() || tokens[i].separator) {
        if (!stmt.empty()) statement(stmt, script);
        stmt.clear();
      } else {
        stmt.push_back(&tokens[i].word);
      }
    }
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

  void statement(const std::vector<const Word*>& words, ShellScript& script) {
    std::size_t i = 0;
    while (i < words.size() && is_keyword(*words[i])) {
      const std::string k = literal_of(*words[i]);
      if (k == "if" || k == "while" || k == "until") note_control(*words[i], script);
      ++i;
    }
    if (i < words.size()) {
      const std::string first = literal_of(*words[i]);
      if (first == "for" || first == "case" || first == "select") note_control(*words[i], script);
      // Loops and case: their control words are not commands; the bodies
      // are read as the statements that follow.
      if (first == "for" || first == "case" || first == "select" || first == "function") return;
    }
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
    if (cmd == "unset") {
      for (std::size_t j = i + 1; j < words.size(); ++j) vars_.erase(literal_of(*words[j]));
      return;
    }
    // A command: expand its words (prefix assignments are its environment
    // and do not change the script's variables).
    std::vector<ShellWord> expanded;
    for (std::size_t j = i; j < words.size(); ++j) {
      for (Val& w : expand_word(*words[j], true)) {
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

  void note_control(const Word& w, ShellScript& script) {
    if (control_noted_) return;
    control_noted_ = true;
    script.notes.push_back("the script has conditionals or loops (first on line " +
                           std::to_string(w.line) +
                           "); they are not evaluated: every branch is read once, in order, so "
                           "flags added inside a branch are all kept");
  }

  static std::string basename(const std::string& s) {
    const auto slash = s.find_last_of('/');
    return slash == std::string::npos ? s : s.substr(slash + 1);
  }

  void launch_candidate(const std::vector<ShellWord>& w, ShellScript& script) {
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
      if (w[j].known && w[j].text.size() > 3 &&
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
    script.launch.entry = w[entry];
    script.launch.args.assign(w.begin() + static_cast<std::ptrdiff_t>(entry) + 1, w.end());
    script.launch.line = first.line;
  }

  void mark_exported(const std::string& name) {
    if (std::find(exported_.begin(), exported_.end(), name) == exported_.end()) {
      exported_.push_back(name);
    }
  }

  void assign(const Word& w, bool exported) {
    // Expand first: the value may read the variable's old value.
    if (w.is_array) {
      std::vector<Val> elements;
      if (w.append) {
        if (const auto it = vars_.find(w.assign_name); it != vars_.end()) elements = it->second;
      }
      for (const Word& e : w.elements) {
        for (Val& sw : expand_word(e, true)) {
          elements.push_back(std::move(sw));
          if (elements.size() > limits_.max_words) fail(w.line, "an array has too many elements");
        }
      }
      vars_[w.assign_name] = std::move(elements);
    } else {
      Val v = expand_joined(w.parts, w.line, w.source.substr(w.source.find('=') + 1));
      const auto it = vars_.find(w.assign_name);
      if (w.append && it != vars_.end() && !it->second.empty()) {
        Val& old = it->second.front();
        if (!old.known || !v.known) {
          std::vector<Piece> pieces;
          append_pieces(pieces, old);
          append_pieces(pieces, v);
          check_size(pieces, w.line);
          old.pieces = std::move(pieces);
        }
        old.known = old.known && v.known;
        old.text += v.text;
        old.source += v.source;
        check_size(old.text, w.line);
      } else {
        std::vector<Val>& target = vars_[w.assign_name];
        target.clear();
        target.push_back(std::move(v));
      }
    }
    if (exported) mark_exported(w.assign_name);
  }

  // The value of NAME (a scalar or an array).
  Value lookup(const std::string& name, int line) const {
    Value v;
    if (const auto it = vars_.find(name); it != vars_.end()) {
      v.words = it->second;
      return v;
    }
    if (const auto it = env_.find(name); it != env_.end()) {
      v.words.push_back(make_val(it->second, shell_quote(it->second), line));
      return v;
    }
    v.set = false;
    return v;
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
      const Value v = lookup(name, line);
      if (!v.set || (!count && !v.words.empty() && !v.words[0].known)) {
        out.words.push_back(unknown(src, line));
      } else {
        const std::size_t n =
            count ? v.words.size() : (v.words.empty() ? 0 : v.words[0].text.size());
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
    Value v = is_name_start(name[0]) ? lookup(name, line) : Value{{}, false};
    const bool special = !is_name_start(name[0]);
    // Select by index.
    if (v.set && !index.empty() && index != "@" && index != "*") {
      // An index that is not arithmetic (an associative array's key, a
      // command substitution) is not evaluated.
      const bool arithmetic =
          std::all_of(index.begin(), index.end(),
                      [](char c) {
                        return is_name_char(c) ||
                               std::string_view(" \t$+-*/%(){}").find(c) != std::string_view::npos;
                      }) &&
          index.find("$(") == std::string::npos;
      const std::optional<std::int64_t> k =
          arithmetic ? arith(index, line, depth + 1) : std::nullopt;
      if (!k) {
        v.words.assign(1, unknown(src, line));
      } else if (*k < 0 || static_cast<std::size_t>(*k) >= v.words.size()) {
        v.words.clear();
        v.set = false;
      } else {
        v.words = {v.words[static_cast<std::size_t>(*k)]};
      }
    } else if (v.set && index.empty() && v.words.size() > 1) {
      v.words.resize(1);  // $ARR is its first element
    }
    const bool empty = !v.set || v.words.empty() ||
                       (v.words.size() == 1 && v.words[0].known && v.words[0].text.empty());
    if (op_and_word.empty()) {
      if (special || !v.set) {
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
      if (kind == '=' && !special) vars_[name] = out.words;
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

  // $((expr)): + - * / % and parentheses over integers and variables.
  std::optional<std::int64_t> arith(const std::string& expr, int line, int depth) {
    if (depth > limits_.max_nesting) fail(line, "expansions are nested too deeply");
    std::size_t pos = 0;
    bool ok = true;
    const auto r = arith_sum(expr, pos, line, depth, ok);
    while (pos < expr.size() && std::isspace(static_cast<unsigned char>(expr[pos])) != 0) ++pos;
    if (pos != expr.size()) fail(line, "cannot read the arithmetic expression $((" + expr + "))");
    if (!ok) return std::nullopt;
    return r;
  }

  void arith_skip(const std::string& e, std::size_t& pos) {
    while (pos < e.size() && std::isspace(static_cast<unsigned char>(e[pos])) != 0) ++pos;
  }

  std::int64_t arith_sum(const std::string& e, std::size_t& pos, int line, int depth, bool& ok) {
    std::int64_t v = arith_product(e, pos, line, depth, ok);
    while (true) {
      arith_skip(e, pos);
      if (pos >= e.size() || (e[pos] != '+' && e[pos] != '-')) return v;
      const char op = e[pos++];
      const std::int64_t r = arith_product(e, pos, line, depth, ok);
      std::int64_t out = 0;
      if (op == '+' ? __builtin_add_overflow(v, r, &out) : __builtin_sub_overflow(v, r, &out)) {
        fail(line, "arithmetic overflow in $((" + e + "))");
      }
      v = out;
    }
  }

  std::int64_t arith_product(const std::string& e, std::size_t& pos, int line, int depth,
                             bool& ok) {
    std::int64_t v = arith_unary(e, pos, line, depth, ok);
    while (true) {
      arith_skip(e, pos);
      if (pos >= e.size() || (e[pos] != '*' && e[pos] != '/' && e[pos] != '%')) return v;
      const char op = e[pos++];
      const std::int64_t r = arith_unary(e, pos, line, depth, ok);
      if (op == '*') {
        std::int64_t out = 0;
        if (__builtin_mul_overflow(v, r, &out)) fail(line, "arithmetic overflow in $((" + e + "))");
        v = out;
      } else if (r == 0) {
        if (ok) fail(line, "division by zero in $((" + e + "))");
        v = 0;
      } else {
        v = op == '/' ? v / r : v % r;
      }
    }
  }

  std::int64_t arith_unary(const std::string& e, std::size_t& pos, int line, int depth, bool& ok) {
    if (depth > limits_.max_nesting) fail(line, "expansions are nested too deeply");
    arith_skip(e, pos);
    if (pos >= e.size()) fail(line, "cannot read the arithmetic expression $((" + e + "))");
    const char c = e[pos];
    if (c == '-' || c == '+') {
      ++pos;
      const std::int64_t v = arith_unary(e, pos, line, depth + 1, ok);
      if (c == '-' && v == INT64_MIN) fail(line, "arithmetic overflow in $((" + e + "))");
      return c == '-' ? -v : v;
    }
    if (c == '(') {
      ++pos;
      const std::int64_t v = arith_sum(e, pos, line, depth + 1, ok);
      arith_skip(e, pos);
      if (pos >= e.size() || e[pos] != ')') fail(line, "unbalanced ( in $((" + e + "))");
      ++pos;
      return v;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) != 0) {
      std::int64_t v = 0;
      while (pos < e.size() && std::isdigit(static_cast<unsigned char>(e[pos])) != 0) {
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, e[pos] - '0', &v)) {
          fail(line, "arithmetic overflow in $((" + e + "))");
        }
        ++pos;
      }
      return v;
    }
    // A variable: NAME, $NAME or ${NAME}.
    std::string name;
    if (c == '$') ++pos;
    const bool brace = pos < e.size() && e[pos] == '{';
    if (brace) ++pos;
    while (pos < e.size() && is_name_char(e[pos])) name += e[pos++];
    if (brace) {
      if (pos >= e.size() || e[pos] != '}') fail(line, "cannot read $((" + e + "))");
      ++pos;
    }
    if (!is_valid_name(name)) fail(line, "cannot read the arithmetic expression $((" + e + "))");
    const Value v = lookup(name, line);
    if (!v.set || v.words.empty() || !v.words[0].known) {
      ok = false;
      return 1;
    }
    const std::string& t = v.words[0].text;
    std::size_t p = 0;
    bool inner_ok = true;
    if (t.empty()) return 0;
    const std::int64_t r = arith_sum(t, p, line, depth + 1, inner_ok);
    if (p != t.size()) {
      fail(line, "variable " + name + " = \"" + t + "\" is not a number in $((" + e + "))");
    }
    ok = ok && inner_ok;
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
        w.known = w.known && f.known;
        w.text += f.text;
        append_pieces(w.pieces, f);
      }
      check_size(w.text, line);
      check_size(w.pieces, line);
    }
    if (w.known) {
      w.source = shell_quote(w.text);
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
  // operator after the subscript), else 0.
  static char array_subscript(const Part& p) {
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
      // A plain $NAME / "${NAME}" whose value is unknown and is not split:
      // the value's own source (CKPT=$1 ... --save $CKPT keeps "$1"), so a
      // launcher written from the words needs nothing the script defined.
      if (p.kind == PartKind::kParam && is_valid_name(p.text)) {
        const Value v = lookup(p.text, w.line);
        if (v.set && v.words.size() == 1 && !v.words[0].known &&
            (p.quoted || !split ||
             std::none_of(v.words[0].pieces.begin(), v.words[0].pieces.end(), [](const Piece& q) {
               return q.known && std::any_of(q.text.begin(), q.text.end(), splits);
             }))) {
          Val out = v.words[0];
          out.line = w.line;
          return {out};
        }
      }
    }
    std::vector<Val> fields;
    Val cur = make_val("", "", w.line);
    bool have = false;   // cur holds a field (possibly empty but quoted)
    bool multi = false;  // the word gave (or could give) several fields
    auto flush = [&]() {
      if (have) fields.push_back(cur);
      cur = make_val("", "", w.line);
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
        if (k > 0) {
          // Array elements are separate words, quoted or not.
          flush();
          multi = true;
        }
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
      if (fields.size() > limits_.max_words) fail(w.line, "a command is too long");
    }
    flush();
    for (Val& f : fields) {
      if (f.known) f.pieces.clear();
      if (!multi) {
        f.source = w.source;  // one word: as written
      } else if (f.known) {
        f.source = shell_quote(f.text);
      }
    }
    return fields;
  }

  std::string origin_;
  std::map<std::string, std::string> env_;
  const ShellLimits& limits_;
  std::map<std::string, std::vector<Val>> vars_;
  std::vector<std::string> exported_;
  std::vector<ShellWord> bare_args_;
  bool control_noted_ = false;
};

}  // namespace

ShellScript read_shell_script(const std::string& text, const std::string& origin,
                              const std::map<std::string, std::string>& env,
                              const ShellLimits& limits) {
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
  for (const auto& [k, v] : env) {
    if (!is_valid_name(k)) {
      throw InputError("--megatron-env", "\"" + k + "\" is not a shell variable name");
    }
    (void)v;
  }
  Lexer lexer(text, origin, limits);
  const std::vector<Token> tokens = lexer.run();
  Interpreter interp(origin, env, limits);
  return interp.run(tokens);
}

}  // namespace hapmoe
