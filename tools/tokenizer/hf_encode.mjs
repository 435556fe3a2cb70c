// Reference tokenizer for Tern's tests: Hugging Face's independent JavaScript
// implementation (@huggingface/tokenizers) run over JSON Lines.
//
//   node hf_encode.mjs <npm-prefix> <tokenizer.json> [tokenizer_config.json] < lines.jsonl
//
// Each input line is a JSON string to encode (prints a JSON array of ids) or
// a JSON array of ids to decode (prints a JSON string) — the same protocol
// as `tern tokenize --batch`, so the test can diff the outputs line by line.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [prefix, tokenizerPath, configPath] = process.argv.slice(2);
if (!prefix || !tokenizerPath) {
  console.error("usage: node hf_encode.mjs <npm-prefix> <tokenizer.json> [tokenizer_config.json] < lines.jsonl");
  process.exit(2);
}

// Resolve the package from the cache folder the test installed it into.
const require = createRequire(path.join(path.resolve(prefix), "package.json"));
const module = await import(pathToFileURL(require.resolve("@huggingface/tokenizers")).href);
// require.resolve finds the CommonJS build, whose exports arrive under default.
const Tokenizer = module.Tokenizer ?? module.default.Tokenizer;

const tokenizerJson = JSON.parse(readFileSync(tokenizerPath, "utf8"));
const config = configPath ? JSON.parse(readFileSync(configPath, "utf8")) : {};
const tokenizer = new Tokenizer(tokenizerJson, config);

const out = [];
for (const line of readFileSync(0, "utf8").split("\n")) {
  if (line === "") continue;
  const value = JSON.parse(line);
  if (typeof value === "string") {
    out.push(JSON.stringify(tokenizer.encode(value).ids));
  } else {
    out.push(JSON.stringify(tokenizer.decode(value)));
  }
}
process.stdout.write(out.join("\n") + (out.length ? "\n" : ""));
