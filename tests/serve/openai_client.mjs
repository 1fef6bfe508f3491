// Drives `strata-cli serve` with the official OpenAI client from npm (a client
// no one here wrote). Prints one JSON object with what it got; the Qt test
// (test_openai_npm_client) compares it with `strata-cli run`.
//   STRATA_BASE_URL   e.g. http://127.0.0.1:PORT/v1
//   OPENAI_PKG_DIR    the folder whose node_modules holds `openai`
//   STRATA_PROMPT     the user message / completion prompt
//   STRATA_MAX_TOKENS tokens to generate
import { createRequire } from 'node:module';

const require = createRequire(process.env.OPENAI_PKG_DIR + '/');
const mod = require('openai');
const OpenAI = mod.OpenAI || mod.default || mod;

const client = new OpenAI({ baseURL: process.env.STRATA_BASE_URL, apiKey: 'sk-test-key', maxRetries: 0 });
const prompt = process.env.STRATA_PROMPT;
const maxTokens = Number(process.env.STRATA_MAX_TOKENS);
const out = {};

const models = await client.models.list();
out.models = models.data.map((m) => m.id);
const model = out.models[0];

const stream = await client.chat.completions.create({
  model, messages: [{ role: 'user', content: prompt }], temperature: 0, max_tokens: maxTokens,
  stream: true, stream_options: { include_usage: true },
});
out.stream_text = '';
out.stream_chunks = 0;
for await (const chunk of stream) {
  out.stream_chunks++;
  if (chunk.usage) out.stream_usage = chunk.usage;
  const choice = chunk.choices[0];
  if (!choice) continue;
  out.stream_text += choice.delta?.content ?? '';
  if (choice.finish_reason) out.stream_finish = choice.finish_reason;
}

const full = await client.chat.completions.create({
  model, messages: [{ role: 'user', content: prompt }], temperature: 0, max_tokens: maxTokens,
});
out.full_text = full.choices[0].message.content;
out.full_finish = full.choices[0].finish_reason;
out.full_usage = full.usage;

const completion = await client.completions.create({ model, prompt, temperature: 0, max_tokens: maxTokens });
out.completion_text = completion.choices[0].text;

// Embeddings: the client asks for base64 and decodes it.
const emb = await client.embeddings.create({ model, input: [prompt, prompt] });
const v = emb.data[0].embedding;
out.embedding_dims = v.length;
out.embedding_norm = Math.sqrt(v.reduce((s, x) => s + x * x, 0));
out.embeddings_equal = JSON.stringify(v) === JSON.stringify(emb.data[1].embedding);

