// Tests of the strict JSON helpers (io/inputs/json_strict.h).
#include "io/inputs/json_strict.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <string>

#include "costmodel/errors.h"
#include "tests/io/inputs/input_error.h"

namespace hapmoe {
namespace {

using test::catch_input_error;
using test::Caught;

std::string nested_arrays(int depth) {
  return std::string(static_cast<std::size_t>(depth), '[') +
         std::string(static_cast<std::size_t>(depth), ']');
}

// ---------------------------------------------------------------------------
// parse_json

TEST(JsonStrictParse, AcceptsCommentsOfBothKinds) {
  const Json j = parse_json(
      "// leading comment\n{\n  \"a\": 1, /* inline */\n  \"b\": [true, null] // trailing\n}\n",
      "c.json");
  EXPECT_EQ(j.at("a").get<int>(), 1);
  EXPECT_TRUE(j.at("b").at(0).get<bool>());
  EXPECT_TRUE(j.at("b").at(1).is_null());
}

TEST(JsonStrictParse, RejectsDuplicateKeyAtTopLevel) {
  const auto e = catch_input_error([] { parse_json(R"({"hidden": 1, "hidden": 2})", "d.json"); });
  EXPECT_NE(e.what.find("d.json"), std::string::npos) << e.what;
  EXPECT_NE(e.what.find("duplicate key \"hidden\""), std::string::npos) << e.what;
}

TEST(JsonStrictParse, RejectsDuplicateKeyNestedInObjectAndArray) {
  const auto e1 = catch_input_error(
      [] { parse_json(R"({"moe": {"top_k": 1, "num_experts": 8, "top_k": 2}})", "n.json"); });
  EXPECT_NE(e1.what.find("duplicate key \"top_k\""), std::string::npos) << e1.what;
  const auto e2 = catch_input_error(
      [] { parse_json(R"({"stages": [{"layers": 1}, {"layers": 2, "layers": 3}]})", "n.json"); });
  EXPECT_NE(e2.what.find("duplicate key \"layers\""), std::string::npos) << e2.what;
}

TEST(JsonStrictParse, LongKeysAreCutInMessages) {
  // Issue 9: a hostile key of any length still gives a short message, cut
  // on a UTF-8 boundary (here after 63 'k's, before a two-byte 'é').
  const std::string key = std::string(63, 'k') + "\xc3\xa9" + std::string(100000, 'k');
  const Caught dup =
      catch_input_error([&] { parse_json("{\"" + key + "\": 1, \"" + key + "\": 2}", "t.json"); });
  EXPECT_LT(dup.what.size(), 400u) << dup.what;
  EXPECT_NE(dup.what.find(std::string(63, 'k') + "...(100065 bytes)"), std::string::npos)
      << dup.what;
  const Json doc = parse_json("{\"" + key + "\": 1}", "t.json");
  ObjectReader r(doc, "t.json", "");
  const Caught unknown = catch_input_error([&] { r.finish(); });
  EXPECT_LT(unknown.what.size(), 400u) << unknown.what;
  EXPECT_NE(unknown.what.find("unknown field"), std::string::npos) << unknown.what;
}

TEST(JsonStrictParse, BinaryBytesAreQuotedInParseErrors) {
  const Caught c = catch_input_error([] { parse_json("\xff\xfe\x01", "bin.json"); });
  EXPECT_NE(c.what.find("\\xff"), std::string::npos) << c.what;
  for (const char ch : c.what) EXPECT_LT(static_cast<unsigned char>(ch), 0x80) << c.what;
}

TEST(JsonStrictParse, SameKeyInSiblingObjectsIsNotADuplicate) {
  const Json j = parse_json(R"({"a": {"x": 1}, "b": {"x": 2}, "c": [{"x": 3}, {"x": 4}]})", "s");
  EXPECT_EQ(j.at("b").at("x").get<int>(), 2);
  EXPECT_EQ(j.at("c").at(1).at("x").get<int>(), 4);
}

TEST(JsonStrictParse, InvalidJsonNamesLineAndColumn) {
  const auto e =
      catch_input_error([] { parse_json("{\n  \"a\": 1,\n  \"b\": ,\n}\n", "bad.json"); });
  EXPECT_EQ(e.where, "bad.json:3:8") << e.what;
  EXPECT_NE(e.what.find("invalid JSON"), std::string::npos) << e.what;
  EXPECT_EQ(e.what.find("[json.exception"), std::string::npos) << e.what;
}

TEST(JsonStrictParse, RejectsNanAndInfinityLiterals) {
  for (const char* text : {R"({"x": NaN})", R"({"x": Infinity})", R"({"x": -Infinity})"}) {
    const auto e = catch_input_error([&] { parse_json(text, "nan.json"); });
    EXPECT_NE(e.what.find("invalid JSON"), std::string::npos) << text << ": " << e.what;
    EXPECT_NE(e.where.find("nan.json:1:"), std::string::npos) << e.where;
  }
}

TEST(JsonStrictParse, RejectsTrailingCommaAndEmptyText) {
  EXPECT_THROW(parse_json(R"({"a": 1,})", "t"), InputError);
  EXPECT_THROW(parse_json("", "t"), InputError);
  EXPECT_THROW(parse_json(R"({"a": 1} x)", "t"), InputError);
}

TEST(JsonStrictParse, NestingLimit) {
  EXPECT_NO_THROW(parse_json(nested_arrays(64), "deep.json"));
  const auto e = catch_input_error([] { parse_json(nested_arrays(100), "deep.json"); });
  EXPECT_NE(e.what.find("deeper than 64"), std::string::npos) << e.what;
  // Deep objects too.
  std::string objects;
  for (int i = 0; i < 80; ++i) objects += "{\"k\":";
  objects += "1";
  for (int i = 0; i < 80; ++i) objects += "}";
  EXPECT_THROW(parse_json(objects, "deep.json"), InputError);
}

TEST(JsonStrictParse, NestingLimitIsTheCallbackParsers) {
  // Issue 21: the SAX reader keeps the rule of the callback parser it
  // replaced: a value inside more than 64 open containers is refused.
  EXPECT_NO_THROW(parse_json(nested_arrays(65), "deep.json"));
  EXPECT_THROW(parse_json(nested_arrays(66), "deep.json"), InputError);
  EXPECT_NO_THROW(parse_json(std::string(64, '[') + "1" + std::string(64, ']'), "deep.json"));
  EXPECT_THROW(parse_json(std::string(65, '[') + "1" + std::string(65, ']'), "deep.json"),
               InputError);
}

TEST(JsonStrictParse, SameDocumentAsNlohmann) {
  const std::string text = R"({"a": [1, -2, 18446744073709551615, 2.5e-3, "s\u00e9", true, null,
    {"b": {}, "c": []}], "d": {"e": [[], [{}], {"f": "g"}]}, "h": -0.0, "i": 1e-400})";
  EXPECT_EQ(parse_json(text, "same.json"), Json::parse(text));
  std::string many = "[";
  for (int i = 0; i < 1000; ++i) many += (i ? ",{\"k\":" : "{\"k\":") + std::to_string(i) + "}";
  many += "]";
  EXPECT_EQ(parse_json(many, "many.json"), Json::parse(many));
  EXPECT_EQ(parse_json("\"x\"", "scalar.json"), Json("x"));
}

