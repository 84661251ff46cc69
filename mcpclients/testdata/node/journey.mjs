// journey.mjs: an agent's journey through steward with the official
// TypeScript SDK's client, over the stdio proxy it launches as any MCP
// client does:
//
//	node journey.mjs PROXY SOCKET
//
// runs `PROXY mcp --socket SOCKET` (steward-controller's keyless proxy) and
// checks, in order: the tools, discovery by search and by address, a call,
// its replay, a conflict, the application's refusals, and an oversized
// line followed by a good call on the same session. Each check prints one
// JSON line {"check", "ok", "message", "waitsOn"} and the last line is
// {"done": true, "checks": N}. Exit 0 when every check passed, 1 when one
// failed, 2 on bad usage.
//
// A check with waitsOn names the section of the P1.7 design (notes/P17.md)
// whose work it needs and that this branch does not have yet: it is
// expected to fail until then, and one that passes is a failure, so that
// its mark is removed once that work is merged.
//
//	A  results: isError for non-2xx answers, body as JSON, outputSchema,
//	   input field descriptions, server instructions
//	C  addresses and search across applications
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';

const [proxy, socket] = process.argv.slice(2);
if (!proxy || !socket || process.argv.length !== 4) {
  console.error('usage: node journey.mjs PROXY SOCKET');
  process.exit(2);
}

// The bound of one JSON-RPC line, newline included (package mcpproxy).
const MAX_LINE = 65536;
// Each request's own bound; the Go test bounds the whole script.
const REQUEST = { timeout: 30_000 };
const APP = 'appliance';
const OP = 'calc.evaluate';
const ADDRESS = `${APP}/${OP}`;
const EXPRESSION = '3 * 687 / 365.25';
const FRACTION = '2748/487';
// Ids unique to this run: the dev stack's journals are fresh, but a rerun
// against a kept state must not replay an earlier run's answers.
const RUN = `${process.pid}-${Date.now()}`;
const CONVERSATION = `journey-${RUN}`;

let checks = 0;
let failed = 0;

function report(check, ok, message, waitsOn) {
  checks++;
  if (ok === Boolean(waitsOn)) failed++;
  const line = { check, ok, message };
  if (waitsOn) line.waitsOn = waitsOn;
  console.log(JSON.stringify(line));
}

// check runs fn and reports it; fn throws (expect) with the reason.
async function check(name, fn, waitsOn) {
  try {
    await fn();
    report(name, true, waitsOn ? `passes, while marked as waiting on section ${waitsOn}: remove the mark` : '', waitsOn);
  } catch (e) {
    report(name, false, e instanceof Error ? e.message : String(e), waitsOn);
  }
}

function expect(cond, message) {
  if (!cond) throw new Error(message);
}

function show(v) {
  const s = JSON.stringify(v);
  return s && s.length > 600 ? s.slice(0, 600) + '...' : s;
}

// bodyOf is an answer's application body: `body`, the application's JSON
// nested as JSON (never a string to parse again).
function bodyOf(sc) {
  return sc?.body;
}

const transport = new StdioClientTransport({ command: proxy, args: ['mcp', '--socket', socket], stderr: 'inherit' });
const client = new Client({ name: 'steward-journey', version: '1.0.0' });

async function call(name, args) {
  return client.callTool({ name, arguments: args }, undefined, REQUEST);
}

function invocation(requestId, extra = {}) {
  return { application: APP, operationId: OP, requestId, conversationId: CONVERSATION, arguments: { expression: EXPRESSION }, ...extra };
}

async function remainingToday() {
  const r = await call('steward_overview', {});
  const left = r.structuredContent?.payer?.remainingToday;
  expect(typeof left === 'number', `steward_overview names no payer.remainingToday: ${show(r.structuredContent)}`);
  return left;
}

let connected = false;
await check('connect: initialize through the stdio proxy', async () => {
  await client.connect(transport, REQUEST);
  connected = true;
  const v = client.getServerVersion();
  expect(v?.name === 'steward', `server is ${show(v)}, want steward`);
  expect(client.getServerCapabilities()?.tools, `no tools capability: ${show(client.getServerCapabilities())}`);
});
if (!connected) {
  console.log(JSON.stringify({ done: true, checks }));
  process.exit(1);
}

await check('instructions: overview, discover, call', async () => {
  const text = client.getInstructions() ?? '';
  for (const tool of ['steward_overview', 'oracle_discover', 'oracle_call']) {
    expect(text.includes(tool), `the server's instructions do not name ${tool}: ${show(text)}`);
  }
});