// Constrained output: a call that must be made, and JSON that must follow a
// schema. The demo model never saw a quote mark, so its strings are bounded
// (maxLength) to end; everything else is what agents send.
const weather = {
  type: 'object',
  properties: {
    city: { type: 'string', maxLength: 24 },
    days: { type: 'integer', minimum: 1, maximum: 14 },
    unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
    hourly: { type: 'boolean' },
  },
  required: ['city', 'days'],
  additionalProperties: false,
};
const person = {
  type: 'object',
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 16 },
    age: { type: 'integer', minimum: 0, maximum: 120 },
    tags: { type: 'array', items: { enum: ['a', 'b', 'c'] }, maxItems: 3 },
    partner: { anyOf: [{ type: 'null' }, { type: 'object', properties: { name: { type: 'string', maxLength: 8 } }, required: ['name'] }] },
  },
  required: ['name', 'age', 'tags', 'partner'],
  additionalProperties: false,
};
// What these two schemas ask, checked here (no schema library in this test).
function validates(v, s) {
  if (s.anyOf) return s.anyOf.some((x) => validates(v, x));
  if (s.enum) return s.enum.some((e) => JSON.stringify(e) === JSON.stringify(v));
  const chars = (x) => [...x].length;
  switch (s.type) {
    case 'null': return v === null;
    case 'boolean': return typeof v === 'boolean';
    case 'integer': return Number.isInteger(v) && !(v < s.minimum) && !(v > s.maximum);
    case 'string': return typeof v === 'string' && !(chars(v) < s.minLength) && !(chars(v) > s.maxLength);
    case 'array': return Array.isArray(v) && !(v.length > s.maxItems) && v.every((x) => validates(x, s.items));
    case 'object':
      if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
      if (!(s.required ?? []).every((k) => k in v)) return false;
      return Object.entries(v).every(([k, x]) => (k in s.properties ? validates(x, s.properties[k]) : s.additionalProperties !== false));
    default: return false;
  }
}
function checkCalls(calls) {
  if (!calls || calls.length !== 1 || calls[0].function.name !== 'get_weather') return `calls: ${JSON.stringify(calls)}`;
  try {
    const args = JSON.parse(calls[0].function.arguments);
    return validates(args, weather) ? 'valid' : `invalid: ${calls[0].function.arguments}`;
  } catch (e) {
    return `not JSON: ${calls[0].function.arguments}`;
  }
}
function checkJson(text) {
  try {
    return validates(JSON.parse(text), person) ? 'valid' : `invalid: ${text}`;
  } catch (e) {
    return `not JSON: ${text}`;
  }
}
const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'The weather forecast for a city', parameters: weather } },
  { type: 'function', function: { name: 'search', parameters: { type: 'object', properties: { q: { type: 'string' } } } } },
];
const ask = [{ role: 'user', content: 'What will the weather be in Paris tomorrow?' }];
out.required_calls = [];
out.required_stream_calls = [];
out.schema_json = [];
out.schema_stream_json = [];
for (const seed of [1, 2, 3]) {
  const call = await client.chat.completions.create({
    model, messages: ask, tools, tool_choice: { type: 'function', function: { name: 'get_weather' } }, seed, max_tokens: 400,
  });
  out.required_calls.push(`${call.choices[0].finish_reason} ${checkCalls(call.choices[0].message.tool_calls)}`);
  const any = await client.chat.completions.create({ model, messages: ask, tools: tools.slice(0, 1), tool_choice: 'required', seed, max_tokens: 400 });
  out.required_calls.push(`${any.choices[0].finish_reason} ${checkCalls(any.choices[0].message.tool_calls)}`);

  const s = await client.chat.completions.create({
    model, messages: ask, tools: tools.slice(0, 1), tool_choice: 'required', seed, max_tokens: 400, stream: true,
  });
  const calls = [];
  let finish = '';
  for await (const chunk of s) {
    const c = chunk.choices[0];
    if (!c) continue;
    for (const d of c.delta?.tool_calls ?? []) {
      calls[d.index] ??= { id: '', function: { name: '', arguments: '' } };
      if (d.id) calls[d.index].id = d.id;
      if (d.function?.name) calls[d.index].function.name += d.function.name;
      if (d.function?.arguments) calls[d.index].function.arguments += d.function.arguments;
    }
    if (c.finish_reason) finish = c.finish_reason;
  }
  out.required_stream_calls.push(`${finish} ${checkCalls(calls)}`);

  const format = { type: 'json_schema', json_schema: { name: 'person', schema: person, strict: true } };
  const j = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Describe someone' }], response_format: format, seed, max_tokens: 300 });
  out.schema_json.push(`${j.choices[0].finish_reason} ${checkJson(j.choices[0].message.content)}`);
  const js = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: 'Describe someone' }], response_format: format, seed, max_tokens: 300, stream: true,
  });
  let text = '';
  let jfinish = '';
  for await (const chunk of js) {
    const c = chunk.choices[0];
    if (!c) continue;
    text += c.delta?.content ?? '';
    if (c.finish_reason) jfinish = c.finish_reason;
  }
  out.schema_stream_json.push(`${jfinish} ${checkJson(text)}`);
}

