// A small, safe interpreter for the shell subset that Megatron-LM launch
// scripts are written in (docs/megatron.md, "What the script reader
// understands"). Nothing is ever executed: no command runs, no file other
// than the script is read, no glob is expanded.
//
// It tokenises with quotes and escapes, joins backslash-continued lines,
// strips comments, applies assignments in the order written (scalars,
// bash arrays, `+=`, `export`), expands $VAR, ${VAR}, ${VAR:-default} and
// friends, "${ARR[@]}", $((arithmetic)), ((arithmetic)) and `let` (bash's
// operators over 64-bit integers; what it cannot evaluate is unknown, with
// a note), splits unquoted expansions on blanks as bash does, and finds the
// launch command: the first command that runs a `*.py` entry point through
// torchrun, python, `python -m torch.distributed.run`, srun, ...
// `eval` reads its words again as commands. Here-documents are skipped
// (their bodies are not read as commands) with a note. `if`, `&&` and `||`
// are evaluated where the tests they run ([ ], test, [[ ]], ((...))) are
// known, and only the branch taken is read; an unknown condition reads
// every branch in order (later assignments win), with a note naming its
// line. `case` is evaluated like an if / elif chain. A scalar variable set
// in branches hapmoe did not decide (or decided by an assumption) keeps the
// values of the others for a launcher (ShellScript::alternatives). Loop
// bodies are read once.
//
// A value the script does not define (an environment variable, a positional
// parameter, a command substitution) is *unknown*: the word keeps its source
// text so a launcher can write it back, and a reader that needs the value
// names the variable. An unknown value is not split (its blanks are not
// known): it stays one word, glued to the known text next to it, whose
// source is the unknown expansion (unquoted where it was expanded unquoted,
// so bash splits it the same way when a launcher writes it back). Sizes and
// nesting are bounded so a hostile script fails with an InputError in
// bounded time.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hapmoe {

// One word after expansion.
struct ShellWord {
  std::string text;    // the value (meaningless when !known)
  bool known = true;   // false if any part came from an unknown value
  std::string source;  // the word as written in the script (re-quotable)
  int line = 0;        // 1-based line where the word starts
  // The value came from ${VAR:-default} (or ${VAR-default}, :=, =) of a
  // variable that neither the script nor --megatron-env sets: `source`
  // keeps the expansion, so a launcher that writes it lets VAR win when it
  // is set at run time.
  bool defaulted = false;
  // The condition (bash, as written) under which the script adds this
  // word when hapmoe cannot decide it, e.g. `[ -n "${WANDB_API_KEY}" ]`
  // for flags appended inside that if; empty: the word is always there.
  std::string guard;
  // Added only in a branch the reading did not take because a variable it
  // tests was assumed unset (nothing sets it): kept for a launcher, under
  // `guard`, so the branch still runs when the variable is set at run
  // time; not read as the script's settings.
  bool launcher_only = false;
  // The word is a variable's value (`source` is the variable as written,
  // e.g. $LR) and the variable has other values under conditions hapmoe
  // did not decide or decided only by an assumption
  // (ShellScript::alternatives): a launcher writes `source` and defines
  // the variable as the script did.
  bool varies = false;
  bool operator==(const ShellWord&) const = default;
};

struct ShellLaunch {
  std::vector<ShellWord> prefix;  // launcher words before the entry point
  ShellWord entry;                // e.g. pretrain_gpt.py
  std::vector<ShellWord> args;    // everything after the entry point
  int line = 0;                   // line of the command's first word
};

struct ShellScript {
  std::string origin;  // file name, for messages
  // True if a launch command was found; false for a bare argument list
  // (then `launch.args` holds every word of the file).
  bool has_command = false;
  ShellLaunch launch;
  // Variables after the whole script was read (arrays hold several words).
  std::map<std::string, std::vector<ShellWord>> variables;
  // The last scalar assignment to each variable as written (the value
  // part, e.g. "${SLURM_NNODES:-1}") and its line, for messages.
  struct Assignment {
    std::string written;
    int line = 0;
  };
  std::map<std::string, Assignment> assignments;
  // Scalar variables whose value depends on a branch hapmoe did not
  // decide, or decided only by an assumption (a variable taken as unset, a
  // default): the values the reading did not use, each with the condition
  // (`guard`) under which the script sets it, for a launcher. The value in
  // `variables` carries its own condition.
  std::map<std::string, std::vector<ShellWord>> alternatives;
  std::vector<std::string> exported;  // names exported, in order, no repeats
  std::vector<std::string> notes;     // what was approximated (second launch, ...)

  // The scalar value of a variable, if the script defines it with a known
  // value.
  const ShellWord* find(const std::string& name) const;
};

struct ShellLimits {
  std::size_t max_bytes = 4u << 20;        // whole script
  std::size_t max_line = 256u << 10;       // one physical line
  std::size_t max_value = 1u << 20;        // one expanded value
  std::size_t max_words = 1u << 20;        // words of one command or array
  int max_nesting = 32;                    // ${...} / $((...)) / (...) depth
  std::size_t max_arith_steps = 1u << 24;  // arithmetic, whole script
  std::size_t max_expanded = 64u << 20;    // bytes copied by all expansions
};

// What the command line gives the script, as bash would at run time.
struct ShellInputs {
  // --megatron-env NAME=VALUE: the environment. The script's defaults
  // yield to it (${NAME:-2} is VALUE) but its own assignments win
  // (after NAME=2, $NAME is 2), as in bash; a name the script never reads
  // from the environment gets a note saying why.
  std::map<std::string, std::string> env{};
  // --megatron-env-override NAME=VALUE: NAME is VALUE throughout; each
  // assignment the script makes to it is skipped, with a note.
  std::map<std::string, std::string> overrides{};
  // --megatron-script-args: $1 ... $N (also $#, $@, $*, shift); without
  // them positional parameters are unknown.
  std::optional<std::vector<std::string>> args{};
};

// Reads `text` (the script's contents; `origin` names it in messages) with
// `inputs` from the command line. Throws InputError "origin:line: what" on
// anything it cannot read (unterminated quote or here-document, too large),
// and InputError naming the option for a bad name in `inputs`.
ShellScript read_shell_script(const std::string& text, const std::string& origin,
                              const ShellInputs& inputs = {}, const ShellLimits& limits = {});

// The words of `text` as bash splits a command line (quotes, escapes; no
// variables, operators or new lines): --megatron-script-args. Throws
// InputError(origin, ...) for anything else.
std::vector<std::string> split_shell_words(const std::string& text, const std::string& origin);

// `text` quoted for bash so that it reads back as one word with that value
// (bare if it needs no quoting).
std::string shell_quote(const std::string& text);

}  // namespace hapmoe
