// Tool definitions in the harmony prompt (gpt-oss): render_harmony against
// OpenAI's Hugging Face chat template for openai/gpt-oss-20b/120b
// (chat_template.jinja; the same file, byte for byte, as llama.cpp's
// models/templates/openai-gpt-oss-120b.jinja, sha256 a4c9919c…c8146).
//
// Every expected string below is the output of that template, rendered with
// jinja2 3.1.6 the way transformers' apply_chat_template renders it
// (ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, tojson =
// json.dumps(ensure_ascii=False), strftime_now giving 2025-06-28), for the
// same conversation and the tools as {"type": "function", "function": {...}}
// objects; tool-call arguments were passed as a dict. The strings were copied
// from jinja2's output, not from Tern's. The template's odd spacing ("a: \n
// " + 16 spaces in nested objects, "// default:" after 20 spaces in oneOf) is
// its own.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tern/core/error.h"
#include "tern/runtime/chat_format.h"
#include "tern/runtime/harmony.h"

namespace tern {

namespace {

ChatFormatOptions harmony_tools_on_date(std::vector<ToolDefinition> tools) {
  ChatFormatOptions o;
  o.date = "2025-06-28";
  o.tools = std::move(tools);
  return o;
}

// The system message with tools: one more line after the channels line.
const std::string kToolsSystem =
    "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
    "Knowledge cutoff: 2024-06\n"
    "Current date: 2025-06-28\n"
    "\n"
    "Reasoning: medium\n"
    "\n"
    "# Valid channels: analysis, commentary, final. Channel must be included for every message.\n"
    "Calls to these tools must go to the commentary channel: 'functions'.<|end|>";

// Parameters in the client's key order (not alphabetical: the order is kept).
ToolDefinition harmony_weather_tool() {
  return {"get_weather", "Get the current weather",
          R"({"type": "object", "properties": {"city": {"type": "string", "description": "The city, e.g. Paris"},)"
          R"( "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},)"
          R"( "days": {"type": "integer", "description": "Forecast days", "default": 1},)"
          R"( "hourly": {"type": "boolean"}}, "required": ["city"]})"};
}

const std::string kWeatherType =
    "// Get the current weather\n"
    "type get_weather = (_: {\n"
    "// The city, e.g. Paris\n"
    "city: string,\n"
    "unit?: \"celsius\" | \"fahrenheit\", // default: celsius,\n"
    "// Forecast days\n"
    "days?: number, // default: 1,\n"
    "hourly?: boolean,\n"
    "}) => any;\n"
    "\n";

const std::string kNamespaceOpen =
    "# Tools\n"
    "\n"
    "## functions\n"
    "\n"
    "namespace functions {\n"
    "\n";
const std::string kNamespaceClose = "} // namespace functions<|end|>";
const std::string kUserTurn = "<|start|>user<|message|>Weather in Paris?<|end|><|start|>assistant";

TEST(HarmonyTools, OneToolWithoutSystemMessage) {
  // No system/developer message: the developer message holds only the tools.
  EXPECT_EQ(render_harmony({{"user", "Weather in Paris?"}}, harmony_tools_on_date({harmony_weather_tool()})),
            kToolsSystem + "<|start|>developer<|message|>" + kNamespaceOpen + kWeatherType + kNamespaceClose +
                kUserTurn);
  // An empty system message is no instructions, as in the template.
  EXPECT_EQ(render_harmony({{"system", ""}, {"user", "Weather in Paris?"}}, harmony_tools_on_date({harmony_weather_tool()})),
            render_harmony({{"user", "Weather in Paris?"}}, harmony_tools_on_date({harmony_weather_tool()})));
}

TEST(HarmonyTools, OneToolWithSystemMessage) {
  const std::string expected =
      "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
      "Knowledge cutoff: 2024-06\n"
      "Current date: 2025-06-28\n"
      "\n"
      "Reasoning: medium\n"
      "\n"
      "# Valid channels: analysis, commentary, final. Channel must be included for every message.\n"
      "Calls to these tools must go to the commentary channel: 'functions'.<|end|><|start|>developer<|message|># "
      "Instructions\n"
      "\n"
      "Be brief.\n"
      "\n"
      "# Tools\n"
      "\n"
      "## functions\n"
      "\n"
      "namespace functions {\n"
      "\n"
      "// Get the current weather\n"
      "type get_weather = (_: {\n"
      "// The city, e.g. Paris\n"
      "city: string,\n"
      "unit?: \"celsius\" | \"fahrenheit\", // default: celsius,\n"
      "// Forecast days\n"
      "days?: number, // default: 1,\n"
      "hourly?: boolean,\n"
      "}) => any;\n"
      "\n"
      "} // namespace functions<|end|><|start|>user<|message|>Weather in Paris?<|end|><|start|>assistant";
  EXPECT_EQ(render_harmony({{"system", "Be brief."}, {"user", "Weather in Paris?"}}, harmony_tools_on_date({harmony_weather_tool()})),
            expected);
}

