// UI benchmark (docs/benchmarks/web.md), in headless Chromium against the real binary:
//   (b) navigation → a fully rendered session with 500 nodes and 10,000 records (the tree shows
//       500 rows AND the selected node's last record is visible), median of RUNS fresh page loads,
//       with an EMPTY session measured the same way in the same run as the baseline;
//   (c) frame times (requestAnimationFrame deltas) over SECONDS while records stream into the
//       selected node at ~RATE/s through the real pipeline (the root is a test agent container
//       playing "echo …; sleep …" lines: container stdout → relay → store → hub → WebSocket),
//       with the same measurement and no streaming as the baseline.
//   cd web && npm run bench            (env: RUNS=7 BENCH_SECONDS=10 RATE=100 JSON=1)
// Needs bin/filepath (built after npm run build), Go (builds internal/cmd/seed), Chromium, Docker
// and filepath/testagent:latest.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { AGENT_IMAGE, REPO, api, launch, missing, poll, removeDir, startServer, tempDir } from './lib.mjs';

const run = promisify(execFile);
const RUNS = Number(process.env.RUNS ?? 7);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10); // not SECONDS: bash sets that one
const RATE = Number(process.env.RATE ?? 100);
const LAST = 'seed: last record'; // internal/cmd/seed's LastText

const why = await missing();
if (why) {
	console.error(`bench: cannot run: ${why}`);
	process.exit(1);
}

