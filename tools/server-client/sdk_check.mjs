// The official OpenAI SDK against a running `tern serve`:
//   node sdk_check.mjs NODE_MODULES BASE_URL API_KEY CHECK
// CHECK is one of: chat, stream, tools, stop, errors, busy. Prints one JSON
// line with what it saw; the Python test (tests/server/test_openai_sdk.py)
// judges it. Exits 1 with a message on an unexpected SDK error.
import { createRequire } from "node:module";
import path from "node:path";

const [modules, baseURL, apiKey, check] = process.argv.slice(2);
const require = createRequire(path.join(modules, "noop.js"));
const OpenAI = require("openai");
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 120000 });
const model = process.env.TERN_MODEL_ID || "tiny";
const out = (v) => console.log(JSON.stringify(v));

async function errorOf(promise) {
  try {
    await promise;
    return null;
  } catch (e) {
    return { status: e.status, type: e.type ?? e.error?.type ?? null, code: e.code ?? null, message: e.message,
             retryAfter: e.headers?.["retry-after"] ?? null };
  }
}

const user = (content) => [{ role: "user", content }];

if (check === "chat") {
  const r = await client.chat.completions.create({ model, messages: user("Hello"), max_tokens: 8, seed: 3 });
  const models = await client.models.list();
  out({ id: r.id, object: r.object, message: r.choices[0].message, finish: r.choices[0].finish_reason,
        usage: r.usage, models: models.data.map((m) => m.id) });
} else if (check === "stream") {
  const stream = await client.chat.completions.create({ model, messages: user("Hello"), max_tokens: 8, seed: 3,
                                                        stream: true, stream_options: { include_usage: true } });
  let text = "", finish = null, usage = null, chunks = 0;
  for await (const c of stream) {
    chunks++;
    if (c.usage) usage = c.usage;
    if (!c.choices.length) continue;
    text += c.choices[0].delta.content ?? "";
    if (c.choices[0].finish_reason) finish = c.choices[0].finish_reason;
  }
  const whole = await client.chat.completions.create({ model, messages: user("Hello"), max_tokens: 8, seed: 3 });
  out({ text, finish, usage, chunks, whole: whole.choices[0].message.content });
} else if (check === "tools") {
  const tools = [{ type: "function", function: { name: "get_weather", description: "Weather in a city",
                   parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } }];
  const messages = user("Weather in Paris?");
  const first = await client.chat.completions.create({ model, messages, tools, max_tokens: 64 });
  const msg = first.choices[0].message;
  const calls = msg.tool_calls ?? [];
  messages.push(msg);
  for (const c of calls)
    messages.push({ role: "tool", tool_call_id: c.id, content: JSON.stringify({ temperature_c: 18 }) });
  const second = await client.chat.completions.create({ model, messages, tools, max_tokens: 64 });
  out({ finish: first.choices[0].finish_reason, calls: calls.map((c) => ({ id: c.id, type: c.type, name: c.function.name,
        arguments: JSON.parse(c.function.arguments) })), content: msg.content, second_finish: second.choices[0].finish_reason });
} else if (check === "stop") {
  const body = { model, prompt: [5, 6, 7, 8], max_tokens: 24, temperature: 0, ignore_eos: true };
  const full = await client.completions.create(body);
  const text = full.choices[0].text;
  let cut = Math.floor(text.length / 3);
  while (cut < text.length && "\ufffd ".includes(text[cut])) cut++;
  const stop = text.slice(cut, cut + 2);
  const r = await client.completions.create({ ...body, stop: [stop] });
  out({ full: text, stop, text: r.choices[0].text, finish: r.choices[0].finish_reason });
} else if (check === "errors") {
  const bad = await errorOf(client.chat.completions.create({ model, messages: user("x"), temperature: "hot" }));
  const unknown = await errorOf(client.chat.completions.create({ model: "gpt-4o", messages: user("x") }));
  const noKey = await errorOf(new OpenAI({ baseURL, apiKey: "wrong", maxRetries: 0 }).chat.completions.create(
      { model, messages: user("x") }));
  out({ bad, unknown, noKey });
} else if (check === "busy") {
  // Holds the only slot with a long stream, then asks again: 429.
  const stream = await client.completions.create({ model, prompt: [1, 2, 3], max_tokens: 4000, ignore_eos: true,
                                                   stream: true });
  const it = stream[Symbol.asyncIterator]();
  await it.next();
  const busy = await errorOf(client.completions.create({ model, prompt: [4], max_tokens: 2 }));
  stream.controller.abort();
  out({ busy });
} else {
  console.error(`unknown check ${check}`);
  process.exit(2);
}