TEST(JsonStrictParse, NumberOverflowNamesTheField) {
  // Issue 21: 1e400 said only "number overflow"; the reader knows the key.
  Caught c = catch_input_error([] { parse_json(R"({"hidden_size": 1e400})", "o.json"); });
  EXPECT_EQ(c.where, "o.json:/hidden_size") << c.what;
  EXPECT_NE(c.what.find("number 1e400 is out of range"), std::string::npos) << c.what;
  c = catch_input_error([] { parse_json(R"({"a": [1, {"b": 2, "c/d": -1e999}]})", "o.json"); });
  EXPECT_EQ(c.where, "o.json:/a/1/c~1d") << c.what;
  EXPECT_NE(c.what.find("-1e999"), std::string::npos) << c.what;
  c = catch_input_error([] { parse_json("[1, 2, 1e400]", "o.json"); });
  EXPECT_EQ(c.where, "o.json:/2") << c.what;
  c = catch_input_error([] { parse_json("1e400", "o.json"); });
  EXPECT_EQ(c.where, "o.json") << c.what;
  // A number of 100,000 digits is echoed cut.
  c = catch_input_error([] { parse_json("{\"x\": 1" + std::string(100000, '0') + "}", "o.json"); });
  EXPECT_EQ(c.where, "o.json:/x") << c.what;
  EXPECT_LT(c.what.size(), 200u) << c.what;
  EXPECT_NE(c.what.find("(100001 bytes)"), std::string::npos) << c.what;
}

