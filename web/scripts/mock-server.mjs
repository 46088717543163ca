// Development-only mock of the filepath API for looking at the UI without the Go server.
// Not shipped: nothing in src/ imports it. Serves build/ (SPA fallback) and /api/v1 with fixture
// data, including the WebSocket record stream, and appends a live record every few seconds.
//   node scripts/mock-server.mjs [port]      (then open http://127.0.0.1:PORT/)
//   MOCK_AUTH=none  → every API call answers 401 (to see the signed-out page)
//   MOCK_MODELS=down → GET /models answers 503
import http from 'node:http';
import crypto from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../build');
const port = Number(process.argv[2] ?? 5180);
const now = () => new Date().toISOString();
const ago = (m) => new Date(Date.now() - m * 60_000).toISOString();

const sid = 'ses_demo';
function node(id, parent, name, agent, model, status, tokens, order) {
	return {
		id, session_id: sid, parent_id: parent, name, agent_type: agent, model, image: '', status,
		context_pct: status === 'running' ? 0.42 : null, config: {}, container_id: status === 'done' || status === 'error' ? '' : 'c_' + id, sort_order: order, exit_code: null,
		tokens, created_at: ago(60 - order), updated_at: ago(1)
	};
}
const nodes = [
	node('n_root', null, 'orchestrator', 'claude-code', 'claude-sonnet-4', 'running', 48213, 0),
	node('n_plan', 'n_root', 'plan', 'claude-code', 'claude-sonnet-4', 'done', 12034, 1),
	node('n_db', 'n_plan', 'db-schema', 'codex', 'gpt-5', 'done', 8200, 2),
	node('n_api', 'n_plan', 'api-design', 'pi', 'claude-haiku-4', 'thinking', 3101, 3),
	node('n_impl', 'n_root', 'impl', 'claude-code', 'claude-sonnet-4', 'running', 20991, 4),
	node('n_jwt', 'n_impl', 'jwt', 'shelley', 'claude-sonnet-4', 'running', 5022, 5),
	node('n_auth', 'n_impl', 'auth', 'amp', 'gpt-5', 'idle', 0, 6),
	node('n_tests', 'n_impl', 'tests', 'custom', 'gpt-5-mini', 'error', 1200, 7)
];
const sessions = [
	{ id: sid, user_id: 'u1', name: 'brave-42', git_repo_url: 'https://github.com/acme/shop.git', status: 'running',
	  root_node_id: 'n_root', started_at: ago(60), created_at: ago(61), updated_at: ago(1), node_count: nodes.length, last_activity: ago(0.2) },
	{ id: 'ses_two', user_id: 'u1', name: 'quiet-7', git_repo_url: null, status: 'stopped', root_node_id: 'x',
	  started_at: ago(600), created_at: ago(700), updated_at: ago(300), node_count: 3, last_activity: ago(300) },
	{ id: 'ses_three', user_id: 'u1', name: 'lucid-93', git_repo_url: null, status: 'draft', root_node_id: null,
	  started_at: null, created_at: ago(4000), updated_at: ago(4000), node_count: 0, last_activity: ago(4000) }
];

