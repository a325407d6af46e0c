// The shell-subset reader: quoting, continuations, comments, variables,
// arrays, defaults, arithmetic, and hostile scripts that must fail cleanly
// and quickly.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "costmodel/errors.h"
#include "io/megatron/shell_script.h"

namespace hapmoe {
namespace {

std::vector<std::string> texts(const std::vector<ShellWord>& words) {
  std::vector<std::string> out;
  for (const ShellWord& w : words) out.push_back(w.known ? w.text : "<" + w.source + ">");
  return out;
}

std::vector<std::string> args_of(const std::string& text,
                                 const std::map<std::string, std::string>& env = {}) {
  return texts(read_shell_script(text, "t.sh", {.env = env}).launch.args);
}

using V = std::vector<std::string>;

TEST(ShellScript, QuotesEscapesContinuationsAndComments) {
  const std::string text =
      "# a comment\n"
      "torchrun --nproc-per-node 8 pretrain_gpt.py \\\n"
      "  --a 'single quoted # not a comment' \\\n"
      "  --b \"double $X \\\"q\\\"\" \\\n"
      "  --c one\\ word  # trailing comment\n"
      "echo done\n";
  EXPECT_EQ(args_of(text, {{"X", "x"}}), (V{"--a", "single quoted # not a comment", "--b",
                                            "double x \"q\"", "--c", "one word"}));
}

TEST(ShellScript, VariablesDefaultsArithmeticAndArrays) {
  const std::string text =
      "GPUS=8\n"
      "NNODES=${SLURM_NNODES:-\"4\"}\n"
      "WORLD=$(($GPUS*$NNODES))\n"
      "L=${LAYERS:-${FALLBACK:-24}}\n"
      "A=(\n"
      "  --num-layers $L   # comment inside an array\n"
      "  --world $WORLD\n"
      ")\n"
      "A+=(--extra \"two words\")\n"
      "S=\"--s1 1 --s2 2\"\n"
      "python pretrain_gpt.py \"${A[@]}\" $S ${#A[@]}\n";
  EXPECT_EQ(args_of(text), (V{"--num-layers", "24", "--world", "32", "--extra", "two words", "--s1",
                              "1", "--s2", "2", "6"}));
  // --megatron-env overrides a variable the script reads from outside.
  EXPECT_EQ(args_of(text, {{"SLURM_NNODES", "2"}, {"LAYERS", "8"}})[1], "8");
  EXPECT_EQ(args_of(text, {{"SLURM_NNODES", "2"}})[3], "16");
}

TEST(ShellScript, ArrayElementsKeepTheirLines) {
  const ShellScript s = read_shell_script(
      "A=(\n  --x 1\n  --y 2\n)\ntorchrun --nnodes 1 pretrain_gpt.py ${A[@]}\n", "t.sh");
  ASSERT_EQ(s.launch.args.size(), 4u);
  EXPECT_EQ(s.launch.args[0].line, 2);
  EXPECT_EQ(s.launch.args[2].line, 3);
  EXPECT_EQ(s.launch.line, 5);
  EXPECT_EQ(texts(s.launch.prefix), (V{"torchrun", "--nnodes", "1"}));
  EXPECT_EQ(s.launch.entry.text, "pretrain_gpt.py");
}

TEST(ShellScript, UnknownValuesKeepTheirSource) {
  const ShellScript s = read_shell_script(
      "CKPT=$1\nHOST=$(hostname)\npython -m torch.distributed.run pretrain_gpt.py --save $CKPT "
      "--host \"$HOST\" --data ${DATA_PATH}\n",
      "t.sh");
  EXPECT_EQ(texts(s.launch.args),
            (V{"--save", "<$1>", "--host", "<$(hostname)>", "--data", "<${DATA_PATH}>"}));
}

TEST(ShellScript, LaunchFormsAndBareArgumentLists) {
  EXPECT_TRUE(read_shell_script("python3 pretrain_gpt.py --a 1\n", "t").has_command);
  EXPECT_TRUE(read_shell_script("srun -n 8 python pretrain_gpt.py --a 1\n", "t").has_command);
  EXPECT_TRUE(
      read_shell_script("exec torchrun --nnodes=1 /m/pretrain_gpt.py --a 1 2>&1 | tee x\n", "t")
          .has_command);
  // echo "python x.py" is not a launch.
  EXPECT_THROW(read_shell_script("echo python pretrain_gpt.py\n", "t"), InputError);
  const ShellScript bare = read_shell_script("--num-layers 4 \\\n --hidden-size 8\n", "t");
  EXPECT_FALSE(bare.has_command);
  EXPECT_EQ(texts(bare.launch.args), (V{"--num-layers", "4", "--hidden-size", "8"}));
  // Both branches of an if are read; the later assignment wins.
  EXPECT_EQ(args_of("if [ -n \"$X\" ]; then\n  N=1\nelse\n  N=2\nfi\npython a.py --n $N\n"),
            (V{"--n", "2"}));
  // A sourced file is named, not read.
  const ShellScript sourced = read_shell_script("source ./conf/common.conf\npython a.py\n", "t");
  ASSERT_EQ(sourced.notes.size(), 1u);
  EXPECT_EQ(sourced.notes[0],
            "line 1 sources ./conf/common.conf, which is not read (hapmoe reads one file, runs "
            "nothing): give what it sets with --megatron-env");
  // A second launch is noted, not read.
  const ShellScript two = read_shell_script("python a.py --x 1\npython b.py --y 2\n", "t");
  EXPECT_EQ(texts(two.launch.args), (V{"--x", "1"}));
  ASSERT_EQ(two.notes.size(), 1u);
}

// Unquoted expansions are split on blanks (space, tab, newline) as bash
// does: an array of "--flag value" strings, a string of flags, ${VAR}.
// Quoted, "${A[@]}" is one word per element, "${A[*]}" and "$VAR" one word.
TEST(ShellScript, UnquotedExpansionsAreSplitOnBlanks) {
  EXPECT_EQ(args_of("GPT_ARGS=(\"--vocab-size 128256\" \"--tokenizer-type NullTokenizer\")\n"
                    "torchrun pretrain_gpt.py ${GPT_ARGS[@]}\n"),
            (V{"--vocab-size", "128256", "--tokenizer-type", "NullTokenizer"}));
  EXPECT_EQ(args_of("A=(\"--a 1\" \"\" \"--b\t2\")\npython x.py ${A[*]}\n"),
            (V{"--a", "1", "--b", "2"}));
  EXPECT_EQ(args_of("A=(\"--a 1\" \"--b 2\")\npython x.py \"${A[@]}\"\n"), (V{"--a 1", "--b 2"}));
  EXPECT_EQ(args_of("A=(\"--a 1\" \"--b 2\")\npython x.py \"${A[*]}\"\n"), (V{"--a 1 --b 2"}));
  EXPECT_EQ(args_of("A=(\"--a 1\" \"--b 2\")\npython x.py \"-x${A[@]}y\"\n"),
            (V{"-x--a 1", "--b 2y"}));
  EXPECT_EQ(args_of("OPTS=\"--a 1 --b 2\"\npython x.py $OPTS\n"), (V{"--a", "1", "--b", "2"}));
  EXPECT_EQ(args_of("OPTS=\"  --a 1\n\t--b 2 \"\npython x.py ${OPTS}\n"),
            (V{"--a", "1", "--b", "2"}));
  EXPECT_EQ(args_of("OPTS=\"--a 1 --b 2\"\npython x.py \"$OPTS\" \"${OPTS}\"\n"),
            (V{"--a 1 --b 2", "--a 1 --b 2"}));
  // Glued text joins the first and last fields; an empty unquoted value
  // gives no word, a quoted one an empty word.
  EXPECT_EQ(args_of("V=\" a b\"\nE=\npython x.py x${V}y $E \"$E\"\n"), (V{"x", "a", "by", ""}));
  // --megatron-env values are split the same way.
  EXPECT_EQ(args_of("python x.py $EXTRA\n", {{"EXTRA", "--c 3 --d 4"}}),
            (V{"--c", "3", "--d", "4"}));
  // Split words come out as separate words with their own sources, and the
  // array's elements keep the lines they were written on.
  const ShellScript s =
      read_shell_script("A=(\n  \"--x 1\"\n  \"--y 2\"\n)\npython x.py ${A[@]}\n", "t.sh");
  ASSERT_EQ(s.launch.args.size(), 4u);
  EXPECT_EQ(s.launch.args[1].source, "1");
  EXPECT_EQ(s.launch.args[0].line, 2);
  EXPECT_EQ(s.launch.args[3].line, 3);
}

// An expansion the script does not define cannot be split: it stays one
// unknown word (glued to the known text next to it) whose source is the
// expansion as written, which bash splits the same way when the launcher
// writes it back unquoted. The known text around it is still split.
TEST(ShellScript, UnknownValuesAreNotSplit) {
  EXPECT_EQ(args_of("A=(--a \"$1\" $EXTRA \"--b 2\")\npython x.py ${A[@]} $MORE\n"),
            (V{"--a", "<$1>", "<$EXTRA>", "--b", "2", "<$MORE>"}));
  // Quoted, the elements are the words as written.
  EXPECT_EQ(args_of("A=(--a \"$1\" \"--b $2\")\npython x.py \"${A[@]}\"\n"),
            (V{"--a", "<\"$1\">", "<\"--b $2\">"}));
  EXPECT_EQ(args_of("X=$(cmd)\npython x.py --v $X \"$X\"\n"), (V{"--v", "<$(cmd)>", "<$(cmd)>"}));
  // Glued to split text: the unknown piece keeps its own source.
  EXPECT_EQ(args_of("V=\"--a 1 --b\"\npython x.py ${V}=$2\n"), (V{"--a", "1", "<--b=$2>"}));
  // Flags in a string with values from the command line (Pai-Megatron-Patch
  // style): the known flags are read, each unknown value is one word.
  const std::string pai =
      "LR=$6\nLAYERS=28\nSAVE=$2\n"
      "opts=\" \\\n  --lr ${LR} --num-layers ${LAYERS} \\\n  --save \"${SAVE}\"/ckpt\"\n"
      "DATA=(\"--data-path $DATA_PATH\")\n"
      "torchrun pretrain_gpt.py ${opts} ${DATA[@]} \"$opts\"\n";
  const ShellScript s = read_shell_script(pai, "t.sh");
  EXPECT_EQ(texts(s.launch.args),
            (V{"--lr", "<$6>", "--num-layers", "28", "--save", "<$2/ckpt>", "--data-path",
               "<$DATA_PATH>", "<" + s.variables.at("opts")[0].source + ">"}));
  EXPECT_EQ(s.launch.args[1].line, 8);
  // Quoted, an unknown piece keeps its quotes: "-x $1" is one word.
  EXPECT_EQ(args_of("V=\"a b\"\npython x.py $V\"-x $1\"\n"), (V{"a", "<b'-x '\"$1\">"}));
}

// $((...)) with bash's operators, precedence and 64-bit wrapping integers;
// each expected value is what bash 5.2 prints.
TEST(ShellScript, ArithmeticAsBashEvaluatesIt) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"($TP > 1) ? 1 : 0", "1"},
      {"( $TP > 2 ) ? 1 : 0", "0"},
      {"TP > 1", "1"},
      {"TP >= 2 && TP <= 2", "1"},
      {"TP == 2 || 1/0", "1"},
      {"TP != 2 && 1/0", "0"},
      {"!TP", "0"},
      {"!0", "1"},
      {"~5", "-6"},
      {"5--3", "8"},
      {"1 - -1", "2"},
      {"-2**2", "4"},
      {"2**3**2", "512"},
      {"9223372036854775807*2", "-2"},
      {"-9223372036854775807-1", "-9223372036854775808"},
      {"(-9223372036854775807-1) / -1", "-9223372036854775808"},
      {"(-9223372036854775807-1) % -1", "0"},
      {"1<<65", "2"},
      {"-8>>1", "-4"},
      {"6 & 3 | 8 ^ 1", "11"},
      {"1 + 2 * 3 << 1", "14"},
      {"010 + 0x1F + 16#ff + 64#@_ + 36#Z", "4360"},
      {"7%-3", "1"},
      {"-7/2", "-3"},
      {"1 ? 2 : 3 ? 4 : 5", "2"},
      {"0 ? 1 : 0 ? 2 : 3", "3"},
      {"a = 3, a + 1", "4"},
      {"$X * 2", "8"},  // X="2+3": text first, then 2+3*2
      {"X * 2", "10"},  // a variable's value is an expression
      {"ALIAS", "2"},   // ALIAS=TP
      {"EMPTY + 1", "1"},
      {"${UNSET:-3} * ${#ARR[@]}", "6"},
      {"ARR[1] + ARR[TP - 2]", "30"},
      {"$((TP * 2)) + 1", "5"},
      {"TP++ + TP", "5"},
      {"++TP", "3"},
      {"TP *= 4", "8"},
  };
  for (const auto& [expr, want] : cases) {
    const std::string text =
        "TP=2\nX=\"2+3\"\nALIAS=TP\nEMPTY=\nARR=(10 20)\npython x.py --v $((" + expr + "))\n";
    const ShellScript s = read_shell_script(text, "t.sh");
    EXPECT_EQ(texts(s.launch.args), (V{"--v", want})) << expr;
    EXPECT_TRUE(s.notes.empty()) << expr << ": " << s.notes.front();
  }
  // Assignments inside $((...)) set the variable.
  EXPECT_EQ(args_of("X=$((N = 3 * 4))\npython x.py $X $N\n"), (V{"12", "12"}));
}

