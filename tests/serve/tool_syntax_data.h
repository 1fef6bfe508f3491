// Test data for test_tool_syntax, kept out of the file moc reads.
#pragma once

// One function whose arguments use every kind of value the XML syntaxes write.
static const char* const kTools = R"([
 {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
   "properties": {"city": {"type": "string", "maxLength": 12}, "days": {"type": "integer", "minimum": 1, "maximum": 14},
                  "unit": {"enum": ["celsius", "fahrenheit"]}, "hourly": {"type": "boolean"},
                  "spots": {"type": "array", "items": {"type": "number"}, "maxItems": 2},
                  "when": {"type": "string", "format": "date"}},
   "required": ["city", "days"]}}},
 {"type": "function", "function": {"name": "note", "parameters": {"type": "object",
   "properties": {"text": {"type": "string", "maxLength": 20}}, "required": ["text"]}}}
])";

// An assistant turn with a call, for the real templates to render.
static const char* const kCallArguments = R"({"city": "Paris", "days": 3, "unit": "celsius", "hourly": true, "spots": [1.5, 2]})";

// DeepSeek V3.2's DSML: string="true" keeps the text (even one that spells a number), "false" is JSON.
static const char* const kDsmlReply =
    "Checking.\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
    "<｜DSML｜parameter name=\"city\" string=\"true\">1984</｜DSML｜parameter>\n"
    "<｜DSML｜parameter name=\"days\" string=\"false\">2</｜DSML｜parameter>\n"
    "<｜DSML｜parameter name=\"spots\" string=\"false\">[1, 2.5]</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
    "<｜DSML｜invoke name=\"note\">\n<｜DSML｜parameter name=\"text\" string=\"true\">a \"quoted\" line</｜DSML｜parameter>\n"
    "</｜DSML｜invoke>\n</｜DSML｜function_calls>";
// Kimi-K2: ids "functions.NAME:INDEX".
static const char* const kKimiReply =
    "Let me check.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
    "{\"city\": \"Oslo\", \"days\": 2}<|tool_call_end|><|tool_call_begin|>functions.note:1<|tool_call_argument_begin|>"
    "{\"text\": \"x\"}<|tool_call_end|><|tool_calls_section_end|>";

static const char* const kQwenXmlReply =
    "I'll look.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nSan Jose\n</parameter>\n"
    "<parameter=days>\n12\n</parameter>\n<parameter=hourly>\nTrue\n</parameter>\n<parameter=spots>\n[1, 2.5]\n</parameter>\n"
    "</function>\n</tool_call>\n<tool_call>\n<function=note>\n<parameter=text>\n42\n</parameter>\n</function>\n</tool_call>";
static const char* const kGlmReply =
    "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>San Jose</arg_value>\n<arg_key>days</arg_key>\n"
    "<arg_value>12</arg_value>\n<arg_key>hourly</arg_key>\n<arg_value>true</arg_value>\n</tool_call>";
static const char* const kMiniMaxReply =
    "Checking.\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">San Jose</parameter>\n"
    "<parameter name=\"days\">12</parameter>\n</invoke>\n<invoke name=\"note\">\n<parameter name=\"text\">42</parameter>\n"
    "</invoke>\n</minimax:tool_call>";
static const char* const kHarmonyReply =
    "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary json"
    "<|message|>{\"city\": \"Oslo\", \"days\": 2}";
static const char* const kHarmonyReply2 =
    "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather "
    "<|constrain|>json<|message|>{\"city\": \"Oslo\", \"days\": 2}<|call|>";