TEST(JsonStrictParse, TextOverTheSizeLimitIsRefused) {
  const std::string at_limit = "[" + std::string(kMaxJsonBytes - 2, ' ') + "]";
  const std::string text = at_limit + " ";
  const Caught c = catch_input_error([&] { parse_json(text, "big.json"); });
  EXPECT_EQ(c.where, "big.json");
  EXPECT_NE(c.what.find(std::to_string(text.size()) + " bytes"), std::string::npos) << c.what;
  EXPECT_NE(c.what.find("16 MiB"), std::string::npos) << c.what;
  EXPECT_EQ(c.what.find('\n'), std::string::npos) << c.what;
  EXPECT_NO_THROW(parse_json(at_limit, "big.json"));  // at the limit: read
}

TEST(JsonStrictParse, LongTokensInParseErrorsAreCut) {
  // An unterminated 1 MB string: nlohmann quotes all of it ("last read").
  const Caught c =
      catch_input_error([] { parse_json("{\"name\": \"" + std::string(1 << 20, 'x'), "u.json"); });
  EXPECT_NE(c.what.find("invalid JSON"), std::string::npos) << c.what;
  EXPECT_LT(c.what.size(), 300u) << c.what;
  EXPECT_NE(c.what.find("...(" + std::to_string((1 << 20) + 1) + " bytes)"), std::string::npos)
      << c.what;
}

// ---------------------------------------------------------------------------
// checked_int / checked_number

TEST(JsonStrictCheckedInt, AcceptsIntegersInRangeInclusive) {
  EXPECT_EQ(checked_int(Json(5), 5, 10, "w"), 5);
  EXPECT_EQ(checked_int(Json(10), 5, 10, "w"), 10);
  EXPECT_EQ(checked_int(Json(-3), -5, 0, "w"), -3);
  EXPECT_EQ(checked_int(Json::parse("9007199254740991"), 0,
                        std::numeric_limits<std::int64_t>::max(), "w"),
            9007199254740991LL);
}

TEST(JsonStrictCheckedInt, AcceptsIntegralFloats) {
  // 1e3 is a float in nlohmann/json, but integral: accepted as 1000.
  EXPECT_EQ(checked_int(Json::parse("1e3"), 0, 5000, "w"), 1000);
  EXPECT_EQ(checked_int(Json::parse("2048.0"), 0, 5000, "w"), 2048);
}

TEST(JsonStrictCheckedInt, RejectsFractionsBoolsStringsNullAndContainers) {
  for (const char* text : {"32.7", "true", "false", "\"24\"", "null", "[1]", "{}", "1e20"}) {
    const auto e = catch_input_error([&] { checked_int(Json::parse(text), 0, 100, "f:/x"); });
    EXPECT_EQ(e.where, "f:/x");
    EXPECT_NE(e.what.find("must be an integer"), std::string::npos) << text << ": " << e.what;
    EXPECT_NE(e.what.find(Json::parse(text).dump()), std::string::npos) << e.what;
    EXPECT_NE(e.what.find("[0, 100]"), std::string::npos) << e.what;
  }
}