const log = [];
const clients = new Set();
let bigNodes = [];
const bigLog = [];
function add(kind, node_id, data) {
	const r = { seq: log.length + 1, kind, node_id, at: now(), data };
	log.push(r);
	for (const c of clients) send(c, JSON.stringify(r));
	return r;
}
const ev = (n, data) => add('event', n, data);
add('input', 'n_root', { type: 'message', from: 'user', content: 'Add JWT auth to the shop API. Keep `/healthz` public.' });
add('input', 'n_root', { type: 'message', from: 'system', content: 'health check: go build ./... ok; 0 uncommitted files' });
ev('n_root', { type: 'status', state: 'thinking' });
ev('n_root', { type: 'text', content: 'Plan: split into `plan` and `impl`. I will read `cmd/api/main.go` first, then hand the middleware to a worker.' });
ev('n_root', { type: 'tool', name: 'read_file', path: 'cmd/api/main.go', status: 'start' });
ev('n_root', { type: 'tool', name: 'read_file', path: 'cmd/api/main.go', status: 'done', output: 'package main\n\nimport "net/http"\n\nfunc main() {\n\thttp.ListenAndServe(":8080", routes())\n}' });
ev('n_root', { type: 'command', cmd: 'go test ./...', status: 'done', exit: 0, stdout: 'ok  \tacme/shop/api\t0.41s\nok  \tacme/shop/store\t0.12s' });
ev('n_root', { type: 'command', cmd: 'go vet ./internal/...', status: 'error', exit: 1, stderr: 'internal/auth/jwt.go:14:2: unreachable code' });
ev('n_root', { type: 'spawn', name: 'plan', agent: 'claude-code', model: 'claude-sonnet-4', task: 'Write the plan for the auth change.' });
ev('n_root', { type: 'spawn', name: 'impl', agent: 'claude-code', model: 'claude-sonnet-4' });
ev('n_root', { type: 'workers', workers: [ { name: 'plan', status: 'done' }, { name: 'impl', status: 'running' }, { name: 'jwt', status: 'running' }, { name: 'auth', status: 'idle' }, { name: 'tests', status: 'error' } ] });
ev('n_root', { type: 'commit', hash: '3f9a1c27e0b14d55', message: 'auth: add JWT middleware skeleton' });
ev('n_root', { type: 'commit', hash: 'b81e0d4411aa0c9e', message: 'auth: verify HS256 signatures' });
ev('n_root', { type: 'commit', hash: '0c77d2e9f3a18b60', message: 'api: protect /orders behind auth' });
ev('n_root', { type: 'status', state: 'running', context_pct: 0.42 });
add('error', 'n_root', { message: 'line 212 is not a valid event: missing field "content"', raw: '{"type":"text","contnet":"oops"}', source: 'stdout' });
ev('n_root', { type: 'handoff', summary: 'Context at 85%. Middleware done, tests pending for /orders. Next: wire refresh tokens.' });
ev('n_root', { type: 'text', content: 'Middleware is in. Waiting for `tests` to report.' });
ev('n_plan', { type: 'text', content: 'Plan written to `docs/auth-plan.md`.' });
ev('n_plan', { type: 'done', summary: 'plan ready' });
add('error', 'n_tests', { message: 'agent exited with code 2', source: 'exit', exit_code: 2, stderr_tail: 'panic: runtime error: index out of range [3] with length 3' });
for (let i = 0; i < 40; i++) ev('n_jwt', { type: 'text', content: `step ${i + 1}: tightening \`claims.Validate()\` for case ${i + 1}` });

function send(sock, text) {
	const payload = Buffer.from(text);
	let header;
	if (payload.length < 126) header = Buffer.from([0x81, payload.length]);
	else if (payload.length < 65536) { header = Buffer.alloc(4); header[0] = 0x81; header[1] = 126; header.writeUInt16BE(payload.length, 2); }
	else { header = Buffer.alloc(10); header[0] = 0x81; header[1] = 127; header.writeBigUInt64BE(BigInt(payload.length), 2); }
	sock.write(Buffer.concat([header, payload]));
}

const json = (res, code, body) => { res.writeHead(code, { 'content-type': 'application/json' }); res.end(body === undefined ? '' : JSON.stringify(body)); };
const fail = (res, code, c, message, field) => json(res, code, { error: { code: c, message, field } });
const readBody = (req) => new Promise((ok) => { let b = ''; req.on('data', (d) => (b += d)); req.on('end', () => { try { ok(JSON.parse(b || '{}')); } catch { ok({}); } }); });

