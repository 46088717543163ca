// A scripted stand-in for an OpenAI-compatible provider (OpenRouter's /v1/models and streamed
// /v1/chat/completions), on loopback, for end-to-end tests of the native agents: the server's
// gateway is pointed at it with FILEPATH_OPENROUTER_BASE_URL. script(messages, n) answers the
// n-th chat request (0-based) with { text } or { tool: { name, args } }.
import http from 'node:http';

export async function startFakeLLM(script) {
	const requests = [];
	const srv = http.createServer((req, res) => {
		let body = '';
		req.setEncoding('utf8');
		req.on('data', (d) => (body += d));
		req.on('end', () => {
			if (req.method === 'GET' && req.url.endsWith('/models')) {
				res.setHeader('Content-Type', 'application/json');
				res.end(JSON.stringify({ data: [{ id: 'fake/coder', name: 'Fake coder', context_length: 200000, pricing: { prompt: '0', completion: '0' } }] }));
				return;
			}
			if (req.method !== 'POST' || !req.url.endsWith('/chat/completions')) {
				res.statusCode = 404;
				res.end(JSON.stringify({ error: { message: `fakellm: unknown path ${req.url}` } }));
				return;
			}
			let parsed;
			try {
				parsed = JSON.parse(body);
			} catch {
				res.statusCode = 400;
				res.end(JSON.stringify({ error: { message: 'fakellm: body is not JSON' } }));
				return;
			}
			const n = requests.length;
			requests.push(parsed);
			let turn;
			try {
				turn = script(parsed.messages ?? [], n);
			} catch (e) {
				turn = { text: `fakellm script failed: ${e.message}` };
			}
			const id = `chatcmpl-${n}`;
			const chunk = (delta, finish = null) => ({ id, object: 'chat.completion.chunk', created: 0, model: parsed.model, choices: [{ index: 0, delta, finish_reason: finish }] });
			const events = [chunk({ role: 'assistant' })];
			if (turn.tool) {
				events.push(chunk({ tool_calls: [{ index: 0, id: `call_${n}`, type: 'function', function: { name: turn.tool.name, arguments: JSON.stringify(turn.tool.args) } }] }));
				events.push(chunk({}, 'tool_calls'));
			} else {
				events.push(chunk({ content: turn.text }));
				events.push(chunk({}, 'stop'));
			}
			events.push({ id, object: 'chat.completion.chunk', created: 0, model: parsed.model, choices: [], usage: { prompt_tokens: 100, completion_tokens: 20, total_tokens: 120 } });
			res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
			for (const e of events) res.write(`data: ${JSON.stringify(e)}\n\n`);
			res.end('data: [DONE]\n\n');
		});
	});
	await new Promise((resolve) => srv.listen(0, '127.0.0.1', resolve));
	const { port } = srv.address();
	return {
		url: `http://127.0.0.1:${port}/v1`,
		requests,
		close: () => new Promise((resolve) => srv.close(() => resolve()))
	};
}