const tmp = await tempDir('fp-bench-');
const dataDir = path.join(tmp, 'data');
let server;
let browser;
let bigSession = '';
try {
	const seedBin = path.join(tmp, 'seed');
	await run('go', ['build', '-o', seedBin, './internal/cmd/seed'], { cwd: REPO, timeout: 300_000 });
	const seed = async (...args) => JSON.parse((await run(seedBin, ['--data', dataDir, ...args], { timeout: 300_000 })).stdout);
	const t0 = Date.now();
	const big = await seed('--name', 'bench-500', '--nodes', '500', '--records', '10000', '--root-records', '2000', '--image', AGENT_IMAGE);
	const seedMs = Date.now() - t0;
	bigSession = big.session;
	const empty = await seed('--name', 'bench-empty', '--nodes', '0');
	server = await startServer(dataDir, { login: false });
	browser = await launch({ width: 1280, height: 800 });
	const { context } = browser;
	await browser.page.goto(server.base + big.login);
	await browser.page.waitForURL(server.base + '/', { timeout: 30_000 });
	await browser.page.close();

	// (b) navigation → rendered, fresh page per run, empty and big alternating.
	const loads = { empty: [], big: [], bigTree: [], bigChat: [], mounted: [] };
	for (let i = 0; i < RUNS; i++) {
		for (const which of ['empty', 'big']) {
			const page = await context.newPage();
			const id = which === 'big' ? big.session : empty.session;
			await page.goto(`${server.base}/session/${id}`, { waitUntil: 'commit' });
			const r = await page.waitForFunction(
				({ which, last }) => {
					const w = /** @type {any} */ (window);
					const now = performance.now();
					if (which === 'empty') {
						return document.querySelector('aside.tree .empty') && document.querySelector('section.panel .none') ? { done: now } : false;
					}
					const rows = document.querySelectorAll('[role=treeitem]').length;
					if (rows === 500 && !w.__tree) w.__tree = now;
					const sc = document.querySelector('[data-testid=chat-scroll]');
					let seen = false;
					if (sc) {
						const box = sc.getBoundingClientRect();
						for (const el of sc.querySelectorAll('.item[data-kind=text]')) {
							if (el.textContent?.trim() !== last) continue;
							const b = el.getBoundingClientRect();
							seen = b.height > 0 && b.top >= box.top - 1 && b.bottom <= box.bottom + 1;
						}
					}
					if (seen && !w.__chat) w.__chat = now;
					return w.__tree && w.__chat ? { done: now, tree: w.__tree, chat: w.__chat, mounted: sc.querySelectorAll('.item').length } : false;
				},
				{ which, last: LAST },
				{ polling: 'raf', timeout: 60_000 }
			);
			const v = await r.jsonValue();
			if (which === 'empty') loads.empty.push(v.done);
			else {
				loads.big.push(v.done);
				loads.bigTree.push(v.tree);
				loads.bigChat.push(v.chat);
				loads.mounted.push(v.mounted);
			}
			await page.close();
		}
	}

	// Baseline for (b): the raw record replay of the big session over a plain WebSocket in a page
	// (server + network + JSON.parse, no UI), and the last seq it should reach.
	const raw = [];
	for (let i = 0; i < RUNS; i++) {
		const page = await context.newPage();
		await page.goto(`${server.base}/healthz`);
		raw.push(
			await page.evaluate(
				(url) =>
					new Promise((resolve, reject) => {
						const t = performance.now();
						let n = 0;
						let idle;
						const ws = new WebSocket(url);
						ws.onmessage = (m) => {
							JSON.parse(m.data);
							n++;
							clearTimeout(idle);
							idle = setTimeout(() => {
								ws.close();
								resolve({ ms: performance.now() - t - 300, n });
							}, 300);
						};
						ws.onerror = () => reject(new Error('websocket error'));
					}),
				`${server.base.replace('http', 'ws')}/api/v1/sessions/${big.session}/stream?after=0`
			)
		);
		await page.close();
	}
	loads.raw = raw.map((r) => r.ms);
	loads.rawRecords = raw[0].n;

	if (process.env.PROFILE) await profile(context, `${server.base}/session/${big.session}`);

	// (c) frame times on the big session, root selected: idle first (baseline), then streaming.
	const page = await context.newPage();
	await page.goto(`${server.base}/session/${big.session}`);
	await page.locator('[data-testid=chat-scroll] .item[data-kind=text]', { hasText: LAST }).waitFor({ timeout: 60_000 });
	await page.evaluate(() => {
		const w = /** @type {any} */ (window);
		w.__longtasks = [];
		new PerformanceObserver((l) => w.__longtasks.push(...l.getEntries().map((e) => e.duration))).observe({ type: 'longtask', buffered: false });
	});
	const sample = (seconds) =>
		page.evaluate(
			(ms) =>
				new Promise((resolve) => {
					const w = /** @type {any} */ (window);
					w.__longtasks.length = 0;
					const deltas = [];
					const newest = () =>
						Math.max(
							0,
							...[...document.querySelectorAll('[data-testid=chat-scroll] .item[data-kind=text]')]
								.map((e) => e.textContent.trim())
								.filter((s) => /^stream \d+$/.test(s))
								.map((s) => Number(s.slice(7)))
						);
					const first = newest();
					let last = performance.now();
					const start = last;
					const tick = (t) => {
						deltas.push(t - last);
						last = t;
						if (t - start < ms) requestAnimationFrame(tick);
						else {
							resolve({ deltas: deltas.slice(1), ms: t - start, longtasks: [...w.__longtasks], first, last: newest() });
						}
					};
					requestAnimationFrame((t) => {
						last = t;
						requestAnimationFrame(tick);
					});
				}),
			seconds * 1000
		);
	const idle = await sample(SECONDS);

	// The stream: one message whose script emits a text record then sleeps, long enough to cover
	// the sampling window plus the container start.
	const n = Math.ceil(RATE * (2 * SECONDS + 25)); // root selected, then another node selected
	const gap = Math.max(1, Math.round(1000 / RATE) - 1);
	const script = Array.from({ length: n }, (_, i) => `echo stream ${i + 1}; sleep ${gap}`).join('; ');
	const t1 = Date.now();
	await api(context, server.base, 'POST', `/sessions/${big.session}/nodes/${big.root}/messages`, { content: script });
	try {
		await page.locator('[data-testid=chat-scroll] .item[data-kind=text]', { hasText: /^\s*stream \d+\s*$/ }).first().waitFor({ timeout: 60_000 });
	} catch (e) {
		const stored = await api(context, server.base, 'GET', `/sessions/${big.session}/nodes/${big.root}/messages?after=0&limit=1000`).catch((x) => ({ error: x.message }));
		const tail = (stored.data ?? []).slice(-3).map((r) => JSON.stringify(r.data).slice(0, 100));
		const state = await page.evaluate(() => ({
			conn: document.querySelector('.conn')?.textContent ?? 'live',
			banner: document.querySelector('.banner')?.textContent ?? '',
			last: [...document.querySelectorAll('[data-testid=chat-scroll] .item')].slice(-2).map((x) => x.textContent.trim().slice(0, 80))
		}));
		throw new Error(`${e.message}\nstored tail: ${tail.join(' | ')}\npage: ${JSON.stringify(state)}`);
	}
	const firstMs = Date.now() - t1;
	const streaming = await sample(SECONDS);
	const rate = (streaming.last - streaming.first) / (streaming.ms / 1000);
	// The same stream while another node is selected: the server, the container and the
	// LiveSession do the same work, the chat does not render the records. Separates the chat's
	// cost from the load the stream puts on this (shared) machine.
	await page.locator('[role=treeitem] > .row', { hasText: /^\s*worker-01\b/ }).first().locator('button.select').click();
	await page.locator('section.panel h1.name', { hasText: 'worker-01' }).waitFor({ timeout: 30_000 });
	const streamingOther = await sample(SECONDS);
	if (process.env.PROFILE) {
		// where the main thread goes while the stream continues (after the measured window)
		const { result: s2, printProfile } = await profiled(await context.newCDPSession(page), () => sample(Math.min(5, SECONDS)));
		console.error(`profile (streaming ${round((s2.last - s2.first) / (s2.ms / 1000))}/s for ${round(s2.ms / 1000)} s):`);
		printProfile();
	}

	const out = {
		runs: RUNS,
		seed: { nodes: big.nodes, records: big.records, ms: seedMs },
		load: {
			empty: stats(loads.empty),
			big: stats(loads.big),
			bigTree: stats(loads.bigTree),
			bigChat: stats(loads.bigChat),
			mountedItems: loads.mounted[0],
			rawReplay: stats(loads.raw),
			rawRecords: loads.rawRecords
		},
		frames: {
			idle: frameStats(idle),
			streaming: { ...frameStats(streaming), firstRecordMs: firstMs, streamed: streaming.last - streaming.first, approxRate: Math.round(rate) },
			streamingOther: frameStats(streamingOther)
		},
		chromium: await browser.context.browser()?.version?.()
	};
	console.log(process.env.JSON ? JSON.stringify(out, null, 2) : report(out));
} catch (e) {
	console.error(`bench: ${e.stack ?? e}`);
	if (server) console.error(`server stderr (tail):\n${server.stderr.slice(-4000)}`);
	process.exitCode = 1;
} finally {
	// deleting the session removes the root's container (containers outlive the server by design)
	if (browser && server && bigSession) await api(browser.context, server.base, 'DELETE', `/sessions/${bigSession}`).catch((e) => console.error('bench: delete session:', e.message));
	await browser?.close();
	await server?.stop();
	await removeDir(tmp);
}