let tools = [];
await check('tools/list: exactly the three tools', async () => {
  tools = (await client.listTools(undefined, REQUEST)).tools;
  const names = tools.map((t) => t.name).sort();
  expect(show(names) === show(['oracle_call', 'oracle_discover', 'steward_overview']), `tools are ${show(names)}`);
  for (const t of tools) expect(t.description, `${t.name} has no description`);
});

await check('tools/list: an outputSchema for each tool', async () => {
  for (const t of tools) expect(t.outputSchema?.type === 'object', `${t.name} has no outputSchema: ${show(t)}`);
});

await check('tools/list: a description for every input field', async () => {
  for (const t of tools) {
    for (const [field, schema] of Object.entries(t.inputSchema.properties ?? {})) {
      expect(schema.description, `${t.name}.${field} has no description`);
    }
  }
});

await check('tools/list: address is an input of oracle_discover and oracle_call, application no longer required', async () => {
  for (const name of ['oracle_discover', 'oracle_call']) {
    const s = tools.find((t) => t.name === name)?.inputSchema;
    expect(s?.properties?.address, `${name} takes no address: ${show(s)}`);
    expect(!(s.required ?? []).includes('application'), `${name} still requires application: ${show(s.required)}`);
  }
});

await check('steward_overview: the reference application, reachable', async () => {
  const r = await call('steward_overview', {});
  expect(!r.isError, `isError: ${show(r)}`);
  const app = r.structuredContent?.applications?.find((a) => a.application === APP);
  expect(app?.availability === 'reachable', `applications: ${show(r.structuredContent?.applications)}`);
});

await check('oracle_discover by application and operationId: the descriptor, with the call price', async () => {
  const r = await call('oracle_discover', { application: APP, operationId: OP });
  expect(!r.isError, `isError: ${show(r.structuredContent ?? r.content)}`);
  const sc = r.structuredContent;
  expect(sc.outcome === 'definite' && sc.status === 200, `outcome ${sc.outcome} status ${sc.status}`);
  expect(bodyOf(sc)?.id === OP, `body is not ${OP}'s descriptor: ${show(sc)}`);
  expect(sc.callPrice === 1, `callPrice ${sc.callPrice}, want the dev grant's 1`);
});

await check('oracle_discover without application: a search across applications', async () => {
  const r = await call('oracle_discover', { query: OP });
  expect(!r.isError, `isError: ${show(r.structuredContent ?? r.content)}`);
  const sc = r.structuredContent;
  const match = sc?.matches?.find((m) => m.address === ADDRESS);
  expect(match?.application === APP && match?.operationId === OP, `no match ${ADDRESS}: ${show(sc)}`);
  expect(sc.closest?.address === ADDRESS && sc.closest?.inputSchema?.properties?.expression,
    `closest is not ${ADDRESS} with its input schema: ${show(sc.closest)}`);
  const searched = sc.applications?.find((a) => a.application === APP);
  expect(searched?.outcome === 'definite' && searched?.receiptId, `applications: ${show(sc.applications)}`);
  const text = r.content?.[0]?.text ?? '';
  expect(text.startsWith(ADDRESS), `the text does not begin with the match's line: ${show(text)}`);
});

await check('oracle_discover by address: the descriptor', async () => {
  const r = await call('oracle_discover', { address: ADDRESS });
  expect(!r.isError, `isError: ${show(r.structuredContent ?? r.content)}`);
  expect(bodyOf(r.structuredContent)?.id === OP, `body is not ${OP}'s descriptor: ${show(r.structuredContent)}`);
});

await check('oracle_discover by NODE/APPLICATION/OPERATION of another node: refused', async () => {
  const r = await call('oracle_discover', { address: `elsewhere/${ADDRESS}` });
  const text = r.content?.map((c) => c.text).join('\n') ?? '';
  expect(r.isError && text.includes('node elsewhere is not this host'), `answer: ${show(r)}`);
});

let before;
let first;
const callID = `call-${RUN}`;
await check('oracle_call: calc.evaluate answered, charged 1, with a receipt', async () => {
  before = await remainingToday();
  const r = await call('oracle_call', invocation(callID));
  expect(!r.isError, `isError: ${show(r.structuredContent ?? r.content)}`);
  const sc = r.structuredContent;
  expect(sc.outcome === 'definite' && sc.status === 200 && sc.charge === 1 && /^[0-9a-f]{64}$/.test(sc.receiptId ?? ''),
    `outcome ${sc.outcome} status ${sc.status} charge ${sc.charge} receiptId ${sc.receiptId}`);
  expect(bodyOf(sc)?.result?.fraction === FRACTION, `body: ${show(sc)}`);
  first = sc;
  const after = await remainingToday();
  expect(after === before - 1, `the payer's remainingToday went from ${before} to ${after}, want one less`);
});

