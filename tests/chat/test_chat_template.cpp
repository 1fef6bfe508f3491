// Chat templates: detection from real tokenizer.chat_template texts, renderings
// checked against llama.cpp's tests/test-chat-template.cpp (same conversation,
// same expected text, less the leading BOS: see chat_template.h) and against the
// templates' own Jinja output, role checks, the prefix property KV-cache reuse
// relies on, stop strings, and the templates stored in the GGUF fixtures.
#include <QtTest>

#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/chat_template.h"
#include "chat/reply_stream.h"
#include "common/error.h"
#include "error_of.h"
#include "gguf/gguf.h"
#include "test_support.h"
#include "tokenizer/vocab.h"

using strata::chat::ChatTemplate;
using strata::chat::Family;
using strata::chat::Message;
using strata::test::error_of;

Q_DECLARE_METATYPE(strata::chat::Family)

namespace {

// ---- tokenizer.chat_template texts ------------------------------------------
// Exactly as stored in the GGUF (tokenizer_config.json's chat_template). Where
// the comment says llama.cpp, the string is the one in llama.cpp's
// tests/test-chat-template.cpp.

// teknium/OpenHermes-2.5-Mistral-7B (llama.cpp)
const char* const kOpenHermes =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' "
    "+ message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt "
    "%}{{ '<|im_start|>assistant\\n' }}{% endif %}";

// Qwen/Qwen2-7B-Instruct
const char* const kQwen2 =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] "
    "!= 'system' %}{{ '<|im_start|>system\n"
    "You are a helpful assistant.<|im_end|>\n"
    "' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n"
    "' + message['content'] + '<|im_end|>' + '\n"
    "'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n"
    "' }}{% endif %}";

// meta-llama/Llama-2-7b-chat-hf
const char* const kLlama2Chat =
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] "
    "%}{% set system_message = messages[0]['content'] %}{% else %}"
    "{% set loop_messages = messages %}{% set system_message = false %}"
    "{% endif %}{% for message in loop_messages %}{% if (message['role'] == "
    "'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles "
    "must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if loop.index0 == 0 and system_message != false %}{% set content = "
    "'<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] "
    "== 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' "
    "' + eos_token }}{% endif %}{% endfor %}";

// TheBloke/FusionNet_34Bx2_MoE-AWQ (llama.cpp): a Llama 2 variant with BOS inside the history
const char* const kFusionNet =
    "{%- for idx in range(0, messages|length) -%}\n"
    "{%- if messages[idx]['role'] == 'user' -%}\n"
    "{%- if idx > 1 -%}\n"
    "{{- bos_token + '[INST] ' + messages[idx]['content'] + ' [/INST]' -}}"
    "\n"
    "{%- else -%}\n"
    "{{- messages[idx]['content'] + ' [/INST]' -}}\n"
    "{%- endif -%}\n"
    "{% elif messages[idx]['role'] == 'system' %}\n"
    "{{- '[INST] <<SYS>>\\n' + messages[idx]['content'] + '\\n<</SYS>>\\n\\n' -}}"
    "\n"
    "{%- elif messages[idx]['role'] == 'assistant' -%}\n"
    "{{- ' '  + messages[idx]['content'] + ' ' + eos_token -}}\n"
    "{% endif %}\n"
    "{% endfor %}";