// What the reader cannot evaluate is an unknown value with a note naming
// the line and the expression, not an error.
TEST(ShellScript, ArithmeticItCannotEvaluateIsUnknown) {
  const ShellScript s = read_shell_script(
      "TP=${11}\n"
      "TP_COMM=$(( ($TP > 1) ? 1 : 0 ))\n"
      "Z=$((8 / (2 - 2)))\n"
      "Q=$((1 ? 2))\n"
      "R=$((2 ** -1))\n"
      "python x.py --a $TP_COMM --b $Z --c $((4 % 0)) --d $Q --e $R --f $((1 ? 5 : 1/0))\n",
      "t.sh");
  EXPECT_EQ(texts(s.launch.args),
            (V{"--a", "<$(( ($TP > 1) ? 1 : 0 ))>", "--b", "<$((8 / (2 - 2)))>", "--c",
               "<$((4 % 0))>", "--d", "<$((1 ? 2))>", "--e", "<$((2 ** -1))>", "--f", "5"}));
  const std::vector<std::string> want = {
      "$(( ($TP > 1) ? 1 : 0 )) on line 2 is not evaluated (it uses $TP, which has no value the "
      "script defines); its value is unknown",
      "$((8 / (2 - 2))) on line 3 is not evaluated (division by 0); its value is unknown",
      "$((1 ? 2)) on line 4 is not evaluated (cannot read it: ':' expected for the conditional at "
      "the end); its value is unknown",
      "$((2 ** -1)) on line 5 is not evaluated (exponent less than 0); its value is unknown",
      "$((4 % 0)) on line 6 is not evaluated (division by 0); its value is unknown"};
  EXPECT_EQ(s.notes, want);
  // Twenty are named, then one note says there are more.
  std::string many;
  for (int i = 0; i < 30; ++i) many += "X=$((1/0))\n";
  const ShellScript m = read_shell_script(many + "python x.py\n", "t.sh");
  ASSERT_EQ(m.notes.size(), 21u);
  EXPECT_NE(m.notes[19].find("on line 20"), std::string::npos) << m.notes[19];
  EXPECT_NE(m.notes[20].find("not named"), std::string::npos) << m.notes[20];
  // The reader's own markers for unknown values cannot be forged: a \x01
  // in a value or in the expression is refused, not trusted.
  EXPECT_EQ(args_of("A=\"\x01"
                    "5\"\npython x.py $(( $A + 1 )) $(( 2 \x02 ))\n"),
            (V{"<$(( $A + 1 ))>", "<$(( 2 \x02 ))>"}));
  // A known condition picks its branch even if the other is unknown.
  EXPECT_EQ(args_of("TP=4\npython x.py $(( TP > 1 ? TP : $1 ))\n"), (V{"4"}));
}