await check('oracle_call: body is JSON, not bodyText', async () => {
  expect(first, 'the call failed');
  expect(typeof first.body === 'object' && first.body !== null && first.bodyText === undefined, `answer: ${show(first)}`);
});

await check('oracle_call: the same requestId and arguments replay the answer, with no second charge', async () => {
  expect(first, 'the call failed');
  const left = await remainingToday();
  const r = await call('oracle_call', invocation(callID));
  expect(!r.isError, `isError: ${show(r.structuredContent ?? r.content)}`);
  const sc = r.structuredContent;
  expect(sc.replayed === true && sc.charge === 0, `replayed ${sc.replayed} charge ${sc.charge}, want true and 0`);
  expect(sc.status === first.status && show(bodyOf(sc)) === show(bodyOf(first)) && sc.receiptId === first.receiptId,
    `the replay differs from the call: ${show(sc)} vs ${show(first)}`);
  const after = await remainingToday();
  expect(after === left, `the payer's remainingToday went from ${left} to ${after} on a replay`);
});

await check('oracle_call: the same requestId with other arguments is refused as a conflict', async () => {
  expect(first, 'the call failed');
  const r = await call('oracle_call', invocation(callID, { arguments: { expression: '1 + 1' } }));
  const sc = r.structuredContent;
  expect(r.isError === true && sc?.outcome === 'refused' && sc?.refusal?.code === 'conflict',
    `answer: ${show(sc ?? r.content)}`);
  expect(sc.refusal.reason.includes(callID), `the reason does not name the requestId: ${sc.refusal.reason}`);
});

// The application's own refusals: an unknown operation (404) and
// arguments that fail the operation's schema (422), each kept with its
// status and body, free under the dev grant.
const refusals = [
  { name: 'an unknown operation', status: 404, code: 'not_found', args: invocation(`nope-${RUN}`, { operationId: 'calc.nope' }) },
  { name: 'invalid arguments', status: 422, code: 'invalid_arguments', args: invocation(`bad-${RUN}`, { arguments: { expression: 7 } }) },
];
for (const f of refusals) {
  let answer;
  await check(`oracle_call of ${f.name}: the application's ${f.status}, status and body kept, not charged`, async () => {
    answer = await call('oracle_call', f.args);
    const sc = answer.structuredContent;
    expect(sc?.outcome === 'definite' && sc.status === f.status && sc.charge === 0, `answer: ${show(sc ?? answer.content)}`);
    expect(bodyOf(sc)?.error?.code === f.code, `body: ${show(sc)}`);
  });
  await check(`oracle_call of ${f.name}: isError true`, async () => {
    expect(answer, 'the call failed');
    expect(answer.isError === true, `isError ${answer.isError}: ${show(answer.structuredContent)}`);
  });
}

await check('oracle_call by address: answered and charged', async () => {
  const args = invocation(`address-${RUN}`, { address: ADDRESS });
  delete args.application;
  delete args.operationId;
  const r = await call('oracle_call', args);
  const sc = r.structuredContent;
  expect(!r.isError && sc?.status === 200 && sc?.charge === 1 && bodyOf(sc)?.result?.fraction === FRACTION,
    `answer: ${show(sc ?? r.content)}`);
});

await check(`an oversized line (over ${MAX_LINE} bytes) is answered with its own id, then the session goes on`, async () => {
  const left = await remainingToday();
  const huge = invocation(`huge-${RUN}`, { arguments: { expression: '1+'.repeat(MAX_LINE / 2) + '1' } });
  let err;
  try {
    await call('oracle_call', huge);
  } catch (e) {
    err = e;
  }
  expect(err instanceof McpError, `the oversized call was not refused: ${show(err ?? 'answered')}`);
  expect(err.code === -32600 && err.message.includes(`exceeds the bound of ${MAX_LINE} bytes including the newline`),
    `refused with ${err.code} ${err.message}`);
  const r = await call('oracle_call', invocation(`after-${RUN}`));
  expect(!r.isError && r.structuredContent?.status === 200 && bodyOf(r.structuredContent)?.result?.fraction === FRACTION,
    `the next call on the session: ${show(r.structuredContent ?? r.content)}`);
  const after = await remainingToday();
  expect(after === left - 1, `remainingToday went from ${left} to ${after}: the good call alone is charged`);
});

await client.close();
console.log(JSON.stringify({ done: true, checks }));
process.exit(failed > 0 ? 1 : 0);
