// Drives a running gguftool serve with the official OpenAI client library
// (npm "openai", pinned by install-openai.sh) and prints what it got as one
// JSON object: a completion and a chat completion, each plain and streamed,
// and six streamed completions at once (seeds 20…25), which the server
// batches.
//
//   node scripts/serve/openai-client.mjs BASE_URL [API_KEY]
import OpenAI from "openai";

const [baseURL, apiKey = "none"] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
const params = { model: "any-name", max_tokens: 12, temperature: 0.7, seed: 11 };

const completion = await client.completions.create({ ...params, prompt: "The experts live on" });
let completionStream = "";
for await (const chunk of await client.completions.create({ ...params, prompt: "The experts live on", stream: true })) {
  completionStream += chunk.choices[0]?.text ?? "";
}
const messages = [{ role: "user", content: "Hello" }];
const chat = await client.chat.completions.create({ ...params, messages });
let chatStream = "";
for await (const chunk of await client.chat.completions.create({ ...params, messages, stream: true })) {
  chatStream += chunk.choices[0]?.delta?.content ?? "";
}
const concurrentStreams = await Promise.all([20, 21, 22, 23, 24, 25].map(async (seed) => {
  let text = "";
  for await (const chunk of await client.completions.create({ ...params, seed, prompt: "The experts live on", stream: true })) {
    text += chunk.choices[0]?.text ?? "";
  }
  return text;
}));
const models = await client.models.list();
console.log(JSON.stringify({
  completion: completion.choices[0].text,
  completion_usage: completion.usage,
  completion_model: completion.model,
  completion_stream: completionStream,
  chat: chat.choices[0].message.content,
  chat_stream: chatStream,
  concurrent_streams: concurrentStreams,
  models: models.data.map((m) => m.id),
}));
