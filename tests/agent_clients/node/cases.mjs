// The Node `openai` client (6.49; 7.x needs Node 22) against serve: a chat, the tool model's
// own tool call (whole and streamed), JSON of a schema, and the Responses API. Prints one JSON
// report on stdout: {case: {result, error, exchanges}}, as run.py does for the Python clients.
// Reads OPENAI_BASE_URL and OPENAI_API_KEY, as the client does.
import OpenAI from "openai";

const exchanges = [];
async function recordingFetch(url, init) {
  const response = await fetch(url, init);
  const entry = { path: new URL(url).pathname, request: init?.body ? JSON.parse(init.body) : null,
                  status: response.status, response: null };
  if ((response.headers.get("content-type") || "").includes("application/json")) {
    entry.response = await response.clone().json();
  }
  exchanges.push(entry);
  return response;
}

const client = new OpenAI({ maxRetries: 0, fetch: recordingFetch });
const model = "tool-model";
const weather = {
  type: "function",
  function: { name: "get_weather", description: "The current weather in a city.",
              parameters: { type: "object", properties: { city: { type: "string" } },
                            required: ["city"] } },
};
const question = [{ role: "user", content: "What is the weather in Paris?" }];

const cases = {
  async node_chat() {
    const reply = await client.chat.completions.create({
      model, messages: [{ role: "user", content: "Hello!" }] });
    return { content: reply.choices[0].message.content, usage: reply.usage };
  },
  async node_tool_call() {
    const reply = await client.chat.completions.create({ model, messages: question, tools: [weather] });
    const choice = reply.choices[0];
    return { finish_reason: choice.finish_reason, tool_calls: choice.message.tool_calls };
  },
  async node_streamed_tool_call() {
    const stream = await client.chat.completions.create({
      model, messages: question, tools: [weather], stream: true,
      stream_options: { include_usage: true } });
    let name = null, args = "", finish = null, usage = null;
    for await (const chunk of stream) {
      usage = chunk.usage ?? usage;
      for (const choice of chunk.choices) {
        finish = choice.finish_reason ?? finish;
        for (const call of choice.delta.tool_calls ?? []) {
          name = call.function?.name ?? name;
          args += call.function?.arguments ?? "";
        }
      }
    }
    return { name, arguments: args, finish_reason: finish, usage };
  },
  async node_json_schema() {
    const schema = { type: "object", properties: { city: { type: "string", maxLength: 20 },
                     days: { type: "integer", minimum: 1, maximum: 7 } },
                     required: ["city", "days"], additionalProperties: false };
    const reply = await client.chat.completions.create({ model, messages: question,
      response_format: { type: "json_schema", json_schema: { name: "query", schema, strict: true } } });
    return { content: reply.choices[0].message.content };
  },
  async node_responses_tool_call() {
    const response = await client.responses.create({ model, input: "What is the weather in Paris?",
      tools: [{ type: "function", ...weather.function, strict: false }] });
    return { output: response.output, usage: response.usage };
  },
};

const report = {};
for (const [name, run] of Object.entries(cases)) {
  exchanges.length = 0;
  let result = null, error = null;
  try { result = await run(); } catch (e) { error = `${e.name}: ${e.message}`; }
  report[name] = { result, error, exchanges: [...exchanges] };
}
console.log(JSON.stringify(report));