function pct(sorted, p) {
	if (!sorted.length) return NaN;
	return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}
function stats(xs) {
	const s = [...xs].sort((a, b) => a - b);
	return { median: round(pct(s, 50)), min: round(s[0]), max: round(s[s.length - 1]), all: xs.map(round) };
}
function frameStats({ deltas, ms, longtasks }) {
	const s = [...deltas].sort((a, b) => a - b);
	const vsync = 1000 / 60;
	const missed = deltas.reduce((acc, d) => acc + Math.max(0, Math.round(d / vsync) - 1), 0);
	return {
		frames: deltas.length,
		seconds: round(ms / 1000),
		median: round(pct(s, 50)),
		p95: round(pct(s, 95)),
		p99: round(pct(s, 99)),
		max: round(s[s.length - 1]),
		over25ms: round((100 * deltas.filter((d) => d > 25).length) / deltas.length),
		droppedPct: round((100 * missed) / (missed + deltas.length)),
		longTasks: longtasks.length,
		longTaskMs: round(longtasks.reduce((a, b) => a + b, 0))
	};
}
function round(x) {
	return Math.round(x * 10) / 10;
}
function report(o) {
	const l = o.load;
	const f = o.frames;
	const row = (name, x) => `| ${name} | ${x.frames} | ${x.median} | ${x.p95} | ${x.p99} | ${x.max} | ${x.droppedPct}% | ${x.over25ms}% | ${x.longTasks} (${x.longTaskMs} ms) |`;
	return [
		`Chromium ${o.chromium}; seed: ${o.seed.nodes} nodes, ${o.seed.records} records in ${o.seed.ms} ms; ${o.runs} runs`,
		'',
		'| navigation → rendered (ms) | median | min | max |',
		'|---|---|---|---|',
		`| empty session (baseline): tree + panel placeholders | ${l.empty.median} | ${l.empty.min} | ${l.empty.max} |`,
		`| 500 nodes / 10,000 records: 500 tree rows AND the root's last record visible | ${l.big.median} | ${l.big.min} | ${l.big.max} |`,
		`| … of which: 500 tree rows on screen | ${l.bigTree.median} | ${l.bigTree.min} | ${l.bigTree.max} |`,
		`| … of which: the root's last record visible | ${l.bigChat.median} | ${l.bigChat.min} | ${l.bigChat.max} |`,
		`| baseline: raw WebSocket replay of the same session's ${l.rawRecords} records in a page (JSON.parse, no UI) | ${l.rawReplay.median} | ${l.rawReplay.min} | ${l.rawReplay.max} |`,
		'',
		`(the root holds 2,000 of the records; chat items mounted: ${l.mountedItems})`,
		'',
		'| frame time (ms), root selected | frames | median | p95 | p99 | max | dropped frames | frames > 25 ms | long tasks |',
		'|---|---|---|---|---|---|---|---|---|',
		row(`idle, no streaming (baseline), ${f.idle.seconds} s`, f.idle),
		row(`streaming ~${f.streaming.approxRate} records/s into the selected root, ${f.streaming.seconds} s`, f.streaming),
		row(`same stream, another node (worker-01) selected, ${f.streamingOther.seconds} s`, f.streamingOther),
		'',
		`first streamed record on screen ${f.streaming.firstRecordMs} ms after the POST (includes the container start)`
	].join('\n');
}

