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

try {
  await client.chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: 'x' }] });
  out.unknown_model = 'accepted';
} catch (e) {
  out.unknown_model = `${e.status} ${e.error?.code ?? e.code}`;
}
console.log(JSON.stringify(out));