// bofenghuang/vigogne-2-70b-chat (llama.cpp): a Llama 2 variant that strips contents
const char* const kVigogne =
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{% set loop_messages "
    "= messages[1:] %}{% set system_message = messages[0]['content'] %}"
    "{% elif true == true and not '<<SYS>>' in messages[0]['content'] %}"
    "{% set loop_messages = messages %}{% set system_message = 'Vous êtes Vigogne, "
    "un assistant IA créé par Zaion Lab. Vous suivez extrêmement bien les instructions. "
    "Aidez autant que vous le pouvez.' %}{% else %}{% set loop_messages = messages "
    "%}{% set system_message = false %}{% endif %}{% for message in loop_messages "
    "%}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') "
    "}}{% endif %}{% if loop.index0 == 0 and system_message != false %}"
    "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] "
    "%}{% else %}{% set content = message['content'] %}{% endif %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + content.strip() + ' [/INST]' "
    "}}{% elif message['role'] == 'system' %}{{ '<<SYS>>\\n' + content.strip() "
    "+ '\\n<</SYS>>\\n\\n' }}{% elif message['role'] == 'assistant' %}"
    "{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";

// "Llama-3" (llama.cpp)
const char* const kLlama3LlamaCpp =
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n"
    "\n"
    "'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}"
    "{% endfor %}{{ '<|start_header_id|>assistant<|end_header_id|>\n"
    "\n"
    "' }}";

// meta-llama/Meta-Llama-3-8B-Instruct
const char* const kLlama3Instruct =
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n"
    "\n"
    "'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n"
    "\n"
    "' }}{% endif %}";

// mistralai/Mistral-7B-Instruct-v0.2, the old template without a system prompt (llama.cpp)
const char* const kMistralV02 =
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == "
    "'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles "
    "must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + "
    "' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] "
    "+ eos_token}}{% else %}{{ raise_exception('Only user and assistant roles "
    "are supported!') }}{% endif %}{% endfor %}";

// mistralai 'v1' template with a system prompt (llama.cpp)
const char* const kMistralV1 =
    "{%- if messages[0]['role'] == 'system' %}\n"
    "    {%- set system_message = messages[0]['content'] %}\n"
    "    {%- set loop_messages = messages[1:] %}\n"
    "{%- else %}\n"
    "    {%- set loop_messages = messages %}\n"
    "{%- endif %}\n"
    "\n"
    "{{- bos_token }}\n"
    "{%- for message in loop_messages %}\n"
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "\n"
    "        {{- raise_exception('After the optional system message, conversation "
    "roles must alternate user/assistant/user/assistant/...') }}\n"
    "    {%- endif %}\n"
    "    {%- if message['role'] == 'user' %}\n"
    "        {%- if loop.first and system_message is defined %}\n"
    "            {{- ' [INST] ' + system_message + '\\n\\n' + message['content'] "
    "+ ' [/INST]' }}\n"
    "        {%- else %}\n"
    "            {{- ' [INST] ' + message['content'] + ' [/INST]' }}"
    "\n"
    "        {%- endif %}\n"
    "    {%- elif message['role'] == 'assistant' %}\n"
    "        {{- ' ' + message['content'] + eos_token}}\n"
    "    {%- else %}\n"
    "        {{- raise_exception('Only user and assistant roles are supported, "
    "with the exception of an initial optional system message!') }}"
    "\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n";

// mistralai 'v3' template of Mistral-Large-Instruct-2407 (llama.cpp); Mistral-7B-Instruct-v0.3
// uses the same v3 format
const char* const kMistralV3 =
    "{%- if messages[0][\"role\"] == \"system\" %}\n"
    "    {%- set system_message = messages[0][\"content\"] %}\n"
    "    {%- set loop_messages = messages[1:] %}\n"
    "{%- else %}\n"
    "    {%- set loop_messages = messages %}\n"
    "{%- endif %}\n"
    "{%- if not tools is defined %}\n"
    "    {%- set tools = none %}\n"
    "{%- endif %}\n"
    "{%- set user_messages = loop_messages | selectattr(\"role\", \"equalto\", "
    "\"user\") | list %}\n"
    "\n"
    "{#- This block checks for alternating user/assistant messages, skipping "
    "tool calling messages #}\n"
    "{%- set ns = namespace() %}\n"
    "{%- set ns.index = 0 %}\n"
    "{%- for message in loop_messages %}\n"
    "    {%- if not (message.role == \"tool\" or message.role == \"tool_results\" "
    "or (message.tool_calls is defined and message.tool_calls is not none)) "
    "%}\n"
    "        {%- if (message[\"role\"] == \"user\") != (ns.index % 2 == 0) %}"
    "\n"
    "            {{- raise_exception(\"After the optional system message, conversation "
    "roles must alternate user/assistant/user/assistant/...\") }}\n"
    "        {%- endif %}\n"
    "        {%- set ns.index = ns.index + 1 %}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "\n"
    "{{- bos_token }}\n"
    "{%- for message in loop_messages %}\n"
    "    {%- if message[\"role\"] == \"user\" %}\n"
    "        {%- if tools is not none and (message == user_messages[-1]) %}"
    "\n"
    "            {{- \"[AVAILABLE_TOOLS] [\" }}\n"
    "            {%- for tool in tools %}\n"
    "                {%- set tool = tool.function %}\n"
    "                {{- '{\"type\": \"function\", \"function\": {' }}\n"
    "                {%- for key, val in tool.items() if key != \"return\" %}"
    "\n"
    "                    {%- if val is string %}\n"
    "                        {{- '\"' + key + '\": \"' + val + '\"' }}"
    "\n"
    "                    {%- else %}\n"
    "                        {{- '\"' + key + '\": ' + val|tojson }}"
    "\n"
    "                    {%- endif %}\n"
    "                    {%- if not loop.last %}\n"
    "                        {{- \", \" }}\n"
    "                    {%- endif %}\n"
    "                {%- endfor %}\n"
    "                {{- \"}}\" }}\n"
    "                {%- if not loop.last %}\n"
    "                    {{- \", \" }}\n"
    "                {%- else %}\n"
    "                    {{- \"]\" }}\n"
    "                {%- endif %}\n"
    "            {%- endfor %}\n"
    "            {{- \"[/AVAILABLE_TOOLS]\" }}\n"
    "            {%- endif %}\n"
    "        {%- if loop.last and system_message is defined %}\n"
    "            {{- \"[INST] \" + system_message + \"\\n\\n\" + message[\"content\"] "
    "+ \"[/INST]\" }}\n"
    "        {%- else %}\n"
    "            {{- \"[INST] \" + message[\"content\"] + \"[/INST]\" }}"
    "\n"
    "        {%- endif %}\n"
    "    {%- elif message.tool_calls is defined and message.tool_calls is not "
    "none %}\n"
    "        {{- \"[TOOL_CALLS] [\" }}\n"
    "        {%- for tool_call in message.tool_calls %}\n"
    "            {%- set out = tool_call.function|tojson %}\n"
    "            {{- out[:-1] }}\n"
    "            {%- if not tool_call.id is defined or tool_call.id|length "
    "!= 9 %}\n"
    "                {{- raise_exception(\"Tool call IDs should be alphanumeric "
    "strings with length 9!\") }}\n"
    "            {%- endif %}\n"
    "            {{- ', \"id\": \"' + tool_call.id + '\"}' }}\n"
    "            {%- if not loop.last %}\n"
    "                {{- \", \" }}\n"
    "            {%- else %}\n"
    "                {{- \"]\" + eos_token }}\n"
    "            {%- endif %}\n"
    "        {%- endfor %}\n"
    "    {%- elif message[\"role\"] == \"assistant\" %}\n"
    "        {{- \" \" + message[\"content\"]|trim + eos_token}}\n"
    "    {%- elif message[\"role\"] == \"tool_results\" or message[\"role\"] == \"tool\" "
    "%}\n"
    "        {%- if message.content is defined and message.content.content "
    "is defined %}\n"
    "            {%- set content = message.content.content %}\n"
    "        {%- else %}\n"
    "            {%- set content = message.content %}\n"
    "        {%- endif %}\n"
    "        {{- '[TOOL_RESULTS] {\"content\": ' + content|string + \", \" }}"
    "\n"
    "        {%- if not message.tool_call_id is defined or message.tool_call_id|length "
    "!= 9 %}\n"
    "            {{- raise_exception(\"Tool call IDs should be alphanumeric "
    "strings with length 9!\") }}\n"
    "        {%- endif %}\n"
    "        {{- '\"call_id\": \"' + message.tool_call_id + '\"}[/TOOL_RESULTS]' "
    "}}\n"
    "    {%- else %}\n"
    "        {{- raise_exception(\"Only user and assistant roles are supported, "
    "with the exception of an initial optional system message!\") }}"
    "\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n";

// mistralai/Mistral-Large-Instruct-2411, 'v7' (llama.cpp)
const char* const kMistralV7 =
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' "
    "%}{{ '[INST] ' + message['content'] + '[/INST]' }}{% elif message['role'] "
    "== 'system' %}{{ '[SYSTEM_PROMPT] ' + message['content'] + '[/SYSTEM_PROMPT]' "
    "}}{% elif message['role'] == 'assistant' %}{{ ' ' + message['content'] "
    "+ eos_token }}{% else %}{{ raise_exception('Only user, system and assistant "
    "roles are supported!') }}{% endif %}{% endfor %}";

// google/gemma-7b-it (llama.cpp)
const char* const kGemma7b =
    "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role "
    "not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] "
    "== 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation "
    "roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if (message['role'] == 'assistant') %}{% set role = 'model' %}"
    "{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' "
    "+ role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}"
    "{% endif %}";

// google/gemma-2-9b-it
const char* const kGemma2 =
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System "
    "role not supported') }}{% endif %}{% for message in messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') "
    "}}{% endif %}{% if (message['role'] == 'assistant') %}{% set role = 'model' "
    "%}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' "
    "+ role + '\n"
    "' + message['content'] | trim + '<end_of_turn>\n"
    "' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n"
    "'}}{% endif %}";

// Phi-3-mini (llama.cpp; also the one in the phi-3 vocabulary fixture)
const char* const kPhi3Mini =
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == "
    "'user') %}{{'<|user|>' + '\n"
    "' + message['content'] + '<|end|>' + '\n"
    "' + '<|assistant|>' + '\n"
    "'}}{% elif (message['role'] == 'assistant') %}{{message['content'] + '<|end|>' "
    "+ '\n"
    "'}}{% endif %}{% endfor %}";

// Phi-3-small (llama.cpp)
const char* const kPhi3Small =
    "{{ bos_token }}{% for message in messages %}{{'<|' + message['role'] + "
    "'|>' + '\n"
    "' + message['content'] + '<|end|>\n"
    "' }}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n"
    "' }}{% else %}{{ eos_token }}{% endif %}";

// Phi-3-medium (llama.cpp)
const char* const kPhi3Medium =
    "{% for message in messages %}{% if (message['role'] == 'user') %}"
    "{{'<|user|>' + '\n"
    "' + message['content'] + '<|end|>' + '\n"
    "' + '<|assistant|>' + '\n"
    "'}}{% elif (message['role'] == 'assistant') %}{{message['content'] + '<|end|>' "
    "+ '\n"
    "'}}{% endif %}{% endfor %}";

// Phi-3-vision (llama.cpp)
const char* const kPhi3Vision =
    "{% for message in messages %}{{'<|' + message['role'] + '|>' + '\n"
    "' + message['content'] + '<|end|>\n"
    "' }}{% endfor %}{% if add_generation_prompt and messages[-1]['role'] != "
    "'assistant' %}{{- '<|assistant|>\n"
    "' -}}{% endif %}";

// HuggingFaceH4/zephyr-7b-beta
const char* const kZephyr =
    "{% for message in messages %}\n"
    "{% if message['role'] == 'user' %}\n"
    "{{ '<|user|>\n"
    "' + message['content'] + eos_token }}\n"
    "{% elif message['role'] == 'system' %}\n"
    "{{ '<|system|>\n"
    "' + message['content'] + eos_token }}\n"
    "{% elif message['role'] == 'assistant' %}\n"
    "{{ '<|assistant|>\n"
    "'  + message['content'] + eos_token }}\n"
    "{% endif %}\n"
    "{% if loop.last and add_generation_prompt %}\n"
    "{{ '<|assistant|>' }}\n"
    "{% endif %}\n"
    "{% endfor %}";

// phi-4 (llama.cpp): <|im_start|> with <|im_sep|>, not ChatML
const char* const kPhi4 =
    "{% for message in messages %}{% if (message['role'] == 'system') %}"
    "{{'<|im_start|>system<|im_sep|>' + message['content'] + '<|im_end|>'}}"
    "{% elif (message['role'] == 'user') %}{{'<|im_start|>user<|im_sep|>' + "
    "message['content'] + '<|im_end|><|im_start|>assistant<|im_sep|>'}}"
    "{% elif (message['role'] == 'assistant') %}{{message['content'] + '<|im_end|>'}}"
    "{% endif %}{% endfor %}";

// GLMEdge (llama.cpp): <|user|>/<|assistant|> without an end-of-turn marker
const char* const kGlmEdge =
    "{% for item in messages %}{% if item['role'] == 'system' %}<|system|>\n"
    "{{ item['content'] }}{% elif item['role'] == 'user' %}<|user|>\n"
    "{{ item['content'] }}{% elif item['role'] == 'assistant' %}<|assistant|>\n"
    "{{ item['content'] }}{% endif %}{% endfor %}<|assistant|>";

// ChatGLM3 (llama.cpp)
const char* const kChatGlm3 =
    "{% for message in messages %}{% if loop.first %}[gMASK]sop<|{{ message['role'] "
    "}}|>\n"
    " {{ message['content'] }}{% else %}<|{{ message['role'] }}|>\n"
    " {{ message['content'] }}{% endif %}{% endfor %}{% if add_generation_prompt "
    "%}<|assistant|>{% endif %}";

// CohereForAI/c4ai-command-r-plus (llama.cpp)
const char* const kCommandR =
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{% set loop_messages "
    "= messages[1:] %}{% set system_message = messages[0]['content'] %}"
    "{% elif false == true %}{% set loop_messages = messages %}{% set system_message "
    "= 'You are Command-R, a brilliant, sophisticated, AI-assistant trained "
    "to assist human users by providing thorough responses. You are trained "
    "by Cohere.' %}{% else %}{% set loop_messages = messages %}{% set system_message "
    "= false %}{% endif %}{% if system_message != false %}{{ '<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>' "
    "+ system_message + '<|END_OF_TURN_TOKEN|>' }}{% endif %}{% for message "
    "in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % "
    "2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') "
    "}}{% endif %}{% set content = message['content'] %}{% if message['role'] "
    "== 'user' %}{{ '<|START_OF_TURN_TOKEN|><|USER_TOKEN|>' + content.strip() "
    "+ '<|END_OF_TURN_TOKEN|>' }}{% elif message['role'] == 'assistant' %}"
    "{{ '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>'  + content.strip() + '<|END_OF_TURN_TOKEN|>' "
    "}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>' "
    "}}{% endif %}";

// eachadea/vicuna-13b-1.1 (llama.cpp)
const char* const kVicuna =
    "{%- for message in messages %}{%- if message['role'] == 'system' -%}"
    "{{- '' + message['content'] + '\n"
    "\n"
    "' -}}{%- else -%}{%- if message['role'] == 'user' -%}{{-'USER: ' + message['content'] "
    "+ '\n"
    "'-}}{%- else -%}{{-'ASSISTANT: ' + message['content'] + '</s>\n"
    "' -}}{%- endif -%}{%- endif -%}{%- endfor -%}{%- if add_generation_prompt "
    "-%}{{-'ASSISTANT:'-}}{%- endif -%}";

// OrionStarAI/Orion-14B-Chat (llama.cpp)
const char* const kOrion =
    "{% for message in messages %}{% if loop.first %}{{ bos_token }}"
    "{% endif %}{% if message['role'] == 'user' %}{{ 'Human: ' + message['content'] "
    "+ '\\n\\nAssistant: ' + eos_token }}{% elif message['role'] == 'assistant' "
    "%}{{ message['content'] + eos_token }}{% endif %}{% endfor %}";

// ---- the conversation and what each family renders for it --------------------
// llama.cpp's test conversation; the second assistant turn keeps its spaces so
// that trimming shows.
const std::vector<Message> kConversation = {
    {"system", "You are a helpful assistant"},
    {"user", "Hello"},
    {"assistant", "Hi there"},
    {"user", "Who are you"},
    {"assistant", "   I am an assistant   "},
    {"user", "Another question"},
};

std::vector<Message> without_system() { return {kConversation.begin() + 1, kConversation.end()}; }
std::vector<Message> first(size_t n) { return {kConversation.begin(), kConversation.begin() + n}; }

// llama.cpp's expected outputs (tests/test-chat-template.cpp, "expected_output").
const char* const kExpectChatMl =
    "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
    "<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you<|im_end|>\n"
    "<|im_start|>assistant\n   I am an assistant   <|im_end|>\n<|im_start|>user\nAnother question<|im_end|>\n"
    "<|im_start|>assistant\n";
const char* const kExpectLlama2Bos =  // FusionNet
    "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s><s>[INST] Who are you "
    "[/INST]   I am an assistant   </s><s>[INST] Another question [/INST]";
const char* const kExpectLlama2Strip =  // vigogne
    "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>[INST] Who are you "
    "[/INST]I am an assistant</s>[INST] Another question [/INST]";
const char* const kExpectLlama3 =
    "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant<|eot_id|>"
    "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
    "<|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|>"
    "<|start_header_id|>user<|end_header_id|>\n\nWho are you<|eot_id|>"
    "<|start_header_id|>assistant<|end_header_id|>\n\nI am an assistant<|eot_id|>"
    "<|start_header_id|>user<|end_header_id|>\n\nAnother question<|eot_id|>"
    "<|start_header_id|>assistant<|end_header_id|>\n\n";
const char* const kExpectMistral =  // llama.cpp's 'v3' (Mistral-Large-Instruct-2407)
    "[INST] You are a helpful assistant\n\nHello[/INST] Hi there</s>[INST] Who are you[/INST] I am an "
    "assistant</s>[INST] Another question[/INST]";
const char* const kExpectGemma =
    "<start_of_turn>user\nYou are a helpful assistant\n\nHello<end_of_turn>\n<start_of_turn>model\nHi "
    "there<end_of_turn>\n<start_of_turn>user\nWho are you<end_of_turn>\n<start_of_turn>model\nI am an "
    "assistant<end_of_turn>\n<start_of_turn>user\nAnother question<end_of_turn>\n<start_of_turn>model\n";
const char* const kExpectPhi3 =
    "<|system|>\nYou are a helpful assistant<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi "
    "there<|end|>\n<|user|>\nWho are you<|end|>\n<|assistant|>\n   I am an assistant   <|end|>\n"
    "<|user|>\nAnother question<|end|>\n<|assistant|>\n";

// Not in llama.cpp's test: these are the templates' own Jinja output, less the
// leading BOS (Python jinja2 with Hugging Face's settings, bos "<s>", eos "</s>").
const char* const kExpectLlama2Meta =
    "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST] Hi there </s><s>[INST] Who are "
    "you [/INST] I am an assistant </s><s>[INST] Another question [/INST]";
const char* const kExpectZephyr =
    "<|system|>\nYou are a helpful assistant</s>\n<|user|>\nHello</s>\n<|assistant|>\nHi there</s>\n"
    "<|user|>\nWho are you</s>\n<|assistant|>\n   I am an assistant   </s>\n<|user|>\nAnother "
    "question</s>\n<|assistant|>\n";
const char* const kExpectFallback =
    "System: You are a helpful assistant\n\nUser: Hello\nAssistant: Hi there\nUser: Who are you\n"
    "Assistant:    I am an assistant   \nUser: Another question\nAssistant:";

// An excerpt of gpt-oss-20b's template (harmony): its markers, as they appear there.
const char* const kGptOss =
    "{%- macro render_system_message() -%}{{- \"<|start|>system<|message|>\" }}{{- model_identity + \"\\n\" }}"
    "{{- \"Knowledge cutoff: 2024-06\\n\" }}{{- \"Reasoning: \" + reasoning_effort + \"\\n\\n\" }}"
    "{{- \"# Valid channels: analysis, commentary, final. Channel must be included for every message.\" }}"
    "{{- \"<|end|>\" }}{%- endmacro -%}{%- elif message.role == 'assistant' -%}"
    "{{- \"<|start|>assistant<|channel|>final<|message|>\" + message.content + \"<|end|>\" }}"
    "{%- if add_generation_prompt -%}<|start|>assistant{%- endif -%}";
const char* const kExpectHarmony =
    "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06\n\n"
    "Reasoning: medium\n\n# Valid channels: analysis, commentary, final. Channel must be included for every "
    "message.<|end|><|start|>developer<|message|># Instructions\n\nYou are a helpful assistant<|end|>"
    "<|start|>user<|message|>Hello<|end|><|start|>assistant<|channel|>final<|message|>Hi there<|end|>"
    "<|start|>user<|message|>Who are you<|end|><|start|>assistant<|channel|>final<|message|>   I am an assistant   <|end|>"
    "<|start|>user<|message|>Another question<|end|><|start|>assistant";

const Family kFamilies[] = {Family::ChatMl, Family::Llama2, Family::Llama3,  Family::Mistral, Family::Gemma,
                            Family::Phi3,   Family::Zephyr, Family::Harmony, Family::Fallback};

QByteArray bytes(const std::string& s) { return QByteArray(s.data(), qsizetype(s.size())); }

}  // namespace

class TestChatTemplate : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void detects_and_renders_real_templates_data() {
        QTest::addColumn<QByteArray>("jinja");
        QTest::addColumn<QByteArray>("bos");
        QTest::addColumn<QByteArray>("eos");
        QTest::addColumn<strata::chat::Family>("family");
        QTest::addColumn<QByteArray>("expected");

        QTest::newRow("OpenHermes-2.5 (ChatML)") << QByteArray(kOpenHermes) << QByteArray() << QByteArray()
                                                 << Family::ChatMl << QByteArray(kExpectChatMl);
        // Qwen2 adds a default system prompt only when there is none; with one it is plain ChatML.
        QTest::newRow("Qwen2-7B-Instruct") << QByteArray(kQwen2) << QByteArray() << QByteArray("<|im_end|>")
                                           << Family::ChatMl << QByteArray(kExpectChatMl);
        QTest::newRow("Llama-2-7b-chat (Meta)") << QByteArray(kLlama2Chat) << QByteArray("<s>") << QByteArray("</s>")
                                                << Family::Llama2 << QByteArray(kExpectLlama2Meta);
        QTest::newRow("FusionNet (Llama 2, BOS in history)")
            << QByteArray(kFusionNet) << QByteArray("<s>") << QByteArray("</s>") << Family::Llama2
            << QByteArray(kExpectLlama2Bos);
        QTest::newRow("vigogne-2 (Llama 2, stripped)") << QByteArray(kVigogne) << QByteArray() << QByteArray("</s>")
                                                       << Family::Llama2 << QByteArray(kExpectLlama2Strip);
        QTest::newRow("Llama-3 (llama.cpp)") << QByteArray(kLlama3LlamaCpp) << QByteArray() << QByteArray()
                                             << Family::Llama3 << QByteArray(kExpectLlama3);
        QTest::newRow("Meta-Llama-3-8B-Instruct") << QByteArray(kLlama3Instruct) << QByteArray("<|begin_of_text|>")
                                                  << QByteArray("<|eot_id|>") << Family::Llama3
                                                  << QByteArray(kExpectLlama3);
        // One Mistral rendering (v3). llama.cpp renders the old v0.2 template
        // "[INST] You are a helpful assistant\nHello [/INST]Hi there</s>[INST] ..." and
        // the v1 one " [INST] ... [/INST] Hi there</s> [INST] ..."; Strata gives all the v3 text.
        QTest::newRow("Mistral-7B-Instruct-v0.2") << QByteArray(kMistralV02) << QByteArray("<s>")
                                                  << QByteArray("</s>") << Family::Mistral
                                                  << QByteArray(kExpectMistral);
        QTest::newRow("Mistral v1") << QByteArray(kMistralV1) << QByteArray("<s>") << QByteArray("</s>")
                                    << Family::Mistral << QByteArray(kExpectMistral);
        QTest::newRow("Mistral v3 (Mistral-Large-2407)") << QByteArray(kMistralV3) << QByteArray("<s>")
                                                         << QByteArray("</s>") << Family::Mistral
                                                         << QByteArray(kExpectMistral);
        QTest::newRow("Mistral v7 (Mistral-Large-2411)") << QByteArray(kMistralV7) << QByteArray("<s>")
                                                         << QByteArray("</s>") << Family::Mistral
                                                         << QByteArray(kExpectMistral);
        QTest::newRow("gemma-7b-it") << QByteArray(kGemma7b) << QByteArray() << QByteArray() << Family::Gemma
                                     << QByteArray(kExpectGemma);
        QTest::newRow("gemma-2-9b-it") << QByteArray(kGemma2) << QByteArray("<bos>") << QByteArray("<eos>")
                                       << Family::Gemma << QByteArray(kExpectGemma);
        QTest::newRow("Phi-3-mini") << QByteArray(kPhi3Mini) << QByteArray("<s>") << QByteArray("<|endoftext|>")
                                    << Family::Phi3 << QByteArray(kExpectPhi3);
        QTest::newRow("Phi-3-small") << QByteArray(kPhi3Small) << QByteArray() << QByteArray() << Family::Phi3
                                     << QByteArray(kExpectPhi3);
        QTest::newRow("Phi-3-medium") << QByteArray(kPhi3Medium) << QByteArray() << QByteArray() << Family::Phi3
                                      << QByteArray(kExpectPhi3);
        QTest::newRow("Phi-3-vision") << QByteArray(kPhi3Vision) << QByteArray() << QByteArray() << Family::Phi3
                                      << QByteArray(kExpectPhi3);
        QTest::newRow("zephyr-7b-beta") << QByteArray(kZephyr) << QByteArray("<s>") << QByteArray("</s>")
                                        << Family::Zephyr << QByteArray(kExpectZephyr);
        // StableLM 2 Zephyr ships the same template with eos <|endoftext|> (llama.cpp's "zephyr").
        QTest::newRow("gpt-oss-20b (harmony)") << QByteArray(kGptOss) << QByteArray("<|startoftext|>")
                                               << QByteArray("<|return|>") << Family::Harmony
                                               << QByteArray(kExpectHarmony);
        QTest::newRow("zephyr, eos <|endoftext|>")
            << QByteArray(kZephyr) << QByteArray("<|endoftext|>") << QByteArray("<|endoftext|>") << Family::Zephyr
            << QByteArray(kExpectZephyr).replace("</s>", "<|endoftext|>");
    }
    void detects_and_renders_real_templates() {
        QFETCH(QByteArray, jinja);
        QFETCH(QByteArray, bos);
        QFETCH(QByteArray, eos);
        QFETCH(strata::chat::Family, family);
        QFETCH(QByteArray, expected);

        const ChatTemplate t = ChatTemplate::detect(jinja.toStdString(), bos.toStdString(), eos.toStdString());
        QCOMPARE(QString(family_name(t.family())), QString(family_name(family)));
        QVERIFY(!t.is_fallback());
        const std::string prompt = t.render(kConversation);
        QCOMPARE(bytes(prompt), expected);
        if (!bos.isEmpty()) QVERIFY2(!prompt.starts_with(bos.toStdString()), "the prompt must not spell the BOS");
    }

    // Where llama.cpp and the model's Jinja agree (no system prompt to place), the
    // rendering is the Jinja output less its leading BOS.
    void matches_jinja_without_system_data() {
        QTest::addColumn<QByteArray>("jinja");
        QTest::addColumn<QByteArray>("expected");
        QTest::newRow("Qwen2 (keeps no default system)")
            << QByteArray(kOpenHermes)
            << QByteArray("<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi there<|im_end|>\n"
                          "<|im_start|>user\nWho are you<|im_end|>\n<|im_start|>assistant\n   I am an assistant   "
                          "<|im_end|>\n<|im_start|>user\nAnother question<|im_end|>\n<|im_start|>assistant\n");
        QTest::newRow("Llama-2-chat") << QByteArray(kLlama2Chat)
                                      << QByteArray("[INST] Hello [/INST] Hi there </s><s>[INST] Who are you [/INST] I "
                                                    "am an assistant </s><s>[INST] Another question [/INST]");
        QTest::newRow("Llama-3-Instruct")
            << QByteArray(kLlama3Instruct)
            << QByteArray("<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>assistant"
                          "<|end_header_id|>\n\nHi there<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWho are "
                          "you<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nI am an assistant<|eot_id|>"
                          "<|start_header_id|>user<|end_header_id|>\n\nAnother question<|eot_id|>"
                          "<|start_header_id|>assistant<|end_header_id|>\n\n");
        QTest::newRow("Mistral v3") << QByteArray(kMistralV3)
                                    << QByteArray("[INST] Hello[/INST] Hi there</s>[INST] Who are you[/INST] I am an "
                                                  "assistant</s>[INST] Another question[/INST]");
        QTest::newRow("gemma-2-it") << QByteArray(kGemma2)
                                    << QByteArray("<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\nHi "
                                                  "there<end_of_turn>\n<start_of_turn>user\nWho are you<end_of_turn>\n"
                                                  "<start_of_turn>model\nI am an assistant<end_of_turn>\n"
                                                  "<start_of_turn>user\nAnother question<end_of_turn>\n"
                                                  "<start_of_turn>model\n");
        QTest::newRow("Phi-3-mini") << QByteArray(kPhi3Mini)
                                    << QByteArray("<|user|>\nHello<|end|>\n<|assistant|>\nHi there<|end|>\n<|user|>\n"
                                                  "Who are you<|end|>\n<|assistant|>\n   I am an assistant   <|end|>\n"
                                                  "<|user|>\nAnother question<|end|>\n<|assistant|>\n");
        QTest::newRow("zephyr-7b-beta") << QByteArray(kZephyr)
                                        << QByteArray("<|user|>\nHello</s>\n<|assistant|>\nHi there</s>\n<|user|>\nWho "
                                                      "are you</s>\n<|assistant|>\n   I am an assistant   </s>\n"
                                                      "<|user|>\nAnother question</s>\n<|assistant|>\n");
    }
    void matches_jinja_without_system() {
        QFETCH(QByteArray, jinja);
        QFETCH(QByteArray, expected);
        const ChatTemplate t = ChatTemplate::detect(jinja.toStdString(), "<s>", "</s>");
        QCOMPARE(bytes(t.render(without_system())), expected);
    }

    void unknown_or_missing_templates_fall_back_data() {
        QTest::addColumn<QByteArray>("jinja");
        QTest::newRow("empty") << QByteArray();
        QTest::newRow("invalid") << QByteArray("INVALID TEMPLATE");
        QTest::newRow("phi-4 (<|im_sep|>)") << QByteArray(kPhi4);
        QTest::newRow("GLMEdge") << QByteArray(kGlmEdge);
        QTest::newRow("ChatGLM3") << QByteArray(kChatGlm3);
        QTest::newRow("Command-R") << QByteArray(kCommandR);
        QTest::newRow("vicuna") << QByteArray(kVicuna);
        QTest::newRow("Orion") << QByteArray(kOrion);
    }
    void unknown_or_missing_templates_fall_back() {
        QFETCH(QByteArray, jinja);
        const ChatTemplate t = ChatTemplate::detect(jinja.toStdString());
        QCOMPARE(t.family(), Family::Fallback);
        QVERIFY(t.is_fallback());
        QCOMPARE(bytes(t.render(kConversation)), QByteArray(kExpectFallback));
    }

    void family_names_and_forcing_by_name() {
        const char* const names[] = {"chatml", "llama2", "llama3", "mistral", "gemma", "phi3", "zephyr", "harmony", "fallback"};
        for (size_t i = 0; i < std::size(kFamilies); ++i) {
            QCOMPARE(QString(family_name(kFamilies[i])), QString(names[i]));
            QCOMPARE(ChatTemplate::detect(names[i]).family(), kFamilies[i]);
            QCOMPARE(ChatTemplate::of(kFamilies[i]).family(), kFamilies[i]);
        }
        QVERIFY(ChatTemplate::of(Family::Fallback).is_fallback());
        QVERIFY(!ChatTemplate::of(Family::ChatMl).is_fallback());
        // of(Llama2) is Meta's format; of() defaults eos/bos to </s> / <s>.
        QCOMPARE(bytes(ChatTemplate::of(Family::Llama2).render(kConversation)), QByteArray(kExpectLlama2Meta));
        QCOMPARE(bytes(ChatTemplate::of(Family::Mistral).render(kConversation)), QByteArray(kExpectMistral));
        QCOMPARE(bytes(ChatTemplate::of(Family::Zephyr).render(kConversation)), QByteArray(kExpectZephyr));
    }

    void fallback_transcript() {
        const ChatTemplate t = ChatTemplate::of(Family::Fallback);
        QCOMPARE(bytes(t.render(kConversation)), QByteArray(kExpectFallback));
        QCOMPARE(bytes(t.render(without_system(), false)),
                 QByteArray("User: Hello\nAssistant: Hi there\nUser: Who are you\nAssistant:    I am an assistant   \n"
                            "User: Another question\n"));
        QCOMPARE(bytes(t.render({})), QByteArray("Assistant:"));
    }

    void rejects_bad_roles_naming_index_and_role() {
        for (Family f : kFamilies) {
            const ChatTemplate t = ChatTemplate::of(f);
            std::vector<Message> m = first(3);
            m.push_back({"robot", "42"});  // ("tool" turns become user turns: chat/tool_prompt.h)
            QString e = error_of([&] { t.render(m); });
            QVERIFY2(e.contains("message 3") && e.contains("'robot'"), qPrintable(family_name(f) + (": " + e)));

            m = first(3);
            m.push_back({"system", "late"});
            e = error_of([&] { t.render(m); });
            QVERIFY2(e.contains("message 3") && e.contains("'system'"), qPrintable(family_name(f) + (": " + e)));

            m = {{"", "no role"}};
            e = error_of([&] { t.render(m); });
            QVERIFY2(e.contains("message 0") && e.contains("''"), qPrintable(family_name(f) + (": " + e)));

            m = {{"User", "case matters"}};
            e = error_of([&] { t.render(m); });
            QVERIFY2(e.contains("message 0") && e.contains("'User'"), qPrintable(family_name(f) + (": " + e)));
        }
    }

    void alternation_where_the_family_needs_it() {
        const std::vector<Message> two_users = {{"system", "S"}, {"user", "a"}, {"user", "b"}};
        const std::vector<Message> assistant_first = {{"assistant", "hi"}, {"user", "a"}};
        for (Family f : {Family::Llama2, Family::Mistral, Family::Gemma}) {
            const ChatTemplate t = ChatTemplate::of(f);
            QString e = error_of([&] { t.render(two_users); });
            QVERIFY2(e.contains("message 2") && e.contains("'user'") && e.contains(family_name(f)), qPrintable(e));
            e = error_of([&] { t.render(assistant_first, false); });
            QVERIFY2(e.contains("message 0") && e.contains("'assistant'"), qPrintable(e));
            // The assistant turn to generate needs a user turn before it.
            e = error_of([&] { t.render(first(3), true); });
            QVERIFY2(e.contains("message 3") && e.contains("'assistant'"), qPrintable(e));
            e = error_of([&] { t.render({}, true); });
            QVERIFY2(e.contains("message 0") && e.contains("empty"), qPrintable(e));
            e = error_of([&] { t.render(first(1), true); });
            QVERIFY2(e.contains("message 1"), qPrintable(e));
        }
        // The others render what they are given.
        for (Family f : {Family::ChatMl, Family::Llama3, Family::Phi3, Family::Zephyr, Family::Fallback}) {
            const ChatTemplate t = ChatTemplate::of(f);
            QCOMPARE(error_of([&] { t.render(two_users); }), QString());
            QCOMPARE(error_of([&] { t.render(assistant_first); }), QString());
            QCOMPARE(error_of([&] { t.render(first(3), true); }), QString());
        }
        QCOMPARE(bytes(ChatTemplate::of(Family::ChatMl).render({})), QByteArray("<|im_start|>assistant\n"));
    }

    // Without the prefix, a conversation that ends with the assistant's reply ends
    // with that turn closed: the text the KV cache holds after the reply.
    void ends_with_the_closed_assistant_turn() {
        const std::vector<Message> m = first(5);  // ... assistant "   I am an assistant   "
        struct Tail {
            Family f;
            const char* tail;
        };
        const Tail tails[] = {
            {Family::ChatMl, "<|im_start|>assistant\n   I am an assistant   <|im_end|>\n"},
            {Family::Llama2, "[INST] Who are you [/INST] I am an assistant </s>"},
            {Family::Llama3, "<|start_header_id|>assistant<|end_header_id|>\n\nI am an assistant<|eot_id|>"},
            {Family::Mistral, "[INST] Who are you[/INST] I am an assistant</s>"},
            {Family::Gemma, "<start_of_turn>model\nI am an assistant<end_of_turn>\n"},
            {Family::Phi3, "<|assistant|>\n   I am an assistant   <|end|>\n"},
            {Family::Zephyr, "<|assistant|>\n   I am an assistant   </s>\n"},
            {Family::Harmony, "<|start|>assistant<|channel|>final<|message|>   I am an assistant   <|end|>"},
            {Family::Fallback, "\nAssistant:    I am an assistant   \n"},
        };
        for (const Tail& t : tails) {
            const std::string text = ChatTemplate::of(t.f).render(m, false);
            QVERIFY2(text.ends_with(t.tail), qPrintable(QString(family_name(t.f)) + ": " + QString::fromStdString(text)));
        }
        QCOMPARE(ChatTemplate::of(Family::ChatMl).render({}, false), std::string());
        QCOMPARE(ChatTemplate::of(Family::Gemma).render({}, false), std::string());
    }

    // A new turn only appends text, so the KV cache of the previous prompt stays valid.
    void prefix_property_for_kv_reuse() {
        for (Family f : kFamilies) {
            const ChatTemplate t = ChatTemplate::detect(family_name(f), "<s>", "</s>");
            const std::string full = t.render(kConversation, true);
            std::string previous;
            for (size_t k = 0; k <= kConversation.size(); ++k) {
                const std::string closed = t.render(first(k), false);
                QVERIFY2(full.starts_with(closed), qPrintable(QString("%1, %2 messages").arg(family_name(f)).arg(k)));
                QVERIFY2(closed.starts_with(previous), qPrintable(QString("%1, %2 messages").arg(family_name(f)).arg(k)));
                previous = closed;
                if (k > 0 && kConversation[k - 1].role == "user" && k < kConversation.size()) {
                    // The generation prompt is a prefix of the conversation with the reply added.
                    const std::string prompt = t.render(first(k), true);
                    const std::string replied = t.render(first(k + 1), false);
                    QVERIFY2(replied.starts_with(prompt),
                             qPrintable(QString("%1, reply after %2 messages").arg(family_name(f)).arg(k)));
                }
            }
        }
    }

    // System prompt alone (to prefill it before the first question).
    void system_prompt_alone() {
        const std::vector<Message> s = first(1);
        QCOMPARE(bytes(ChatTemplate::of(Family::ChatMl).render(s, false)),
                 QByteArray("<|im_start|>system\nYou are a helpful assistant<|im_end|>\n"));
        QCOMPARE(bytes(ChatTemplate::of(Family::Llama2).render(s, false)),
                 QByteArray("[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\n"));
        QCOMPARE(bytes(ChatTemplate::of(Family::Mistral).render(s, false)),
                 QByteArray("[INST] You are a helpful assistant\n\n"));
        QCOMPARE(bytes(ChatTemplate::of(Family::Gemma).render(s, false)),
                 QByteArray("<start_of_turn>user\nYou are a helpful assistant\n\n"));
        // Gemma: a blank system prompt adds nothing (as in llama.cpp).
        QCOMPARE(bytes(ChatTemplate::of(Family::Gemma).render({{"system", "  \n"}, {"user", "Hi"}})),
                 QByteArray("<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n"));
    }

    // A reply's reasoning and answer: harmony's channels (streaming and done), <think>.
    void replies_split_into_reasoning_and_answer() {
        using strata::chat::split_reply;
        const std::string done =
            "<|channel|>analysis<|message|>The user greets.<|end|><|start|>assistant<|channel|>final<|message|>Hello!<|return|>";
        auto p = split_reply(done);
        QCOMPARE(p.reasoning, std::string("The user greets."));
        QCOMPARE(p.answer, std::string("Hello!"));
        QVERIFY(!p.reasoning_open);
        p = split_reply("<|channel|>analysis<|message|>The user gre");
        QCOMPARE(p.reasoning, std::string("The user gre"));
        QVERIFY(p.answer.empty());
        QVERIFY(p.reasoning_open);
        p = split_reply("<|channel|>analysis<|message|>Thought.<|end|><|start|>assistant<|channel|>fin");
        QCOMPARE(p.reasoning, std::string("Thought."));
        QVERIFY(p.answer.empty() && !p.reasoning_open);
        p = split_reply("<|channel|>analysis<|message|>A<|end|><|start|>assistant<|channel|>final<|message|>B, partly");
        QCOMPARE(p.answer, std::string("B, partly"));
        p = split_reply("<think>\nhmm\n</think>\n\nThe answer.");
        QCOMPARE(p.reasoning, std::string("\nhmm\n"));
        QCOMPARE(p.answer, std::string("The answer."));
        p = split_reply("<think>still going");
        QVERIFY(p.reasoning_open && p.answer.empty());
        p = split_reply("No markers <think> here.");
        QCOMPARE(p.answer, std::string("No markers <think> here."));
        QVERIFY(p.reasoning.empty());
        // An earlier answer with its reasoning renders as its final channel alone.
        const std::string text = ChatTemplate::of(Family::Harmony).render({{"user", "Hi"}, {"assistant", done}}, false);
        QVERIFY2(text.ends_with("<|start|>assistant<|channel|>final<|message|>Hello!<|end|>"), text.c_str());
        QVERIFY(text.find("The user greets") == std::string::npos);
    }

    // ReplyStream, fed a reply in pieces, holds split_reply of what it was fed
    // after every piece, and answer_kept() is what the answer kept of its
    // previous text: at every one and two split points and token by token.
    void reply_stream_equals_split_reply_at_every_split() {
        using strata::chat::ReplyStream;
        using strata::chat::split_reply;
        const std::vector<std::string> replies = {
            "<|channel|>analysis<|message|>The user greets.<|end|><|start|>assistant<|channel|>final<|message|>Hello!<|return|>",
            "<|channel|>analysis<|message|>A<|end|><|start|>assistant<|channel|>analysis<|message|>B<|end|>"
            "<|start|>assistant<|channel|>final<|message|>C and <|start|> D<|start|>E<|call|>F",
            "<|channel|>analysis<|message|><|end|><|start|>assistant<|channel|>commentary to=functions.x<|message|>{}<|call|>",
            "lead <|channel|>final<|message|>x <|return|> y<|channel|>analysis<|message|>z",
            "<|channel|>fin<|channel|>al<|message|>weird name",
            "<|channel|>analysis no body",
            "  \n<think>\nhmm, <|end|> not harmony\n</think>\n \nThe answer. </think> stays",
            "<think>still going, no end",
            "\n\n <thi",
            "<thinker> is not a tag",
            "No markers <think> here.",
            "plain text, then late <|channel|>final<|message|>harmony after all",
            "ends with <|",
            "caf\xc3\xa9 <|channel|>analysis<|message|>\xe2\x9c\x93 ok<|end|><|start|>assistant<|channel|>final<|message|>\xc3\xa9t\xc3\xa9",
        };
        auto check = [](const ReplyStream& r, const std::string& fed, const std::string& before, const char* how) {
            const auto want = split_reply(fed);
            const QByteArray where = QByteArray(how) + " after '" + QByteArray::fromStdString(fed) + "'";
            QVERIFY2(r.parts().answer == want.answer, where + " answer '" + QByteArray::fromStdString(r.parts().answer) + "'");
            QVERIFY2(r.parts().reasoning == want.reasoning, where + " reasoning '" + QByteArray::fromStdString(r.parts().reasoning) + "'");
            QVERIFY2(r.parts().reasoning_open == want.reasoning_open, where + " reasoning_open");
            QVERIFY2(r.answer_kept() <= before.size() && r.parts().answer.compare(0, r.answer_kept(), before, 0, r.answer_kept()) == 0,
                     where + " answer_kept");
        };
        for (const std::string& text : replies) {
            ReplyStream bytewise;
            for (size_t i = 0; i < text.size(); ++i) {
                const std::string before = bytewise.parts().answer;
                bytewise.append(std::string_view(text).substr(i, 1));
                check(bytewise, text.substr(0, i + 1), before, "byte by byte");
            }
            for (size_t a = 0; a <= text.size(); ++a)
                for (size_t b = a; b <= text.size(); b += 3) {
                    ReplyStream r;
                    std::string before;
                    for (auto [from, to] : {std::pair{size_t(0), a}, std::pair{a, b}, std::pair{b, text.size()}}) {
                        before = r.parts().answer;
                        r.append(std::string_view(text).substr(from, to - from));
                        check(r, text.substr(0, to), before, "in three pieces");
                    }
                }
        }
        // A plain answer only grows: everything shown is kept.
        ReplyStream plain;
        plain.append("Hello");
        plain.append(", world");
        QCOMPARE(plain.answer_kept(), size_t(5));
        QCOMPARE(plain.parts().answer, std::string("Hello, world"));
    }

    void stop_strings() {
        using V = std::vector<std::string>;
        QCOMPARE(ChatTemplate::of(Family::ChatMl).stop_strings(), V{"<|im_end|>"});
        QCOMPARE(ChatTemplate::of(Family::Llama3).stop_strings(), V{"<|eot_id|>"});
        QCOMPARE(ChatTemplate::of(Family::Gemma).stop_strings(), V{"<end_of_turn>"});
        QCOMPARE(ChatTemplate::of(Family::Phi3).stop_strings(), V{"<|end|>"});
        QCOMPARE(ChatTemplate::of(Family::Zephyr).stop_strings(), V{"</s>"});
        QCOMPARE(ChatTemplate::of(Family::Zephyr, "<|endoftext|>", "<|endoftext|>").stop_strings(),
                 V{"<|endoftext|>"});
        QCOMPARE(ChatTemplate::of(Family::Llama2).stop_strings(), V{"</s>"});
        QCOMPARE(ChatTemplate::of(Family::Mistral, "<s>", "</s>").stop_strings(), V{"</s>"});
        QCOMPARE(ChatTemplate::of(Family::Fallback).stop_strings(), (V{"\nUser:", "\nSystem:"}));
        QCOMPARE(ChatTemplate::of(Family::Harmony).stop_strings(), (V{"<|return|>", "<|call|>"}));
        for (Family f : kFamilies)
            for (const std::string& s : ChatTemplate::of(f).stop_strings()) QVERIFY(!s.empty());
    }

    // The phi-3 vocabulary fixture carries Phi-3-mini's template: read it through the
    // GGUF reader, detect it, and tokenize the prompt the way chat_template.h says.
    void fixture_template_is_detected_and_tokenizes() {
        STRATA_REQUIRE_FIXTURES();
        const auto file = strata::gguf::File::open(strata::test::fixture_path("tokenizers/ggml-vocab-phi-3.gguf"));
        const std::string jinja = file->get_string_or("tokenizer.chat_template", "");
        QCOMPARE(bytes(jinja), QByteArray(kPhi3Mini));

        const auto vocab = strata::tok::Vocab::from_gguf(*file);
        const ChatTemplate t = ChatTemplate::detect(jinja, vocab->token_text(vocab->bos()), vocab->token_text(vocab->eos()));
        QCOMPARE(t.family(), Family::Phi3);
        const std::string prompt = t.render(kConversation);
        QCOMPARE(bytes(prompt), QByteArray(kExpectPhi3));

        const std::vector<int32_t> ids = vocab->encode(prompt, /*add_special=*/true, /*parse_special=*/true);
        QVERIFY(!ids.empty());
        int bos_count = 0;
        for (int32_t id : ids) bos_count += id == vocab->bos();
        QCOMPARE(bos_count, vocab->add_bos() ? 1 : 0);
        if (vocab->add_bos()) QCOMPARE(ids.front(), vocab->bos());
        // The markers are single tokens, not spelled out: 1 system, 3 user, 2 assistant turns and the prefix.
        const std::pair<const char*, int> markers[] = {{"<|system|>", 1}, {"<|user|>", 3}, {"<|assistant|>", 3}, {"<|end|>", 6}};
        for (const auto& [marker, expected] : markers) {
            const auto id = vocab->find(marker);
            QVERIFY2(id.has_value(), marker);
            int count = 0;
            for (int32_t x : ids) count += x == *id;
            QVERIFY2(count == expected, qPrintable(QString("%1 is %2 tokens, expected %3").arg(marker).arg(count).arg(expected)));
        }
    }

    // The other fixtures and the demo model carry no template: the fallback.
    void models_without_a_template_fall_back() {
        STRATA_REQUIRE_FIXTURES();
        for (const char* rel : {"models/stories260K.gguf", "models/moe-tiny-f32.gguf", "models/qwen2moe-tiny-f32.gguf",
                                "tokenizers/ggml-vocab-llama-spm.gguf", "tokenizers/ggml-vocab-gpt-2.gguf"}) {
            const auto file = strata::gguf::File::open(strata::test::fixture_path(rel));
            QVERIFY2(!file->has("tokenizer.chat_template"), rel);
            QVERIFY(ChatTemplate::detect(file->get_string_or("tokenizer.chat_template", "")).is_fallback());
        }
    }

    void demo_model_falls_back() {
        const std::string path = strata::test::demo_model_path();
        if (!QFileInfo::exists(QString::fromStdString(path))) QSKIP("resources/models/strata-demo-moe.gguf is absent");
        const auto file = strata::gguf::File::open(path);
        const ChatTemplate t = ChatTemplate::detect(file->get_string_or("tokenizer.chat_template", ""));
        QVERIFY(t.is_fallback());
        QCOMPARE(bytes(t.render({{"user", "Who begat Enoch?"}})), QByteArray("User: Who begat Enoch?\nAssistant:"));
    }
};

QTEST_APPLESS_MAIN(TestChatTemplate)
#include "test_chat_template.moc"
