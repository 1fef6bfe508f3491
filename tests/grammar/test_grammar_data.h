// Test data with quotes and braces, kept out of the file moc reads (Qt 6.4's
// moc misreads some raw string literals).
#pragma once

static const char* const kRaw[] = {
    R"(root ::= "ab" [0-9]+ ("x" | "yz")? [^"\\]{2,3} .
)",
    R"({"type":"object","properties":{"name":{"type":"string"},"n":{"type":"integer"},"tags":{"type":"array","items":{"enum":["a","b"]}}},"required":["name"]})",
    R"({"type":"array","items":{"type":"string"}})",
    R"({"type":"object","properties":{"city":{"type":"string","maxLength":12},"days":{"type":"integer","minimum":1,"maximum":14},"unit":{"enum":["celsius","fahrenheit"]},"detail":{"type":"boolean"}},"required":["city","days"],"additionalProperties":false})",
    R"({"type":"object","properties":{"a":{"type":"null"},"b":{"type":"number"},"c":{"const":{"k":[1,2]}}}})",
    R"({"type":"array","items":{"type":"array","items":{"type":"integer","exclusiveMinimum":-5,"exclusiveMaximum":120},"minItems":1,"maxItems":3},"minItems":2})",
    R"({"type":"array","prefixItems":[{"type":"string","minLength":2,"maxLength":4},{"type":["integer","null"]},{"format":"date"}],"items":false})",
    R"({"anyOf":[{"type":"string","format":"uuid"},{"type":"object","properties":{"id":{"type":"integer","minimum":-1234567,"maximum":-12}},"required":["id"]}]})",
    R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer","minimum":0,"maximum":9},"kids":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["v"]}},"$ref":"#/$defs/node"})",
    R"({"type":"object","properties":{"x":{"type":"integer"}},"required":["x"],"additionalProperties":{"type":"string","format":"date-time"}})",
    R"({"allOf":[{"properties":{"a":{"type":"integer"}},"required":["a"]},{"properties":{"b":{"type":"string"}},"required":["b"]}]})",
    R"({})",
    R"({"type":"object"})",
    R"({"type":"string","pattern":"^a+$"})",
    R"({"properties":{"x":{"type":"number","minimum":0.5}}})",
    R"({"type":"array","uniqueItems":true})",
    R"({"type":"string","format":"email"})",
    R"({"$ref":"https://example.com/s.json"})",
    R"({"$ref":"#/$defs/missing"})",
    R"({"type":"frog"})",
    R"({"type":"integer","minimum":5,"maximum":4})",
    R"(false)",
    R"({"type":"object","properties":{"a":{"type":"string"}}})",
};

// Additional properties beside declared ones (a key that is a prefix of another, a non-ASCII key).
static const char* const kExtraKeys =
    R"({"type":"object","properties":{"a":{"type":"integer"},"ab":{"type":"integer"},"é":{"type":"integer"}},"additionalProperties":{"type":"integer"}})";
static const char* const kExtraKeyTexts[][2] = {  // {text, "1" when accepted}
    {R"({"a": 1, "a": 2})", "0"},
    {R"({"a": 1, "ab": 2, "abc": 3})", "1"},
    {R"({"ab": 2, "a": 1})", "0"},
    {R"({"x": 1, "b": 2})", "1"},
    {R"({"a": 1, "é": 2, "é": 3})", "0"},
    {R"({"é": 2, "éé": 3, "": 4})", "1"},
    {R"({"ab": 1, "ab": 2})", "0"},
};