const server = http.createServer(async (req, res) => {
	const url = new URL(req.url, 'http://x');
	const p = url.pathname;
	if (p.startsWith('/api/')) {
		if (process.env.MOCK_AUTH === 'none') return fail(res, 401, 'unauthorized', 'sign in required');
		const m = p.replace('/api/v1', '');
		if (m === '/me') return json(res, 200, { id: 'u1', name: 'demo' });
		if (m === '/agents') return json(res, 200, ['shelley', 'pi', 'claude-code', 'codex', 'cursor', 'amp', 'custom'].map((t) => ({ type: t, name: t, description: `${t} agent`, icon: '', default_model: t === 'codex' ? 'gpt-5' : 'claude-sonnet-4', image: `filepath/${t}` })));
		if (m === '/models') {
			if (process.env.MOCK_MODELS === 'down') return fail(res, 503, 'unavailable', 'model catalog unreachable');
			return json(res, 200, { providers: [
				{ name: 'anthropic', models: [ { id: 'claude-sonnet-4', name: 'Claude Sonnet 4' }, { id: 'claude-opus-4', name: 'Claude Opus 4' }, { id: 'claude-haiku-4', name: 'Claude Haiku 4' } ] },
				{ name: 'openai', models: [ { id: 'gpt-5', name: 'GPT-5' }, { id: 'gpt-5-mini', name: 'GPT-5 mini' } ] },
				{ name: 'google', models: [ { id: 'gemini-2.5-pro', name: 'Gemini 2.5 Pro' } ] } ] });
		}
		if (m === '/sessions' && req.method === 'GET') return json(res, 200, { data: sessions });
		if (m === '/sessions' && req.method === 'POST') {
			const b = await readBody(req);
			if (!b.name) return fail(res, 422, 'invalid', 'name is required', 'name');
			const s = { ...sessions[2], id: 'ses_' + crypto.randomBytes(3).toString('hex'), name: b.name, git_repo_url: b.git_repo_url ?? null, created_at: now(), last_activity: now() };
			sessions.push(s);
			return json(res, 201, s);
		}
		const sm = m.match(/^\/sessions\/([^/]+)(\/.*)?$/);
		if (sm) {
			const s = sessions.find((x) => x.id === sm[1]);
			if (!s) return fail(res, 404, 'not_found', `session ${sm[1]} not found`);
			const rest = sm[2] ?? '';
			const mine = s.id === sid ? nodes : s.id === 'ses_big' ? bigNodes : [];
			if (rest === '' && req.method === 'GET') return json(res, 200, s);
			if (rest === '' && req.method === 'DELETE') { sessions.splice(sessions.indexOf(s), 1); res.writeHead(204); return res.end(); }
			if (rest === '/stop') { s.status = 'stopped'; return json(res, 202, s); }
			if (rest === '/start') { s.status = 'running'; return json(res, 202, s); }
			if (rest === '/tree') return json(res, 200, { data: mine });
			if (rest === '/nodes' && req.method === 'POST') {
				const b = await readBody(req);
				if (b.agent_type === 'custom' && !b.image) return fail(res, 422, 'invalid', 'image is required for custom agents', 'image');
				const n = node('n_' + crypto.randomBytes(3).toString('hex'), b.parent_id ?? null, b.name, b.agent_type, b.model ?? '', 'idle', 0, mine.length + 1);
				n.session_id = s.id;
				if (s.id === sid) { nodes.push(n); add('node', '', { op: 'created', node: n }); }
				return json(res, 201, n);
			}
			const nm = rest.match(/^\/nodes\/([^/]+)\/(messages|logs|signal)$/);
			if (nm && nm[2] === 'messages' && req.method === 'POST') {
				const b = await readBody(req);
				if (String(b.content).includes('fail')) return fail(res, 409, 'conflict', 'agent is not running; start the session first');
				const r = add('input', nm[1], { type: 'message', from: 'user', content: b.content });
				setTimeout(() => ev(nm[1], { type: 'text', content: `Got it: \`${b.content.slice(0, 40)}\`` }), 800);
				return json(res, 202, r);
			}
			if (nm && nm[2] === 'logs') { res.writeHead(200, { 'content-type': 'text/plain' }); return res.end('2026/11/22 02:10:01 starting agent\n2026/11/22 02:10:02 model=claude-sonnet-4\nwarning: retrying request (429)\n'); }
			if (rest === '/stream') return fail(res, 400, 'invalid', 'websocket upgrade required');
		}
		return fail(res, 404, 'not_found', `no route ${req.method} ${p}`);
	}
	// static build with SPA fallback
	let f = path.join(root, path.normalize(p));
	try { if ((await stat(f)).isDirectory()) f = path.join(f, 'index.html'); } catch { f = path.join(root, 'index.html'); }
	try {
		const body = await readFile(f);
		const type = { '.js': 'text/javascript', '.css': 'text/css', '.html': 'text/html', '.svg': 'image/svg+xml', '.woff2': 'font/woff2', '.woff': 'font/woff' }[path.extname(f)] ?? 'application/octet-stream';
		res.writeHead(200, { 'content-type': type });
		res.end(body);
	} catch { res.writeHead(404); res.end('not found'); }
});