// ((...)) commands and `let` assign; neither stops the reading, and
// `for ((...))` is a loop header like any other.
TEST(ShellScript, ArithmeticCommandsAndLet) {
  const ShellScript s = read_shell_script(
      "TP=2\n"
      "(( N = TP * 4 ))\n"
      "((N++))\n"
      "let M=N+1 \"K = M << 1\"\n"
      "if (( TP > 1 )); then\n  SP=1\nfi\n"
      "for (( i = 0; i < 3; i++ )); do\n  :\ndone\n"
      "(( W = y << 2 ))\n"
      "(( U = $1 + 1 ))\n"
      "python x.py --n $N --m $M --k $K --sp $SP --u $U\n",
      "t.sh");
  EXPECT_EQ(texts(s.launch.args),
            (V{"--n", "9", "--m", "10", "--k", "20", "--sp", "1", "--u", "<$(($1 + 1))>"}));
  EXPECT_EQ(s.find("i"), nullptr);  // the loop header is not evaluated
  // y and $1 are unknown: two notes; the loop is read once: one more (the
  // if's condition is known: none).
  ASSERT_EQ(s.notes.size(), 3u) << s.notes[0];
  EXPECT_NE(s.notes[0].find("(( W = y << 2 )) on line 11"), std::string::npos) << s.notes[0];
  EXPECT_NE(s.notes[1].find("(( U = $1 + 1 )) on line 12"), std::string::npos) << s.notes[1];
  EXPECT_NE(s.notes[2].find("loops (line 8) are read once"), std::string::npos) << s.notes[2];
}

// Here-documents: the body is consumed up to the delimiter line (never
// read as commands) and the here-document is skipped with a note naming
// its line, the command it feeds and the file that command writes.
TEST(ShellScript, HereDocumentsAreSkippedWithANote) {
  const std::string text =
      "TP=2\n"
      "cat <<EOF > \"${OUT}/config.yaml\"\n"                                     // 2
      "model:\n  layers: $((TP * 4))\n  name: \"open quote\n"                    // 3-5
      "torchrun fake.py --bad\n"                                                 // 6
      "EOF\n"                                                                    // 7
      "python - <<'PYEOF' 2>&1 | tee log\n"                                      // 8
      "print(\"(\")\n"                                                           // 9
      "PYEOF\n"                                                                  // 10
      "\tcat <<-END >> notes.txt\n"                                              // 11
      "\tindented\n"                                                             // 12
      "\tEND\n"                                                                  // 13
      "cat <<\"E O F\" <<EOF2; echo <<< \"here string\"\n"                       // 14
      "E O F\n"                                                                  // 15
      "EOF2\n"                                                                   // 16
      "torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers $((TP * 2))\n";  // 17
  const ShellScript s = read_shell_script(text, "t.sh");
  EXPECT_EQ(texts(s.launch.args), (V{"--num-layers", "4"}));
  EXPECT_EQ(s.launch.line, 17);
  const std::vector<std::string> want = {
      "the here-document <<EOF on line 2 (lines 3-6) feeds cat, written to "
      "\"${OUT}/config.yaml\"; it is skipped: hapmoe runs nothing, and its lines are not read as "
      "commands",
      "the here-document <<'PYEOF' on line 8 (line 9) feeds python; it is skipped: hapmoe runs "
      "nothing, and its lines are not read as commands",
      "the here-document <<-END on line 11 (line 12) feeds cat, written to notes.txt; it is "
      "skipped: hapmoe runs nothing, and its lines are not read as commands",
      "the here-document <<\"E O F\" on line 14 (with no lines) feeds cat; it is skipped: hapmoe "
      "runs nothing, and its lines are not read as commands",
      "the here-document <<EOF2 on line 14 (with no lines) feeds cat; it is skipped: hapmoe runs "
      "nothing, and its lines are not read as commands"};
  EXPECT_EQ(s.notes, want);
}

// A here-document given to the launch command itself: the command line is
// read, and the note says what is not.
TEST(ShellScript, HereDocumentOfTheLaunchCommandIsNamed) {
  const ShellScript s = read_shell_script(
      "torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 4 <<EOF\n--hidden-size 8\nEOF\n",
      "t.sh");
  EXPECT_EQ(texts(s.launch.args), (V{"--num-layers", "4"}));
  ASSERT_EQ(s.notes.size(), 1u);
  EXPECT_EQ(s.notes[0],
            "the launch command on line 1 reads the here-document <<EOF on line 1 (line 2) on its "
            "standard input; only its command line is read, not what the here-document gives the "
            "program");
}

// eval reads its words again as commands (Pai-Megatron-Patch builds the
// launch command in a string and runs `eval ${run_cmd}`); unknown words are
// read again from their source and stay unknown.
TEST(ShellScript, EvalReadsItsWordsAgain) {
  const ShellScript s = read_shell_script(
      "OPTS=\"--a 1 --b '2 3'\"\n"
      "run_cmd=\"torchrun --nnodes 1 pretrain_gpt.py ${OPTS} --save $1\"\n"
      "echo ${run_cmd}\n"
      "eval ${run_cmd}\n",
      "t.sh");
  ASSERT_TRUE(s.has_command);
  EXPECT_EQ(s.launch.line, 4);
  EXPECT_EQ(texts(s.launch.args), (V{"--a", "1", "--b", "2 3", "--save", "<$1>"}));
  EXPECT_EQ(args_of("eval 'X=5; Y=$((X + 1))'\npython x.py $Y\n"), (V{"6"}));
}

TEST(ShellScript, QuoteRoundTrips) {
  for (const std::string s : {"plain", "two words", "it's", "E,t*9|t*9|L", "", "$HOME"}) {
    EXPECT_EQ(args_of("python a.py --v " + shell_quote(s) + "\n"), (V{"--v", s})) << s;
  }
}