TEST(HarmonyTools, TwoToolsArraysEnumsNestedObjectsAndUnions) {
  const ToolDefinition search{
      "search", "Search the web",
      R"({"type": "object", "properties": {"query": {"type": "string"},)"
      R"( "sites": {"type": "array", "items": {"type": "string"}, "description": "Sites to search"},)"
      R"( "scores": {"type": "array", "items": {"type": "number"}, "nullable": true},)"
      R"( "filters": {"type": "object", "properties": {"max": {"type": "integer"}, "lang": {"type": "string"}},)"
      R"( "required": ["lang"]}, "limit": {"type": "number", "default": 2.5},)"
      R"( "note": {"type": "string", "nullable": true}, "tag": {"type": ["string", "null"]},)"
      R"( "id": {"oneOf": [{"type": "string", "description": "by name"}, {"type": "integer", "default": 0}]},)"
      R"( "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},)"
      R"( "rows": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}}},)"
      R"( "pairs": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},)"
      R"( "free": {}}, "required": ["query", "filters"]})"};
  const std::string search_type =
      "// Search the web\n"
      "type search = (_: {\n"
      "query: string,\n"
      "// Sites to search\n"
      "sites?: string[],\n"
      "scores?: number[] | null,\n"
      "filters: {\n"
      "max?: \n"
      "                number, lang: \n"
      "                string},\n"
      "limit?: number, // default: 2.5,\n"
      "note?: string | null,\n"
      "tag?: string | null,\n"
      "id?: string// by name | \n"
      "number                    // default: 0,\n"
      "either?: any,\n"
      "rows?: {\n"
      "k?: \n"
      "                string}[],\n"
      "pairs?: number[][],\n"
      "free?: any,\n"
      "}) => any;\n"
      "\n";
  // A developer message is the instructions as a system message is.
  EXPECT_EQ(render_harmony({{"developer", "Be brief."}, {"user", "Weather in Paris?"}},
                           harmony_tools_on_date({harmony_weather_tool(), search})),
            kToolsSystem + "<|start|>developer<|message|># Instructions\n\nBe brief.\n\n" + kNamespaceOpen +
                kWeatherType + search_type + kNamespaceClose + kUserTurn);
}

TEST(HarmonyTools, ToolsWithoutParameters) {
  // No parameters at all, and an object without properties.
  EXPECT_EQ(render_harmony({{"user", "Weather in Paris?"}},
                           harmony_tools_on_date({{"get_time", "Current time"},
                                          {"ping", "Ping", R"({"type": "object", "properties": {}})"}})),
            kToolsSystem + "<|start|>developer<|message|>" + kNamespaceOpen +
                "// Current time\n"
                "type get_time = () => any;\n"
                "\n"
                "// Ping\n"
                "type ping = () => any;\n"
                "\n" +
                kNamespaceClose + kUserTurn);
}

TEST(HarmonyTools, ToolCallArgumentsAsTheTemplatesTojsonWritesThem) {
  // The client's compact arguments come out as json.dumps writes the object.
  ChatMessage call{"assistant", "", "Need the weather.", {{"get_weather", R"({"city":"Paris","days":2,"hourly":false})"}}};
  EXPECT_EQ(render_harmony({{"user", "Weather in Paris?"}, call, {"tool", "{\"temp\": 20}"}},
                           harmony_tools_on_date({harmony_weather_tool()})),
            kToolsSystem + "<|start|>developer<|message|>" + kNamespaceOpen + kWeatherType + kNamespaceClose +
                "<|start|>user<|message|>Weather in Paris?<|end|>"
                "<|start|>assistant<|channel|>analysis<|message|>Need the weather.<|end|>"
                "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>"
                "{\"city\": \"Paris\", \"days\": 2, \"hourly\": false}<|call|>"
                "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>"
                "\"{\\\"temp\\\": 20}\"<|end|><|start|>assistant");
  // Arguments that are not JSON are written as they are.
  ChatMessage odd{"assistant", "", "", {{"f", "not json"}}};
  EXPECT_NE(render_harmony({{"user", "x"}, odd}).find("<|channel|>commentary json<|message|>not json<|call|>"),
            std::string::npos);
}

TEST(HarmonyTools, NoToolsLeavesThePromptAsItWas) {
  ChatFormatOptions o;
  o.date = "2025-06-28";
  const std::string s = render_harmony({{"user", "hi"}}, o);
  EXPECT_EQ(s.find("Calls to these tools"), std::string::npos);
  EXPECT_EQ(s.find("<|start|>developer"), std::string::npos);
}

TEST(HarmonyTools, InvalidParametersAreAnError) {
  EXPECT_THROW(render_harmony({{"user", "x"}}, harmony_tools_on_date({{"f", "d", "{not json"}})), Error);
}

}  // namespace

}  // namespace tern
