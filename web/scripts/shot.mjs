// Development-only screenshot helper (not shipped): drives Debian chromium over the DevTools
// protocol, prints console errors, optionally runs JS steps, and writes a PNG.
//   node --experimental-websocket scripts/shot.mjs URL OUT.png [WxH] [js-step ...]
// Each js-step is evaluated in the page, followed by a 400 ms settle.
import { spawn } from 'node:child_process';
import { writeFile, mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

const [url, out, size = '1280x800', ...steps] = process.argv.slice(2);
const [w, h] = size.split('x').map(Number);
const dir = await mkdtemp(path.join(os.tmpdir(), 'shot-'));
const port = 9300 + Math.floor(Math.random() * 500);
const chrome = spawn('/usr/bin/chromium', ['--headless', '--no-sandbox', '--disable-gpu', `--remote-debugging-port=${port}`, `--user-data-dir=${dir}`, `--window-size=${w},${h}`, 'about:blank'], { stdio: 'ignore' });
setTimeout(() => { console.error('shot: timed out'); chrome.kill(); process.exit(2); }, 90_000).unref();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let target;
for (let i = 0; i < 50 && !target; i++) {
	await sleep(100);
	try { target = (await (await fetch(`http://127.0.0.1:${port}/json`)).json()).find((t) => t.type === 'page'); } catch {}
}
const ws = new WebSocket(target.webSocketDebuggerUrl);
await new Promise((r) => (ws.onopen = r));
let id = 0;
const waiting = new Map();
ws.onmessage = (m) => {
	const msg = JSON.parse(m.data);
	if (msg.id && waiting.has(msg.id)) { waiting.get(msg.id)(msg); waiting.delete(msg.id); }
	if (msg.method === 'Runtime.consoleAPICalled' && ['error', 'warning'].includes(msg.params.type)) console.log('console.' + msg.params.type + ':', msg.params.args.map((a) => a.value ?? a.description).join(' '));
	if (msg.method === 'Runtime.exceptionThrown') console.log('exception:', msg.params.exceptionDetails.exception?.description ?? msg.params.exceptionDetails.text);
};
const call = (method, params = {}) => new Promise((r) => { const i = ++id; waiting.set(i, r); ws.send(JSON.stringify({ id: i, method, params })); });
await call('Runtime.enable');
await call('Page.enable');
await call('Emulation.setDeviceMetricsOverride', { width: w, height: h, deviceScaleFactor: 1, mobile: w <= 768 });
if (process.env.DARK) await call('Runtime.evaluate', { expression: `localStorage.setItem('filepath:theme','dark')` });
await call('Page.navigate', { url });
await sleep(Number(process.env.WAIT ?? 3000));
for (const s of steps) {
	const r = await call("Runtime.evaluate", { expression: s, awaitPromise: true });
	if (r.result?.exceptionDetails) console.log('step failed:', s, r.result.exceptionDetails.exception?.description);
	await sleep(400);
}
const shot = await call('Page.captureScreenshot', { format: 'png' });
await writeFile(out, Buffer.from(shot.result.data, 'base64'));
ws.close();
chrome.kill();
console.log('wrote', out);