// Hostile scripts: each fails with an InputError that names the line, and
// fast.
TEST(ShellScript, HostileScriptsFailCleanlyInBoundedTime) {
  struct Case {
    std::string text;
    std::string expect;  // part of the message
  };
  std::string doubling = "A=x\n";
  for (int i = 0; i < 40; ++i) doubling += "A=\"$A$A\"\n";
  doubling += "python a.py --a $A\n";
  auto repeat = [](const std::string& s, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += s;
    return out;
  };
  std::string nested = "X=";
  for (int i = 0; i < 200; ++i) nested += "${A:-";
  nested += "1";
  for (int i = 0; i < 200; ++i) nested += "}";
  nested += "\n";
  // Each variable's value names the one below 1000 times: reading A would
  // take 1000^5 steps.
  std::string exponential = "E=1\n";
  for (const char* name : {"D", "C", "B", "A"}) {
    std::string sum = "0";
    for (int i = 0; i < 1000; ++i)
      sum += std::string("+") + (name[0] == 'D' ? "E" : std::string(1, name[0] + 1));
    exponential += std::string(name) + "=\"" + sum + "\"\n";
  }
  exponential += "X=$((A))\n";
  // Copies of a 512 KiB value, an element of a large array, appends to an
  // array: each linear in what it copies, so none takes long.
  std::string copies = "A=x\n";
  for (int i = 0; i < 19; ++i) copies += "A=\"$A$A\"\n";
  for (int i = 0; i < 100000; ++i) copies += "B=$A\n";
  std::string elements = "A=(\n";
  for (int i = 0; i < 100000; ++i) elements += "x\n";
  elements += ")\n";
  for (int i = 0; i < 100000; ++i) elements += "B=${A[1]}$((A[2]))\n";
  std::string appends;
  for (int i = 0; i < 100000; ++i) appends += "A+=(x)\n";
  // Thousands of undecided branches: each one's condition names all those
  // before it (quadratic; these took gigabytes before their conditions
  // were charged to the copy budget).
  std::string elifs = "if [ $(x) = 0 ]; then :\n";
  for (int i = 0; i < 20000; ++i)
    elifs += "elif [ $(x) = " + std::to_string(i) + " ]; then A+=(x)\n";
  elifs += "fi\n";
  std::string case_chain = "case $(x) in\n";
  for (int i = 0; i < 20000; ++i) case_chain += "a" + std::to_string(i) + ") A+=(x);;\n";
  case_chain += "esac\n";
  const std::vector<Case> cases = {
      {"python a.py --a 'open\n", "t.sh:1: unterminated single quote"},
      {"python a.py \\\n --a \"open\n", "t.sh:2: unterminated double quote"},
      {"A=(\n --a 1\n", "t.sh:1: unterminated array"},
      {"python a.py --a ${X\n", "unterminated '{'"},
      {"python a.py\n\ncat <<EOF > x\n--a 1\nEO\n", "t.sh:3: unterminated here-document <<EOF"},
      {"python a.py --a 1 <<-'END'", "t.sh:1: unterminated here-document <<-'END'"},
      {"cat <<\npython a.py\n", "t.sh:1: here-document << without a delimiter word"},
      {"python a.py --a " + std::string(10u << 20, 'x') + "\n", "at most"},
      {doubling, "runaway"},
      {nested, "nested too deeply"},
      {"X=$((" + std::string(40, '(') + "1" + std::string(40, ')') + "))\n", "nested too deeply"},
      {"X=$((" + std::string(40, '-') + "1))\n", "nested too deeply"},
      {"if [ " + repeat("! ", 100000) + "x ]; then :; fi\n", "a test is nested too deeply"},
      {"[[ " + repeat("( ", 100000) + "x ]]\n", "a test is nested too deeply"},
      {"X=$((1?1:1?1:" +
           [] {
             std::string t;
             for (int i = 0; i < 40; ++i) t += "1?1:";
             return t;
           }() +
           "1))\n",
       "nested too deeply"},
      {"A=B\nB=A\nX=$((A))\n", "nested too deeply"},
      {exponential, "steps"},
      {"A='eval $A'\neval $A\n", "t.sh:2: eval is nested too deeply"},
      {copies, "copy more than"},
      {elements, "no Megatron-LM launch command"},
      {appends, "no Megatron-LM launch command"},
      {elifs, "copy more than"},
      // Values under thousands of conditions: at most 16 are kept, and their
      // conditions are charged to the copy budget.
      {"D=1\n" + repeat("if [ -z \"$U\" ]; then :; else D=\"-$D\"; fi\n", 20000), "copy more than"},
      {"D=1\n" + repeat("if [ $(x) = 1 ]; then D=$D; fi\n", 20000), "copy more than"},
      {case_chain, "copy more than"},
      {repeat("case a in a)\n", 100000) + repeat(";; esac\n", 100000), "no Megatron-LM launch"},
      {"case x in " + repeat("a|", 100000) + "x) ;; esac\n", "no Megatron-LM launch command"},
      {"case x in x) " + repeat("case ", 10) + "\n", "t.sh:1: case case without 'in'"},
      {"A=1\nB=$A\nA=$B$B\npython a.py --a $A\n", ""},  // no recursion: eager values
  };
  for (const Case& c : cases) {
    const auto start = std::chrono::steady_clock::now();
    try {
      const ShellScript s = read_shell_script(c.text, "t.sh");
      EXPECT_TRUE(c.expect.empty()) << "no error for: " << c.text.substr(0, 60);
      if (c.expect.empty()) {
        EXPECT_EQ(texts(s.launch.args), (V{"--a", "11"}));
      }
    } catch (const InputError& e) {
      EXPECT_FALSE(c.expect.empty()) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.expect), std::string::npos)
          << e.what() << "\nexpected: " << c.expect;
    }
    // Bounded, not fast: unbounded cases would take hours (1000^5 steps,
    // 50 GB of copies). The bound leaves room for a sanitizer build on a
    // loaded 2-core machine (12 s seen under ASan while other builds ran);
    // the speed itself is measured in bench/, not here.
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(s, 60.0) << c.text.substr(0, 60);
  }
}

bool has_note(const ShellScript& s, const std::string& part) {
  for (const std::string& n : s.notes) {
    if (n.find(part) != std::string::npos) return true;
  }
  return false;
}

// --megatron-env is the environment: defaults yield to it, the script's own
// assignments win over it; --megatron-env-override wins over those too.
// Neither is ever dropped without a note.
TEST(ShellScript, EnvironmentPrecedenceAndUnreadNames) {
  const std::string text =
      "TP=2\n"
      "PP=${PP:-4}\n"
      "NNODES=${SLURM_NNODES:-1}\n"
      "((TP++))\n"
      "python pretrain_gpt.py --tp $TP --pp $PP --nodes $NNODES\n";
  const ShellScript plain = read_shell_script(text, "t.sh");
  EXPECT_EQ(texts(plain.launch.args), (V{"--tp", "3", "--pp", "4", "--nodes", "1"}));

  const ShellScript env =
      read_shell_script(text, "t.sh", {.env = {{"TP", "8"}, {"PP", "2"}, {"SLURM_NODES", "4"}}});
  EXPECT_EQ(texts(env.launch.args), (V{"--tp", "3", "--pp", "2", "--nodes", "1"}));
  EXPECT_TRUE(has_note(env,
                       "--megatron-env TP=8 is not used: the script sets TP on line 1 "
                       "before reading it (--megatron-env-override TP=8"));
  EXPECT_TRUE(has_note(env,
                       "--megatron-env SLURM_NODES=4 is not used: the script never reads "
                       "SLURM_NODES"));
  EXPECT_FALSE(has_note(env, "PP=2"));

  const ShellScript over = read_shell_script(
      text, "t.sh", {.overrides = {{"TP", "8"}, {"NNODES", "2"}, {"UNUSED", "1"}}});
  EXPECT_EQ(texts(over.launch.args), (V{"--tp", "8", "--pp", "4", "--nodes", "2"}));
  EXPECT_TRUE(has_note(over, "line 1 sets TP; --megatron-env-override TP=8 keeps its value"));
  EXPECT_TRUE(has_note(over, "line 3 sets NNODES; --megatron-env-override NNODES=2"));
  EXPECT_TRUE(has_note(over, "--megatron-env-override UNUSED=1 is not used"));

  // A name read before the script sets it was used: no note.
  const ShellScript before =
      read_shell_script("A=$X\nX=1\npython a.py --a $A\n", "t.sh", {.env = {{"X", "5"}}});
  EXPECT_EQ(texts(before.launch.args), (V{"--a", "5"}));
  EXPECT_TRUE(before.notes.empty());

  EXPECT_THROW(read_shell_script(text, "t.sh", {.env = {{"A", "1"}}, .overrides = {{"A", "2"}}}),
               InputError);
  EXPECT_THROW(read_shell_script(text, "t.sh", {.overrides = {{"1A", "2"}}}), InputError);
}

