// End-to-end: the browser-facing defences against the real binary and headless Chromium.
//   - the UI runs under its Content-Security-Policy (no violation; the live stream works),
//   - a page of another origin (another port of 127.0.0.1, which SameSite does not cover) cannot
//     change anything with the login cookie, by form or by fetch,
//   - Sign out (POST /api/v1/logout) ends the browser session.
// Same requirements as session.test.mjs: with CI=true a missing piece fails the run.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { AGENT_IMAGE, containersOf, e2eRun, newSession, poll, requirements, sendMessage, spawnCustom } from './lib.mjs';

const T = 30_000;
const req = await requirements();

/** evilSite serves, on another port of 127.0.0.1, pages that try to act on `base` with the visitor's cookie. */
async function evilSite(base, sessionId) {
	const pages = {
		// A plain form post: stop the victim's session (the route reads no body).
		'/form': `<form method="POST" action="${base}/api/v1/sessions/${sessionId}/stop"></form>
			<script>document.forms[0].submit()</script>`,
		// A fetch that needs no preflight (no-cors, text/plain) and sends the cookie.
		'/fetch': `<script>
			fetch('${base}/api/v1/sessions', { method: 'POST', mode: 'no-cors', credentials: 'include',
				headers: { 'Content-Type': 'text/plain' }, body: JSON.stringify({ name: 'evil-fetch' }) })
				.finally(() => (document.title = 'sent'));
			</script>`
	};
	const srv = http.createServer((rq, rs) => {
		rs.writeHead(200, { 'Content-Type': 'text/html' });
		rs.end(`<!doctype html><title>evil</title>${pages[rq.url] ?? ''}`);
	});
	await new Promise((r) => srv.listen(0, '127.0.0.1', r));
	return { url: `http://127.0.0.1:${srv.address().port}`, close: () => new Promise((r) => srv.close(r)) };
}

test('CSP, CSRF and logout in a real browser', { skip: req.skip, timeout: 300_000 }, async (t) => {
	if (req.__fail) assert.fail(`CI=true and the end-to-end test cannot run: ${req.__fail}`);
	const run = await e2eRun(t, 'fp-e2e-sec-');
	let evil;
	t.after(async () => evil?.close());
	const server = await run.start();
	const br = await run.launch();
	await br.context.addInitScript(() => {
		window.__cspViolations = [];
		document.addEventListener('securitypolicyviolation', (e) => window.__cspViolations.push(`${e.violatedDirective} ${e.blockedURI}`));
	});
	const page = br.page;
	await page.goto(server.loginURL);
	await page.waitForURL(server.base + '/', { timeout: T });
	const doc = await page.goto(server.base + '/');
	const csp = doc.headers()['content-security-policy'] ?? '';
	assert.match(csp, /script-src 'self' 'sha256-[^']+' 'sha256-[^']+';/, `the page's CSP: ${csp}`);
	assert.doesNotMatch(csp, /script-src[^;]*unsafe-inline/);
	await page.getByRole('heading', { name: 'Sessions' }).waitFor({ timeout: T });

	await t.test('the UI works under its CSP: a session, an agent, a live answer', async () => {
		run.sessionId = await newSession(page, 'e2e-security', { timeout: T });
		await spawnCustom(page, 'lead', AGENT_IMAGE, T);
		await sendMessage(page, 'echo answered under the CSP', T);
		await page.locator('[data-testid=chat-scroll] .item[data-kind=text]', { hasText: 'answered under the CSP' }).waitFor({ timeout: T });
		assert.deepEqual(await page.evaluate(() => window.__cspViolations), []);
		assert.deepEqual(br.errors.filter((e) => /Content Security Policy/i.test(e)), []);
	});

	await t.test('another origin cannot change anything with the cookie', async () => {
		evil = await evilSite(server.base, run.sessionId);
		const attacker = await br.context.newPage();
		const answer = attacker.waitForResponse((r) => r.url().endsWith('/stop') && r.request().method() === 'POST', { timeout: T });
		await attacker.goto(`${evil.url}/form`);
		assert.equal((await answer).status(), 403, 'the form post is refused');
		const sess = await run.api('GET', `/sessions/${run.sessionId}`);
		assert.equal(sess.status, 'running', 'the session still runs');
		await attacker.goto(`${evil.url}/fetch`);
		await poll(async () => (await attacker.title()) === 'sent', { timeout: T, what: 'the cross-origin fetch to finish' });
		await attacker.close();
		const { data } = await run.api('GET', '/sessions');
		assert.deepEqual(data.map((s) => s.name).filter((n) => n.startsWith('evil')), [], 'no session was created by another origin');
	});

	await t.test('sign out ends the browser session', async () => {
		await run.api('DELETE', `/sessions/${run.sessionId}`);
		await poll(async () => (await containersOf(run.sessionId)).length === 0, { timeout: T, what: 'the session containers to be removed' });
		run.sessionId = '';
		const out = await page.evaluate(async () => {
			const r = await fetch('/api/v1/logout', { method: 'POST' });
			const me = await fetch('/api/v1/me');
			return [r.status, me.status];
		});
		assert.deepEqual(out, [204, 401]);
		assert.equal((await br.context.cookies(server.base)).filter((c) => c.name === 'filepath_session').length, 0, 'the cookie is cleared');
	});
});