// profile loads the page once under the CDP sampling profiler and prints where the main thread
// spent its time (self time per function, and Chromium's script/layout/style totals).
async function profile(context, url) {
	const page = await context.newPage();
	const { printProfile } = await profiled(await context.newCDPSession(page), async () => {
		await page.goto(url, { waitUntil: 'commit' });
		await page.locator('[data-testid=chat-scroll] .item[data-kind=text]', { hasText: LAST }).waitFor({ timeout: 60_000 });
	});
	console.error('profile (page load):');
	printProfile();
	await page.close();
}

// profiled runs fn under the CDP sampling profiler (cdp: a session of the page) and returns fn's
// result and printProfile, which prints where the main thread spent its time meanwhile.
async function profiled(cdp, fn) {
	await cdp.send('Performance.enable');
	await cdp.send('Profiler.enable');
	await cdp.send('Profiler.setSamplingInterval', { interval: 200 });
	const m0 = await metrics(cdp);
	await cdp.send('Profiler.start');
	const result = await fn();
	const { profile: prof } = await cdp.send('Profiler.stop');
	const m1 = await metrics(cdp);
	return { result, printProfile: () => printProfile(prof, m0, m1) };
}
function printProfile(prof, m0, m1) {
	const dt = (k) => round((m1[k] - m0[k]) * 1000);
	console.error(`profile: task ${dt('TaskDuration')} ms, script ${dt('ScriptDuration')} ms, layout ${dt('LayoutDuration')} ms (${m1.LayoutCount - m0.LayoutCount} layouts), style ${dt('RecalcStyleDuration')} ms (${m1.RecalcStyleCount - m0.RecalcStyleCount} recalcs)`);
	const self = new Map();
	const byId = new Map(prof.nodes.map((n) => [n.id, n]));
	const dts = prof.timeDeltas;
	prof.samples.forEach((id, i) => {
		const n = byId.get(id);
		const f = n.callFrame;
		const key = `${f.functionName || '(anonymous)'} ${f.url.split('/').pop()}:${f.lineNumber + 1}:${f.columnNumber + 1}`;
		self.set(key, (self.get(key) ?? 0) + (dts[i] ?? 0) / 1000);
	});
	const top = [...self].sort((a, b) => b[1] - a[1]).slice(0, 25);
	for (const [k, v] of top) console.error(`profile: ${round(v).toString().padStart(7)} ms  ${k}`);
}
async function metrics(cdp) {
	const { metrics } = await cdp.send('Performance.getMetrics');
	return Object.fromEntries(metrics.map((m) => [m.name, m.value]));
}