// The Responses API: the same greedy text as chat, whole and streamed through
// the client's own event accumulator; constrained calls and JSON as above.
const greedy = await client.responses.create({ model, input: prompt, temperature: 0, max_output_tokens: maxTokens });
out.responses_text = greedy.output_text;
out.responses_usage = greedy.usage;
const greedyStream = client.responses.stream({ model, input: prompt, temperature: 0, max_output_tokens: maxTokens });
out.responses_stream_deltas = 0;
greedyStream.on('response.output_text.delta', () => out.responses_stream_deltas++);
// (openai-node 4.x sets output_text on create()'s result only: read the items.)
const textOf = (r) => r.output.filter((o) => o.type === 'message').flatMap((o) => o.content).map((c) => c.text).join('');
out.responses_stream_text = textOf(await greedyStream.finalResponse());
const flatTools = tools.map((t) => ({ type: 'function', ...t.function }));
const asCalls = (r) => r.output.filter((o) => o.type === 'function_call').map((o) => ({ function: { name: o.name, arguments: o.arguments } }));
out.responses_calls = [];
out.responses_stream_calls = [];
out.responses_json = [];
out.responses_stream_json = [];
const textFormat = { format: { type: 'json_schema', name: 'person', schema: person, strict: true } };
for (const seed of [1, 2, 3]) {
  const call = await client.responses.create({
    model, input: ask, tools: flatTools, tool_choice: { type: 'function', name: 'get_weather' }, seed, max_output_tokens: 400,
  });
  out.responses_calls.push(`${call.status} ${checkCalls(asCalls(call))}`);
  const s = client.responses.stream({ model, input: ask, tools: flatTools.slice(0, 1), tool_choice: 'required', seed, max_output_tokens: 400 });
  const sr = await s.finalResponse();
  out.responses_stream_calls.push(`${sr.status} ${checkCalls(asCalls(sr))}`);
  const j = await client.responses.create({ model, input: 'Describe someone', text: textFormat, seed, max_output_tokens: 300 });
  out.responses_json.push(`${j.status} ${checkJson(j.output_text)}`);
  const js = client.responses.stream({ model, input: 'Describe someone', text: textFormat, seed, max_output_tokens: 300 });
  const jr = await js.finalResponse();
  out.responses_stream_json.push(`${jr.status} ${checkJson(textOf(jr))}`);
}
// A call and its output sent back, as an agent's second turn.
const turn = await client.responses.create({
  model, tools: flatTools, max_output_tokens: 4, input: [
    ...ask, { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris","days":1}' },
    { type: 'function_call_output', call_id: 'call_1', output: '21 C, clear' }],
});
out.responses_tool_turn = `${turn.status} ${turn.usage.input_tokens > greedy.usage.input_tokens}`;
// Conversation state kept by the server: previous_response_id, retrieve, delete.
const first = await client.responses.create({ model, input: prompt, temperature: 0, max_output_tokens: 4 });
const second = await client.responses.create({ model, previous_response_id: first.id, input: 'And then?', max_output_tokens: 4 });
out.responses_chain = second.usage.input_tokens > first.usage.input_tokens + first.usage.output_tokens;
const kept = await client.responses.retrieve(first.id);
out.responses_retrieved = kept.id === first.id && textOf(kept) === first.output_text;
await client.responses.del(first.id);
try {
  await client.responses.create({ model, previous_response_id: first.id, input: 'x', max_output_tokens: 2 });
  out.responses_deleted = 'accepted';
} catch (e) {
  out.responses_deleted = `${e.status} ${e.error?.code ?? e.code}`;
}

try {
  await client.chat.completions.create({
    model, messages: ask, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', pattern: '^a+$' } } },
  });
  out.unsupported_schema = 'accepted';
} catch (e) {
  out.unsupported_schema = `${e.status} ${e.error?.param ?? e.param}: ${e.error?.message ?? e.message}`;
}

try {
  await client.chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: 'x' }] });
  out.unknown_model = 'accepted';
} catch (e) {
  out.unknown_model = `${e.status} ${e.error?.code ?? e.code}`;
}
console.log(JSON.stringify(out));