// --megatron-script-args: $1 ... $N, $#, "$@", "$*" and shift as bash has
// them; without the arguments positional parameters stay unknown.
TEST(ShellScript, PositionalArguments) {
  const std::string text =
      "ENV=$1\n"
      "SIZE=$2\n"
      "N=$#\n"
      "LAST=${4:-none}\n"
      "ALL=\"$*\"\n"
      "shift 2\n"
      "python pretrain_gpt.py --env $ENV --size $SIZE --n $N --last $LAST --rest \"$@\" "
      "--all \"$ALL\" --first-after-shift $1\n";
  const std::vector<std::string> args = {"dlc", "A3B", "two words", "x"};
  EXPECT_EQ(texts(read_shell_script(text, "t.sh", {.args = args}).launch.args),
            (V{"--env", "dlc", "--size", "A3B", "--n", "4", "--last", "x", "--rest", "two words",
               "x", "--all", "dlc A3B two words x", "--first-after-shift", "two", "words"}));
  // Fewer arguments: a missing one is empty and shift 2 fails, as in bash.
  EXPECT_EQ(texts(read_shell_script(text, "t.sh", {.args = V{"dlc"}}).launch.args),
            (V{"--env", "dlc", "--size", "--n", "1", "--last", "none", "--rest", "dlc", "--all",
               "dlc", "--first-after-shift", "dlc"}));
  // No arguments given: unknown, kept as written.
  const ShellScript unknown = read_shell_script(text, "t.sh");
  EXPECT_EQ(texts(unknown.launch.args)[1], "<$1>");
  // Arithmetic reads them too.
  EXPECT_EQ(
      texts(read_shell_script("python a.py --gbs $(( $2 * 8 ))\n", "t.sh", {.args = V{"a", "32"}})
                .launch.args),
      (V{"--gbs", "256"}));
}

TEST(ShellScript, SplitsACommandLineAsBashDoes) {
  EXPECT_EQ(split_shell_words("dlc A3B 1 '256' \"two words\" a\\ b", "--megatron-script-args"),
            (V{"dlc", "A3B", "1", "256", "two words", "a b"}));
  EXPECT_TRUE(split_shell_words("", "x").empty());
  EXPECT_THROW(split_shell_words("a; b", "--megatron-script-args"), InputError);
  EXPECT_THROW(split_shell_words("$HOME", "--megatron-script-args"), InputError);
  EXPECT_THROW(split_shell_words("'open", "--megatron-script-args"), InputError);
}

// if / elif / else, && and ||, [ ], [[ ]] and test are evaluated when what
// they test is known; a branch not taken is not read. What cannot be
// evaluated reads every branch, in order, with a note naming the line.
TEST(ShellScript, ConditionalsAreEvaluatedWhenKnown) {
  const std::string text =
      "MODEL=${1:-small}\n"                                        // 1
      "if [ \"$MODEL\" = small ]; then\n"                          // 2
      "  L=8\n"                                                    // 3
      "  if [[ $L -gt 4 && $MODEL == sm* ]]; then DEEP=yes; fi\n"  // 4
      "elif [ $MODEL = large ]; then\n"                            // 5
      "  L=32\n"                                                   // 6
      "  if [ $L -gt 4 ]; then DEEP=large; fi\n"                   // 7
      "else\n"                                                     // 8
      "  L=2\n"                                                    // 9
      "fi\n"                                                       // 10
      "[ -z \"$FP8\" ] && FP8=off || FP8=on\n"                     // 11
      "test $L -ge 8 || SMALL=1\n"                                 // 12
      "if ! [[ $(cat m) =~ ^x ]]; then R=maybe; fi\n"              // 13
      "(( L > 16 )) && BIG=1\n"                                    // 14
      "python a.py --l $L --deep ${DEEP:-no} --fp8 $FP8 --small ${SMALL:-0} --big ${BIG:-0}\n";
  const ShellScript small = read_shell_script(text, "t.sh", {.env = {{"FP8", ""}}});
  EXPECT_EQ(texts(small.launch.args),
            (V{"--l", "8", "--deep", "yes", "--fp8", "off", "--small", "0", "--big", "0"}));
  // FP8 set by nothing: a test takes it as unset (bash without it in the
  // environment), with a note.
  const ShellScript large = read_shell_script(text, "t.sh", {.args = V{"large"}});
  EXPECT_EQ(texts(large.launch.args),
            (V{"--l", "32", "--deep", "large", "--fp8", "off", "--small", "0", "--big", "1"}));
  ASSERT_FALSE(large.notes.empty());
  EXPECT_EQ(large.notes[0],
            "tests of variables that neither the script nor --megatron-env sets take them as "
            "unset, as bash does when the environment lacks them: FP8 (line 11) (give "
            "--megatron-env NAME=VALUE for another value)");
  const ShellScript other =
      read_shell_script(text, "t.sh", {.env = {{"FP8", "e4m3"}}, .args = V{"tiny"}});
  EXPECT_EQ(texts(other.launch.args),
            (V{"--l", "2", "--deep", "no", "--fp8", "on", "--small", "1", "--big", "0"}));
  // A command's output is not known: line 13 is named, and R is set as if
  // its branch ran.
  ASSERT_FALSE(other.notes.empty());
  EXPECT_EQ(other.notes.front(),
            "the condition on line 13 cannot be evaluated before the script runs "
            "(--megatron-env or --megatron-script-args may give what they test): each branch "
            "is read, in order, so flags set in any of them are kept");
  EXPECT_NE(other.find("R"), nullptr);

  // =~: a quoted right side is literal text, an unquoted one a POSIX
  // extended expression (the Megatron-MoE-ModelZoo's layout check).
  const std::string re =
      "P=\"--num-layers 4 --pipeline-model-parallel-layout Et|tttL\"\n"
      "if [[ ! \"${P}\" =~ \"--pipeline-model-parallel-layout\" ]]; then P=\"$P --first 1\"; fi\n"
      "[[ $P =~ ^--num-layers\\ [0-9]+ ]] && P=\"$P --re yes\"\n"
      "[[ $P =~ \"^--num\" ]] && P=\"$P --literal-caret\"\n"
      "python a.py $P\n";
  const ShellScript matched = read_shell_script(re, "t.sh");
  EXPECT_EQ(texts(matched.launch.args),
            (V{"--num-layers", "4", "--pipeline-model-parallel-layout", "Et|tttL", "--re", "yes"}));
  EXPECT_TRUE(matched.notes.empty()) << matched.notes.front();

  // A launch command inside a branch not taken is not the launch.
  const ShellScript launch = read_shell_script(
      "MODE=train\nif [ $MODE = debug ]; then\n  python debug.py --x 1\nelse\n"
      "  torchrun pretrain_gpt.py --x 2\nfi\n",
      "t.sh");
  EXPECT_EQ(launch.launch.entry.text, "pretrain_gpt.py");
  EXPECT_TRUE(launch.notes.empty()) << launch.notes.front();
  // Unknown conditions (a command's output): the later branch wins.
  const ShellScript unknown = read_shell_script(
      "if [ \"$(cat x)\" = 1 ]; then N=1; elif [ \"$(cat y)\" = 2 ]; then N=2; fi\n"
      "python a.py --n $N\n",
      "t.sh");
  EXPECT_EQ(texts(unknown.launch.args), (V{"--n", "2"}));
  ASSERT_EQ(unknown.notes.size(), 1u);
  EXPECT_NE(unknown.notes[0].find("the condition on line 1 "), std::string::npos)
      << unknown.notes[0];
}