TEST(JsonStrictCheckedInt, RejectsOutOfRange) {
  const auto e = catch_input_error([] { checked_int(Json(-3), 1, 100, "f:/ffn"); });
  EXPECT_NE(e.what.find("-3"), std::string::npos) << e.what;
  EXPECT_NE(e.what.find("out of range"), std::string::npos) << e.what;
  EXPECT_THROW(checked_int(Json(101), 1, 100, "w"), InputError);
  EXPECT_THROW(checked_int(Json(0), 1, 100, "w"), InputError);
  // Larger than int64: stored as unsigned by nlohmann/json.
  EXPECT_THROW(checked_int(Json::parse("18446744073709551615"), 0,
                           std::numeric_limits<std::int64_t>::max(), "w"),
               InputError);
  EXPECT_THROW(checked_int(Json::parse("1000.0"), 0, 999, "w"), InputError);
}

TEST(JsonStrictCheckedNumber, AcceptsNumbersInRange) {
  EXPECT_DOUBLE_EQ(checked_number(Json(1.2), 1.0, 1000.0, "w"), 1.2);
  EXPECT_DOUBLE_EQ(checked_number(Json(3), 0.0, 10.0, "w"), 3.0);
  EXPECT_DOUBLE_EQ(checked_number(Json(0.0), 0.0, 1.0, "w"), 0.0);
  EXPECT_DOUBLE_EQ(checked_number(Json(1.0), 0.0, 1.0, "w"), 1.0);
}

TEST(JsonStrictCheckedNumber, RejectsTextNanBoolsAndOutOfRange) {
  for (const char* text : {"\"NaN\"", "\"Infinity\"", "\"1.5\"", "true", "null"}) {
    const auto e = catch_input_error([&] { checked_number(Json::parse(text), 0.0, 1.0, "f:/g"); });
    EXPECT_NE(e.what.find("must be a number"), std::string::npos) << text << ": " << e.what;
    EXPECT_NE(e.what.find(Json::parse(text).dump()), std::string::npos) << e.what;
  }
  const auto e = catch_input_error([] { checked_number(Json(1.5), 0.0, 1.0, "f:/gamma"); });
  EXPECT_NE(e.what.find("1.5"), std::string::npos) << e.what;
  EXPECT_NE(e.what.find("out of range"), std::string::npos) << e.what;
  // A NaN stored in a json value (not parseable from text) is rejected too.
  EXPECT_THROW(checked_number(Json(std::numeric_limits<double>::quiet_NaN()), 0.0, 1.0, "w"),
               InputError);
  EXPECT_THROW(checked_number(Json(std::numeric_limits<double>::infinity()), 0.0, 1e300, "w"),
               InputError);
}

// ---------------------------------------------------------------------------
// ObjectReader

TEST(JsonStrictObjectReader, ReadsTypedFieldsAndDefaults) {
  const Json j = parse_json(
      R"({"n": 4, "x": 0.5, "b": true, "s": "hi", "c": "GELU", "nil": null, "arr": [1]})", "o");
  ObjectReader r(j, "o.json", "");
  EXPECT_EQ(r.get_int("n", 1, 10), 4);
  EXPECT_DOUBLE_EQ(r.get_number("x", 0.0, 1.0), 0.5);
  EXPECT_TRUE(r.get_bool("b"));
  EXPECT_EQ(r.get_string("s"), "hi");
  EXPECT_EQ(r.get_choice("c", {"swiglu", "gelu"}), "gelu");  // canonical spelling returned
  EXPECT_EQ(r.opt_int("nil", 0, 1), std::nullopt);           // null counts as absent
  EXPECT_EQ(r.opt_int("absent", 0, 1), std::nullopt);
  EXPECT_EQ(r.opt_bool("absent2"), std::nullopt);
  EXPECT_EQ(r.get_raw("arr").size(), 1u);
  EXPECT_NO_THROW(r.finish());
}

TEST(JsonStrictObjectReader, FinishRejectsUnknownKeyWithPointer) {
  const Json j = parse_json(R"({"moe": {"num_experts": 8, "topk": 2}})", "m");
  ObjectReader root(j, "m.json", "");
  ObjectReader moe(root.get_raw("moe"), "m.json", root.pointer("moe"));
  EXPECT_EQ(moe.get_int("num_experts", 1, 64), 8);
  EXPECT_NO_THROW(root.finish());
  const auto e = catch_input_error([&] { moe.finish(); });
  EXPECT_EQ(e.where, "m.json:/moe/topk");
  EXPECT_NE(e.what.find("unknown field"), std::string::npos) << e.what;
}