server.on('upgrade', (req, sock) => {
	const url = new URL(req.url, 'http://x');
	if (process.env.MOCK_AUTH === 'none' || !url.pathname.endsWith('/stream')) { sock.end('HTTP/1.1 401 Unauthorized\r\n\r\n'); return; }
	const key = req.headers['sec-websocket-key'];
	const accept = crypto.createHash('sha1').update(key + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64');
	sock.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
	const after = Number(url.searchParams.get('after') ?? 0);
	if (url.pathname.includes(sid)) {
		for (const r of log) if (r.seq > after) send(sock, JSON.stringify(r));
		clients.add(sock);
	} else if (url.pathname.includes('ses_big')) {
		for (const r of bigLog) if (r.seq > after) send(sock, JSON.stringify(r));
	}
	sock.on('data', (d) => { if ((d[0] & 0x0f) === 0x8) sock.end(); });
	sock.on('close', () => clients.delete(sock));
	sock.on('error', () => clients.delete(sock));
});

// MOCK_BIG=1: a 500-node, 10,000-record session "ses_big" for the render benchmark
// (docs/benchmarks/web.md): 2,000 records on the root, the rest spread over the other nodes.
if (process.env.MOCK_BIG) {
	const big = [];
	for (let i = 0; i < 500; i++) {
		const n = node(i ? `b${i}` : 'b0', i ? `b${Math.floor((i - 1) / 4)}` : null, `agent-${i}`, 'claude-code', 'claude-sonnet-4', ['idle', 'running', 'done', 'thinking', 'error'][i % 5], i * 100, i);
		n.session_id = 'ses_big';
		big.push(n);
	}
	sessions.push({ ...sessions[0], id: 'ses_big', name: 'big-500', root_node_id: 'b0', node_count: 500 });
	bigNodes = big;
	const kinds = [
		(i) => ({ type: 'text', content: `message ${i} about \`file_${i}.go\` and more words to wrap the line a little` }),
		(i) => ({ type: 'tool', name: 'read_file', path: `src/f${i}.ts`, status: 'done', output: 'x'.repeat(80) }),
		(i) => ({ type: 'command', cmd: `go test ./pkg${i}`, status: 'done', exit: 0, stdout: 'ok' }),
		(i) => ({ type: 'commit', hash: crypto.createHash('sha1').update(String(i)).digest('hex'), message: `commit ${i}` })
	];
	for (let i = 0; i < 10000; i++) {
		const nid = i < 2000 ? 'b0' : `b${1 + (i % 499)}`;
		bigLog.push({ seq: i + 1, kind: 'event', node_id: nid, at: now(), data: kinds[i % 4](i) });
	}
}

// Live activity: the api-design node alternates thinking/running and talks now and then.
let tick = 0;
setInterval(() => {
	tick++;
	ev('n_api', { type: 'status', state: tick % 2 ? 'running' : 'thinking' });
	if (tick % 3 === 0) ev('n_api', { type: 'text', content: `drafted endpoint ${tick / 3}: \`POST /v1/tokens\`` });
}, 4000).unref?.();

server.listen(port, '127.0.0.1', () => console.log(`mock filepath API on http://127.0.0.1:${port}/`));