// A script saved with Windows line ends reads as after dos2unix, with a
// note (it used to fail with '"" is not a --flag').
TEST(ShellScript, WindowsLineEndsAreReadAsAfterDos2unix) {
  const ShellScript s = read_shell_script(
      "TP=2\r\ntorchrun pretrain_gpt.py \\\r\n  --tp $TP \\\r\n  --name 'a\rb'\r\n", "t.sh");
  EXPECT_EQ(texts(s.launch.args), (V{"--tp", "2", "--name", "a\rb"}));
  ASSERT_EQ(s.notes.size(), 1u);
  EXPECT_EQ(s.notes[0],
            "the script has Windows line ends (CRLF, first on line 1): read as after dos2unix "
            "(bash itself would stop at the \\r)");
  EXPECT_TRUE(read_shell_script("python a.py --x 1\n", "t.sh").notes.empty());
}

// Words added under a condition hapmoe cannot decide carry it (as bash),
// so a launcher can keep them inside it; defaults of unset variables are
// marked so a launcher keeps them defaults.
TEST(ShellScript, UndecidedConditionsAndDefaultsAreKeptOnTheWords) {
  const ShellScript s = read_shell_script(
      "A=(--always 1)\n"
      "if [ \"$(x)\" = 1 ]; then A+=(--x 1); elif [[ $(y) == y* && $(z) ]]; then A+=(--y 1);\n"
      "else A+=(--other ${OTHER:-o}); fi\n"
      "[ -n \"$(w)\" ] && A+=(--w 1)\n"
      "K=1\n"
      "if [ $K = 1 ]; then A+=(--k 1); fi\n"
      "python a.py ${A[@]} --d ${D:-5} --e ${K:-6}\n",
      "t.sh");
  std::vector<std::string> got;
  for (const ShellWord& w : s.launch.args) {
    got.push_back(w.text + (w.guard.empty() ? "" : " if " + w.guard) +
                  (w.defaulted ? " default " + w.source : ""));
  }
  EXPECT_EQ(got,
            (V{"--always", "1", "--x if [ \"$(x)\" = 1 ]", "1 if [ \"$(x)\" = 1 ]",
               "--y if ! [ \"$(x)\" = 1 ] && { [[ $(y) == y* && $(z) ]]; }",
               "1 if ! [ \"$(x)\" = 1 ] && { [[ $(y) == y* && $(z) ]]; }",
               "--other if ! [ \"$(x)\" = 1 ] && ! { [[ $(y) == y* && $(z) ]]; }",
               "o if ! [ \"$(x)\" = 1 ] && ! { [[ $(y) == y* && $(z) ]]; } default ${OTHER:-o}",
               "--w if [ -n \"$(w)\" ]", "1 if [ -n \"$(w)\" ]", "--k", "1", "--d",
               "5 default ${D:-5}", "--e", "1"}));
}

// A test of a variable nothing sets takes it as unset, as bash does when
// the environment lacks it ([ -z ${MP_VP} ] in Pai-Megatron-Patch's
// scripts): the branch it selects is read; the array appends of the other
// are kept for a launcher only, under their condition, and all the
// branch's words carry the condition, so a launcher re-decides it.
TEST(ShellScript, TestsOfUnsetVariablesTakeThemAsUnset) {
  const std::string text =
      "if [ -z ${MP_VP} ]; then vp=\"\"; else vp=\"--vpp ${MP_VP}\"; fi\n"
      "A=(--x 1)\n"
      "if [ -n \"$KEY\" ]; then A+=(--key \"$KEY\"); else A+=(--nokey); fi\n"
      "python a.py ${A[@]} $vp\n";
  const ShellScript s = read_shell_script(text, "t.sh");
  std::vector<std::string> got;
  for (const ShellWord& w : s.launch.args) {
    got.push_back((w.known ? w.text : "<" + w.source + ">") +
                  (w.guard.empty() ? "" : " if " + w.guard) +
                  (w.launcher_only ? " (launcher)" : ""));
  }
  // vp="--vpp ${MP_VP}" of the else reaches a launcher too, under its
  // condition (it used to be dropped: only the selected vp="" was kept).
  EXPECT_EQ(got, (V{"--x", "1", "--key if [ -n \"$KEY\" ] (launcher)",
                    "<\"$KEY\"> if [ -n \"$KEY\" ] (launcher)", "--nokey if ! [ -n \"$KEY\" ]",
                    "--vpp if ! [ -z ${MP_VP} ] (launcher)",
                    "<${MP_VP}> if ! [ -z ${MP_VP} ] (launcher)"}));
  ASSERT_EQ(s.notes.size(), 1u);
  EXPECT_NE(s.notes[0].find("KEY (line 3), MP_VP (line 1)"), std::string::npos) << s.notes[0];
  // Given a value, the variable is tested as given.
  const ShellScript given =
      read_shell_script(text, "t.sh", {.env = {{"MP_VP", "2"}, {"KEY", "k"}}});
  EXPECT_EQ(texts(given.launch.args), (V{"--x", "1", "--key", "k", "--vpp", "2"}));
  EXPECT_TRUE(given.notes.empty()) << given.notes[0];
}

// A test decided by a default (${2:-MOCK} without the arguments) is an
// assumption: the selected branch's words carry the test, the other
// branch's array words are kept for a launcher only, and a note says so.
TEST(ShellScript, TestsDecidedByADefaultStayTestsForTheLauncher) {
  const std::string text =
      "DATA=${2:-MOCK}\n"
      "if [[ \"$DATA\" == \"MOCK\" ]]; then D=(--mock-data); else D=(--data-path \"$DATA\"); fi\n"
      "python a.py \"${D[@]}\"\n";
  const ShellScript s = read_shell_script(text, "t.sh");
  ASSERT_EQ(s.launch.args.size(), 3u);
  EXPECT_EQ(s.launch.args[0].text, "--mock-data");
  EXPECT_EQ(s.launch.args[0].guard, "[[ \"$DATA\" == \"MOCK\" ]]");
  EXPECT_FALSE(s.launch.args[0].launcher_only);
  EXPECT_EQ(s.launch.args[1].text, "--data-path");
  EXPECT_TRUE(s.launch.args[1].launcher_only);
  EXPECT_EQ(s.launch.args[1].guard, "! [[ \"$DATA\" == \"MOCK\" ]]");
  ASSERT_EQ(s.notes.size(), 1u);
  EXPECT_NE(s.notes[0].find("the test on line 2 read a default"), std::string::npos) << s.notes[0];
  // With the arguments given, the test is decided by them: no assumption.
  const ShellScript given = read_shell_script(text, "t.sh", {.args = V{"/ck", "/data/x"}});
  EXPECT_EQ(texts(given.launch.args), (V{"--data-path", "/data/x"}));
  EXPECT_EQ(given.launch.args[0].guard, "");
  EXPECT_TRUE(given.notes.empty());
}

// What a word's launcher view is: its text (or <source>), its condition
// and whether it is kept for a launcher only.
std::vector<std::string> guarded(const std::vector<ShellWord>& words) {
  std::vector<std::string> out;
  for (const ShellWord& w : words) {
    out.push_back((w.known ? w.text : "<" + w.source + ">") +
                  (w.guard.empty() ? "" : " if " + w.guard) +
                  (w.launcher_only ? " (launcher)" : ""));
  }
  return out;
}

