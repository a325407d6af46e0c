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
  return texts(read_shell_script(text, "t.sh", env).launch.args);
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
  std::string nested = "X=";
  for (int i = 0; i < 200; ++i) nested += "${A:-";
  nested += "1";
  for (int i = 0; i < 200; ++i) nested += "}";
  nested += "\n";
  const std::vector<Case> cases = {
      {"python a.py --a 'open\n", "t.sh:1: unterminated single quote"},
      {"python a.py \\\n --a \"open\n", "t.sh:2: unterminated double quote"},
      {"A=(\n --a 1\n", "t.sh:1: unterminated array"},
      {"python a.py --a ${X\n", "unterminated '{'"},
      {"python a.py <<EOF\n--a 1\nEOF\n", "here-documents"},
      {"python a.py --a " + std::string(10u << 20, 'x') + "\n", "at most"},
      {doubling, "runaway"},
      {nested, "nested too deeply"},
      {"A=$((1/0))\n", "division by zero"},
      {"A=$((9223372036854775807*2))\n", "overflow"},
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
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(s, 2.0) << c.text.substr(0, 60);
  }
}

}  // namespace
}  // namespace hapmoe