TEST(JsonStrictObjectReader, IgnoreAndIgnoreAll) {
  const Json j = parse_json(R"({"a": 1, "b": 2, "c": 3})", "i");
  ObjectReader r1(j, "i.json", "");
  r1.ignore({"a", "b"});
  EXPECT_THROW(r1.finish(), InputError);  // "c" is still unknown
  r1.ignore({"c"});
  EXPECT_NO_THROW(r1.finish());
  ObjectReader r2(j, "i.json", "");
  r2.ignore_all();
  EXPECT_NO_THROW(r2.finish());
}

TEST(JsonStrictObjectReader, ErrorsNameFileAndPointerAndValue) {
  const Json j = parse_json(
      R"({"str": "24", "frac": 32.7, "neg": -3, "flag": true, "name": 5, "b": 1, "ch": "relu"})",
      "e");
  ObjectReader r(j, "e.json", "/training");
  auto e = catch_input_error([&] { r.get_int("str", 1, 100); });
  EXPECT_EQ(e.where, "e.json:/training/str");
  EXPECT_NE(e.what.find("\"24\""), std::string::npos) << e.what;
  e = catch_input_error([&] { r.get_int("frac", 1, 100); });
  EXPECT_NE(e.what.find("32.7"), std::string::npos) << e.what;
  e = catch_input_error([&] { r.get_int("neg", 1, 100); });
  EXPECT_NE(e.what.find("-3"), std::string::npos) << e.what;
  e = catch_input_error([&] { r.get_int("flag", 0, 100); });
  EXPECT_NE(e.what.find("true"), std::string::npos) << e.what;
  e = catch_input_error([&] { r.get_string("name"); });
  EXPECT_NE(e.what.find("must be a string"), std::string::npos) << e.what;
  e = catch_input_error([&] { r.get_bool("b"); });
  EXPECT_NE(e.what.find("true or false"), std::string::npos) << e.what;
  e = catch_input_error([&] { r.get_choice("ch", {"swiglu", "gelu"}); });
  EXPECT_EQ(e.where, "e.json:/training/ch");
  EXPECT_NE(e.what.find("relu"), std::string::npos) << e.what;
  EXPECT_NE(e.what.find("swiglu, gelu"), std::string::npos) << e.what;
  e = catch_input_error([&] { r.get_int("missing", 1, 2); });
  EXPECT_EQ(e.where, "e.json:/training/missing");
  EXPECT_NE(e.what.find("required field is missing"), std::string::npos) << e.what;
}

TEST(JsonStrictObjectReader, RejectsNonObjectsAndEscapesPointers) {
  const Json arr = Json::array({1, 2});
  const auto e = catch_input_error([&] { ObjectReader r(arr, "a.json", ""); });
  EXPECT_EQ(e.where, "a.json:/");
  EXPECT_NE(e.what.find("must be a JSON object"), std::string::npos) << e.what;
  const Json obj = Json::object();
  ObjectReader r(obj, "a.json", "/x");
  EXPECT_EQ(r.pointer("a/b~c"), "/x/a~1b~0c");
}

// ---------------------------------------------------------------------------
// Command-line text

TEST(JsonStrictText, ParseIntText) {
  EXPECT_EQ(parse_int_text("4096", 1, 1 << 22, "--seq-len"), 4096);
  EXPECT_EQ(parse_int_text("-7", -10, 10, "--x"), -7);
  for (const char* bad : {"", "12x", "1.0", "1e3", "abc", "99999999999999999999", "nan"}) {
    const auto e = catch_input_error([&] { parse_int_text(bad, 1, 1 << 22, "--seq-len"); });
    EXPECT_EQ(e.where, "--seq-len") << bad;
    EXPECT_NE(e.what.find("expected an integer"), std::string::npos) << bad << ": " << e.what;
  }
  const auto e = catch_input_error([] { parse_int_text("0", 1, 100, "--global-batch"); });
  EXPECT_EQ(e.where, "--global-batch");
  EXPECT_NE(e.what.find("out of range"), std::string::npos) << e.what;
  EXPECT_NE(e.what.find("[1, 100]"), std::string::npos) << e.what;
}