// case is evaluated as bash does (it used to read every branch, with a
// note): a known word reads only the branch its patterns select, with
// glob patterns (quoted parts literal), alternatives, ;; ;& and ;;&
// (Pai-Megatron-Patch's `case $MODEL_SIZE in A3B) ...`).
TEST(ShellScript, CaseReadsTheBranchAKnownWordSelects) {
  const std::string text =
      "MODEL_SIZE=$1\n"
      "PR=$2\n"
      "case $MODEL_SIZE in\n"
      "  A3B|a3b)\n"
      "    NUM_LAYERS=48\n"
      "    HIDDEN=2048 ;;\n"
      "  30B) NUM_LAYERS=64; HIDDEN=5120;;\n"
      "  (*)\n"
      "    NUM_LAYERS=0\n"
      "    python oops.py --size $MODEL_SIZE\n"
      "    ;;\n"
      "esac\n"
      "case \"${PR}\" in fp16) P=(--fp16);; bf16) P=(--bf16) ;; esac\n"
      "python a.py --l $NUM_LAYERS --h ${HIDDEN:-none} ${P[@]}\n";
  const ShellScript a3b = read_shell_script(text, "t.sh", {.args = V{"a3b", "bf16"}});
  EXPECT_EQ(texts(a3b.launch.args), (V{"--l", "48", "--h", "2048", "--bf16"}));
  EXPECT_TRUE(a3b.notes.empty()) << a3b.notes[0];
  const ShellScript b30 = read_shell_script(text, "t.sh", {.args = V{"30B", "fp16"}});
  EXPECT_EQ(texts(b30.launch.args), (V{"--l", "64", "--h", "5120", "--fp16"}));
  // * takes what no other pattern does: its launch command is the launch.
  const ShellScript other = read_shell_script(text, "t.sh", {.args = V{"7B", "fp32"}});
  EXPECT_EQ(other.launch.entry.text, "oops.py");

  auto read = [](const std::string& script) {
    return texts(
        read_shell_script(script + "python a.py ${X:-} ${Y:-} ${Z:-}\n", "t.sh").launch.args);
  };
  // Globs: * ? [...] [!...]; quoted parts, escapes and quoted expansions
  // are literal text, an unquoted expansion is a pattern.
  EXPECT_EQ(read("case 7B in [0-9]B) X=digit;; *) X=other;; esac\n"), V{"digit"});
  EXPECT_EQ(read("case 7B in [!0-9]B) X=digit;; ?B) X=any;; esac\n"), V{"any"});
  EXPECT_EQ(read("case ab in \"a\"?) X=q;; esac\n"), V{"q"});
  EXPECT_EQ(read("case ab in \"a?\") X=q;; *) X=lit;; esac\n"), V{"lit"});
  EXPECT_EQ(read("case '*' in a) X=a;; \"*\") X=star;; esac\n"), V{"star"});
  EXPECT_EQ(read("case 'a*' in a\\*) X=esc;; esac\n"), V{"esc"});
  EXPECT_EQ(read("G='b*'; case bc in $G) X=glob;; esac\n"), V{"glob"});
  EXPECT_EQ(read("G='b*'; case bc in \"$G\") X=glob;; *) X=literal;; esac\n"), V{"literal"});
  EXPECT_EQ(read("case x in\n  # a comment\n  y) X=y ;;\nesac\nZ=z\n"), V{"z"});
  EXPECT_EQ(read("case x\nin x) X=x\nesac\n"), V{"x"});
  // ;& runs the next branch without testing it; ;;& tests the next
  // patterns too.
  EXPECT_EQ(read("case a in a) X=1 ;& b) Y=2 ;; *) Z=3 ;; esac\n"), (V{"1", "2"}));
  EXPECT_EQ(read("case ab in a*) X=1 ;;& *b) Y=2 ;;& c) Z=3 ;; esac\n"), (V{"1", "2"}));
  EXPECT_EQ(read("case ab in c) X=1 ;& *b) Y=2 ;; esac\n"), V{"2"});
  // Nested, and inside an if not taken.
  EXPECT_EQ(read("case a in a) case b in b) X=ab;; esac; Y=a ;; b) Y=b;; esac\n"), (V{"ab", "a"}));
  EXPECT_EQ(read("if false; then case a in a) X=1;; esac; fi\nY=2\n"), V{"2"});
  // Malformed: bash would not run it either.
  EXPECT_THROW(read_shell_script("case a b) X=1;; esac\n", "t.sh"), InputError);
  EXPECT_THROW(read_shell_script("case a in ;; esac\n", "t.sh"), InputError);
  EXPECT_THROW(read_shell_script("case a in a b) X=1;; esac\n", "t.sh"), InputError);
}

// A case whose word is unknown (a command's output, an argument not
// given) reads every branch in order, as before, with a note naming it;
// the words each branch adds carry its condition for a launcher.
TEST(ShellScript, CaseOfAnUnknownWordReadsEveryBranch) {
  const ShellScript s = read_shell_script(
      "A=(--always)\n"
      "case $(hostname) in\n"
      "  n1) N=1; A+=(--n1) ;;\n"
      "  n2|n3) N=2; A+=(--n2) ;;\n"
      "  *) A+=(--other) ;;\n"
      "esac\n"
      "python a.py ${A[@]} --n $N\n",
      "t.sh");
  EXPECT_EQ(guarded(s.launch.args),
            (V{"--always", "--n1 if [[ $(hostname) == n1 ]]",
               "--n2 if ! [[ $(hostname) == n1 ]] && { [[ $(hostname) == n2 || $(hostname) == n3 "
               "]]; }",
               "--other if ! [[ $(hostname) == n1 ]] && ! { [[ $(hostname) == n2 || "
               "$(hostname) == n3 ]]; }",
               "--n", "2"}));
  ASSERT_EQ(s.notes.size(), 1u);
  EXPECT_EQ(s.notes[0],
            "the case statement on line 2 tests a word unknown before the script runs "
            "(--megatron-env or --megatron-script-args may give it): each branch is read, in "
            "order, so flags set in any of them are kept");
  // NAME=(...) in each branch: the reading uses the last, a launcher keeps
  // each under its condition (the earlier branches' words used to be lost).
  const ShellScript e = read_shell_script(
      "case $(x) in a) E=(--a 1);; *) E=(--other); E=(--last);; esac\n"
      "if [ \"$(y)\" = 1 ]; then F=(--y); else F=(--not-y); fi\n"
      "python a.py ${E[@]} ${F[@]}\n",
      "t.sh");
  EXPECT_EQ(guarded(e.launch.args),
            (V{"--a if [[ $(x) == a ]] (launcher)", "1 if [[ $(x) == a ]] (launcher)",
               "--last if ! [[ $(x) == a ]]", "--y if [ \"$(y)\" = 1 ] (launcher)",
               "--not-y if ! [ \"$(y)\" = 1 ]"}));
}

// A case decided only by an assumption (a variable nothing sets taken as
// unset, a ${VAR:-default}) is read like an if decided that way: the
// branch selected is read, its words carry its condition, and the array
// words of the others are kept for a launcher only, under theirs.
TEST(ShellScript, CaseDecidedByAnAssumptionKeepsTheOtherBranches) {
  const ShellScript d = read_shell_script(
      "case ${PR:-bf16} in\n"
      "  fp16) P=(--fp16) ;;\n"
      "  bf16) P=(--bf16) ;;\n"
      "esac\n"
      "python a.py ${P[@]}\n",
      "t.sh");
  EXPECT_EQ(guarded(d.launch.args),
            (V{"--fp16 if [[ ${PR:-bf16} == fp16 ]] (launcher)",
               "--bf16 if ! [[ ${PR:-bf16} == fp16 ]] && [[ ${PR:-bf16} == bf16 ]]"}));
  ASSERT_EQ(d.notes.size(), 1u);
  EXPECT_NE(d.notes[0].find("the test on line 1 read a default"), std::string::npos) << d.notes[0];
  // Unset: neither pattern matches the empty word; both kept for a launcher.
  const ShellScript u = read_shell_script(
      "P=(--x)\ncase \"$PR\" in fp16) P+=(--fp16);; bf16) P+=(--bf16);; esac\n"
      "python a.py ${P[@]}\n",
      "t.sh");
  EXPECT_EQ(guarded(u.launch.args),
            (V{"--x", "--fp16 if [[ \"$PR\" == fp16 ]] (launcher)",
               "--bf16 if ! [[ \"$PR\" == fp16 ]] && [[ \"$PR\" == bf16 ]] (launcher)"}));
  EXPECT_NE(u.notes[0].find("PR (line 2)"), std::string::npos) << u.notes[0];
  // Given, the word is known: no conditions, nothing kept.
  const ShellScript g = read_shell_script(
      "case ${PR:-bf16} in fp16) P=(--fp16) ;; bf16) P=(--bf16) ;; esac\npython a.py ${P[@]}\n",
      "t.sh", {.env = {{"PR", "fp16"}}});
  EXPECT_EQ(guarded(g.launch.args), V{"--fp16"});
  EXPECT_TRUE(g.notes.empty());
}

// NAME=(...) in the branch taken keeps the launcher words a branch not
// taken (only by an assumption) of the same if added before it: the order
// of the branches does not matter (the else's words used to be lost when
// the branch taken came second).
TEST(ShellScript, BranchTakenSecondKeepsTheOtherBranchsWords) {
  const ShellScript s = read_shell_script(
      "if [ -n \"$DATA\" ]; then D=(--data-path \"$DATA\"); else D=(--mock-data); fi\n"
      "python a.py \"${D[@]}\"\n",
      "t.sh");
  EXPECT_EQ(guarded(s.launch.args),
            (V{"--data-path if [ -n \"$DATA\" ] (launcher)",
               "<\"$DATA\"> if [ -n \"$DATA\" ] (launcher)", "--mock-data if ! [ -n \"$DATA\" ]"}));
}

// A plain variable set in a branch not taken only by an assumption (here
// a default) reaches a launcher under its condition, as the branch's array
// words do (it used to be dropped): flags it holds are words kept for a
// launcher; a value it holds makes the word vary (the launcher writes the
// variable and defines it under the conditions). The value the reading
// uses carries the condition it holds under. Through another variable
// too.
TEST(ShellScript, PlainVariablesOfOtherBranchesReachTheLauncher) {
  const std::string text =
      "MODE=${MODE:-mock}\n"
      "LR=1e-4\n"
      "if [ \"$MODE\" = mock ]; then\n"
      "  D=\"--mock-data\"\n"
      "else\n"
      "  D=\"--data-path ${DATA_PATH}\"\n"
      "  LR=3e-4\n"
      "fi\n"
      "OPTS=\"--split 99,1,0 $D\"\n"
      "python a.py $OPTS --lr $LR\n";
  const ShellScript s = read_shell_script(text, "t.sh");
  EXPECT_EQ(guarded(s.launch.args),
            (V{"--split", "99,1,0", "--mock-data if [ \"$MODE\" = mock ]",
               "--data-path if ! [ \"$MODE\" = mock ] (launcher)",
               "<${DATA_PATH}> if ! [ \"$MODE\" = mock ] (launcher)", "--lr", "1e-4"}));
  const ShellWord& lr = s.launch.args.back();
  EXPECT_TRUE(lr.varies);
  EXPECT_EQ(lr.source, "$LR");
  EXPECT_EQ(s.variables.at("LR").front().guard, "[ \"$MODE\" = mock ]");
  ASSERT_EQ(s.alternatives.count("LR"), 1u);
  ASSERT_EQ(s.alternatives.at("LR").size(), 1u);
  EXPECT_EQ(s.alternatives.at("LR")[0].text, "3e-4");
  EXPECT_EQ(s.alternatives.at("LR")[0].guard, "! [ \"$MODE\" = mock ]");

  // Given the variable, nothing is assumed: no conditions, no other values.
  const ShellScript given =
      read_shell_script(text, "t.sh", {.env = {{"MODE", "real"}, {"DATA_PATH", "/d"}}});
  EXPECT_EQ(guarded(given.launch.args),
            (V{"--split", "99,1,0", "--data-path", "/d", "--lr", "3e-4"}));
  EXPECT_TRUE(given.alternatives.empty());

  // A value set again where it surely runs replaces the others; one set
  // again in the same branch replaces the earlier; branches of one if
  // exclude each other (no condition is added to theirs).
  const ShellScript again = read_shell_script(
      "if [ -z \"$U\" ]; then X=a; X=b; else X=c; fi\nY=$X\nX=d\npython a.py --x $X --y $Y\n",
      "t.sh");
  EXPECT_EQ(guarded(again.launch.args), (V{"--x", "d", "--y", "b"}));
  EXPECT_EQ(again.alternatives.count("X"), 0u);
  ASSERT_EQ(again.alternatives.count("Y"), 1u);
  EXPECT_EQ(again.variables.at("Y").front().guard, "[ -z \"$U\" ]");
  EXPECT_EQ(again.alternatives.at("Y")[0].text, "c");
  EXPECT_EQ(again.alternatives.at("Y")[0].guard, "! [ -z \"$U\" ]");
  // An undecided condition: both values are kept the same way.
  const ShellScript undecided = read_shell_script(
      "X=0\nif [ \"$(cat f)\" = 1 ]; then X=1; fi\npython a.py --x \"$X\"\n", "t.sh");
  EXPECT_EQ(undecided.launch.args[1].text, "1");
  EXPECT_TRUE(undecided.launch.args[1].varies);
  EXPECT_EQ(undecided.variables.at("X").front().guard, "[ \"$(cat f)\" = 1 ]");
  EXPECT_EQ(undecided.alternatives.at("X")[0].guard, "! [ \"$(cat f)\" = 1 ]");
  // Set another way afterwards (an array, unset, arithmetic): the
  // other values are gone.
  // Through eval (Pai-Megatron-Patch's eval ${run_cmd}): the command each
  // other value runs is compared flag by flag with the one read.
  const ShellScript evaluated = read_shell_script(
      "if [ -z \"$U\" ]; then o=\"--lr 1\"; else o=\"--lr 2 --x\"; fi\n"
      "run_cmd=\"torchrun pretrain_gpt.py --a 1 ${o} --b\"\n"
      "eval ${run_cmd}\n",
      "t.sh");
  EXPECT_EQ(guarded(evaluated.launch.args),
            (V{"--a", "1", "--lr if [ -z \"$U\" ]", "1 if [ -z \"$U\" ]", "--b",
               "--lr if ! [ -z \"$U\" ] (launcher)", "2 if ! [ -z \"$U\" ] (launcher)",
               "--x if ! [ -z \"$U\" ] (launcher)"}));
  // A word expanded again with each other value assigns nothing again.
  const ShellScript once = read_shell_script(
      "N=0\nif [ -z \"$U\" ]; then X=--a; else X=--b; fi\n"
      "python a.py $X,$((N += 1)),${M:=5}\nM=$((M + 1))\n",
      "t.sh");
  ASSERT_EQ(once.launch.args.size(), 2u);
  EXPECT_EQ(once.launch.args[0].text, "--a,1,5");
  EXPECT_TRUE(once.launch.args[1].launcher_only);
  EXPECT_EQ(once.find("N")->text, "1");
  EXPECT_EQ(once.find("M")->text, "6");
  for (const char* after : {"X=(--arr)", "unset X", "(( X = 7 ))"}) {
    const ShellScript gone =
        read_shell_script(std::string("if [ -z \"$U\" ]; then X=--a; else X=--b; fi\n") + after +
                              "\npython a.py $X\n",
                          "t.sh");
    EXPECT_EQ(gone.alternatives.count("X"), 0u) << after;
    for (const ShellWord& w : gone.launch.args) EXPECT_FALSE(w.launcher_only) << after;
  }
}

}  // namespace
}  // namespace hapmoe