TEST(JsonStrictText, ParseNumberText) {
  EXPECT_DOUBLE_EQ(parse_number_text("1.25", 1.0, 1000.0, "--imbalance"), 1.25);
  EXPECT_DOUBLE_EQ(parse_number_text("1e2", 1.0, 1000.0, "--imbalance"), 100.0);
  for (const char* bad : {"", "1.5x", "nan", "NaN", "inf", "-inf", "Infinity", "1e999", "x"}) {
    const auto e = catch_input_error([&] { parse_number_text(bad, 0.0, 1.0, "--gamma"); });
    EXPECT_EQ(e.where, "--gamma") << bad;
    EXPECT_NE(e.what.find("finite number"), std::string::npos) << bad << ": " << e.what;
  }
  const auto e = catch_input_error([] { parse_number_text("1.5", 0.0, 1.0, "--gamma"); });
  EXPECT_NE(e.what.find("out of range"), std::string::npos) << e.what;
}

TEST(JsonStrictText, ToLowerAndDescribe) {
  EXPECT_EQ(to_lower("Mixtral-S_BF16"), "mixtral-s_bf16");
  EXPECT_EQ(describe(Json("x")), "\"x\"");
  EXPECT_EQ(describe(Json(3)), "3");
  const std::string longer = describe(Json(std::string(200, 'a')));
  EXPECT_EQ(longer.size(), 60u);
  EXPECT_EQ(longer.substr(57), "...");
}

}  // namespace
}  // namespace hapmoe

namespace hapmoe {
namespace {

TEST(JsonStrictText, EchoValueCutsAndSaysTheLength) {
  EXPECT_EQ(echo_value("H800:8"), "H800:8");
  EXPECT_EQ(echo_value("a\x01\xff"), "a\\x01\\xff");
  const std::string cut = echo_value(std::string(70119, 'x'));
  EXPECT_EQ(cut, std::string(64, 'x') + "...(70119 bytes)");
  EXPECT_EQ(echo_value(std::string(10, 'y'), 4), "yyyy...(10 bytes)");
  // An escape is not split.
  EXPECT_EQ(echo_value("abc\xff\xff", 5), "abc...(5 bytes)");
}

TEST(JsonStrictText, LongOptionTextIsCut) {
  // Issue 21, item 12: the text of an option is echoed cut.
  const std::string text = std::string(100000, '7');
  for (const auto& f : std::initializer_list<std::function<void()>>{
           [&] { parse_int_text(text, 0, 100, "--x"); },
           [&] { parse_int_text(text + "z", 0, 100, "--x"); },
           [&] { parse_number_text(text, 0, 100, "--x"); },
           [&] { parse_number_text(text + "z", 0, 100, "--x"); }}) {
    const Caught c = catch_input_error(f);
    EXPECT_LT(c.what.size(), 200u) << c.what;
    EXPECT_NE(c.what.find("bytes)"), std::string::npos) << c.what;
  }
}

TEST(JsonStrictText, RejectsBlanksPlusAndHex) {
  EXPECT_THROW(parse_int_text(" 12", 0, 100, "--x"), InputError);
  EXPECT_THROW(parse_int_text("+12", 0, 100, "--x"), InputError);
  EXPECT_THROW(parse_int_text("0x10", 0, 100, "--x"), InputError);
  EXPECT_EQ(parse_int_text("-3", -5, 100, "--x"), -3);
  EXPECT_THROW(parse_number_text("0x1p3", 0, 100, "--x"), InputError);
  EXPECT_THROW(parse_number_text(" 1.5", 0, 100, "--x"), InputError);
  EXPECT_DOUBLE_EQ(parse_number_text(".5", 0, 1, "--x"), 0.5);
  EXPECT_DOUBLE_EQ(parse_number_text("1e-3", 0, 1, "--x"), 1e-3);
}

}  // namespace
}  // namespace hapmoe
