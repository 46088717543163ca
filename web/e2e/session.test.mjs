// End-to-end: the real binary (bin/filepath serve on 127.0.0.1:0, a fresh data dir), real agent
// containers (filepath/testagent:latest, filepath/byo-echo:latest) and headless Chromium driven by
// playwright-core.
//   cd web && npm run e2e          (node --test e2e/)
// With CI=true a missing Chromium, Docker engine, binary or image fails the run; otherwise the
// test is skipped with the reason. Screenshots of the session view go to docs/screenshots/.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { AGENT_IMAGE, REPO, agentContainersOf, e2eRun, newSession, poll, requirements, sendMessage, spawnCustom, userLogin } from './lib.mjs';

const SHOTS = process.env.E2E_SCREENSHOTS ?? path.join(REPO, 'docs/screenshots');
const T = 30_000; // the deadline of one wait (container start-up included)

const BYO_ECHO = process.env.E2E_BYO_IMAGE ?? 'filepath/byo-echo:latest';
const req = mergeReq(await requirements(), await requirements({ image: BYO_ECHO }));
const run = promisify(execFile);

function mergeReq(a, b) {
	const fail = [a.__fail, b.__fail].filter(Boolean).join('; ');
	const skip = [a.skip, b.skip].filter(Boolean).join('; ');
	return fail ? { __fail: fail } : skip ? { skip } : {};
}

/** containerPaused asks Docker whether a container is paused (frozen). */
async function containerPaused(id) {
	const { stdout } = await run('docker', ['inspect', '-f', '{{.State.Paused}}', id]);
	return stdout.trim() === 'true';
}

test('session flow against the real binary, a real agent container and headless Chromium', { skip: req.skip, timeout: 600_000 }, async (t) => {
	if (req.__fail) assert.fail(`CI=true and the end-to-end test cannot run: ${req.__fail}`);

	const run = await e2eRun(t, 'fp-e2e-data-');
	const dataDir = run.dataDir;
	let server;
	let a; // browser A (desktop)
	let b; // browser B (a second profile, same user)
	let sessionId = '';

	// step runs one named part of the flow; after a failure the rest are skipped (the failure
	// already fails the run) so the log shows the first broken step, not a cascade.
	const step = (name, fn) =>
		t.test(name, run.failed ? { skip: `an earlier step failed: ${run.failed}` } : {}, async () => {
			try {
				await fn();
			} catch (e) {
				run.failed = name;
				throw e;
			}
		});

	let page;
	const header = () => page.locator('section.panel h1.name');
	const chat = (kind) => page.locator(`[data-testid=chat-scroll] .item[data-kind=${kind}]`);
	const treeRow = (name) => page.locator('[role=treeitem] > .row').filter({ has: page.locator('.name', { hasText: new RegExp(`^${name}$`) }) });
	const send = (text) => sendMessage(page, text, T);

	await step('server starts and prints a login URL with its real port', async () => {
		server = await run.start();
		assert.match(server.loginURL, /^http:\/\/127\.0\.0\.1:[1-9]\d*\/login\?token=/);
	});

	await step('log in with the printed URL', async () => {
		a = await run.launch({ width: 1280, height: 800 });
		page = a.page;
		await page.goto(server.loginURL);
		await page.waitForURL(server.base + '/', { timeout: T });
		await page.getByRole('heading', { name: 'Sessions' }).waitFor({ timeout: T });
	});

	await step('create a session from the dashboard', async () => {
		sessionId = run.sessionId = await newSession(page, 'e2e-refactor', { timeout: T });
		assert.ok(sessionId, 'session id in the address');
		await page.getByRole('dialog', { name: 'Spawn agent' }).waitFor({ timeout: T });
	});

	await step('spawn a custom agent (the test agent image); its container starts', async () => {
		await spawnCustom(page, 'lead', AGENT_IMAGE, T);
		await poll(async () => (await header().textContent()) === 'lead', { timeout: T, what: 'the panel header to show lead' });
		await treeRow('lead').waitFor({ timeout: T });
		await poll(async () => (await agentContainersOf(sessionId)).length === 1, { timeout: T, what: "the lead's container" });
	});

	await step('send messages; text, tool, command, commit, spawn and worker blocks render', async () => {
		await send('echo Reading the README, then listing the workspace.; tool; command');
		await chat('text').filter({ hasText: 'Reading the README, then listing the workspace.' }).waitFor({ timeout: T });
		await send('commit; commit; spawn 3; workers; echo Three workers are on it.');
		await chat('user').first().waitFor({ timeout: T });
		await chat('commits').filter({ hasText: 'testagent commit' }).waitFor({ timeout: T });
		assert.equal(await chat('commits').first().getByText('testagent commit').count(), 2, 'two commits grouped in one log');
		await chat('command').filter({ hasText: 'ls /workspace' }).waitFor({ timeout: T });
		await chat('spawn').nth(2).waitFor({ timeout: T });
		await chat('workers').getByRole('button', { name: 'child-3' }).waitFor({ timeout: T });
		await chat('text').filter({ hasText: 'Three workers are on it.' }).waitFor({ timeout: T });
	});

	await step('expand the tool block and the command block and see their output', async () => {
		const tool = chat('tool').first();
		await tool.getByRole('button').first().click();
		await tool.locator('pre', { hasText: '# readme' }).waitFor({ timeout: T });
		const cmd = chat('command').first();
		await cmd.getByRole('button').first().click();
		await cmd.locator('pre', { hasText: 'README.md' }).waitFor({ timeout: T });
		await cmd.getByRole('button').first().click(); // collapse again, for the screenshot
		await cmd.locator('pre').waitFor({ state: 'detached', timeout: T });
	});

	await step('the spawned children appear in the tree and finish', async () => {
		for (const n of ['child-1', 'child-2', 'child-3']) await treeRow(n).waitFor({ timeout: T });
		await poll(async () => (await treeRow('lead').locator('.count').textContent())?.trim() === '3/3', { timeout: 60_000, what: 'the lead row to count 3/3 done children' });
	});

	await step('screenshot: light theme', async () => {
		await mkdir(SHOTS, { recursive: true });
		await chatTop(page);
		await settle(page);
		await page.screenshot({ path: path.join(SHOTS, 'session-light.png') });
	});

	await step('clicking a worker pill selects that node in the tree', async () => {
		await chat('workers').getByRole('button', { name: 'child-2' }).click();
		await poll(async () => (await header().textContent()) === 'child-2', { timeout: T, what: 'the panel header to show child-2' });
		await poll(async () => (await page.locator('[role=treeitem] > .row.selected .name').textContent()) === 'child-2', { timeout: T, what: 'child-2 selected in the tree' });
		await chat('text').filter({ hasText: 'hello from child-2' }).waitFor({ timeout: T });
		await chat('done').waitFor({ timeout: T });
		await treeRow('lead').locator('button.select').click();
		await poll(async () => (await header().textContent()) === 'lead', { timeout: T, what: 'lead selected again' });
	});

	await step('theme toggle: html gets .dark and --bg changes', async () => {
		const bg = () => page.evaluate(() => getComputedStyle(document.documentElement).getPropertyValue('--bg').trim());
		const light = await bg();
		assert.equal(await page.evaluate(() => document.documentElement.classList.contains('dark')), false);
		await page.getByRole('button', { name: 'Switch to dark theme' }).click();
		await poll(() => page.evaluate(() => document.documentElement.classList.contains('dark')), { timeout: T, what: 'html.dark' });
		const dark = await bg();
		assert.notEqual(dark, light, `--bg stays ${light} in dark mode`);
		// the screenshot: the same view as the light one, tool block open
		const tool = chat('tool').first();
		if ((await tool.locator('pre').count()) === 0) await tool.getByRole('button').first().click();
		await tool.locator('pre', { hasText: '# readme' }).waitFor({ timeout: T });
		await chatTop(page);
		await settle(page);
		await page.screenshot({ path: path.join(SHOTS, 'session-dark.png') });
	});

	await step('reload keeps the session, the tree, the chat and the theme', async () => {
		const url = page.url();
		await page.reload();
		assert.equal(page.url(), url);
		for (const n of ['lead', 'child-1', 'child-2', 'child-3']) await treeRow(n).waitFor({ timeout: T });
		await poll(async () => (await page.locator('[role=treeitem] > .row.selected .name').textContent()) === 'lead', { timeout: T, what: 'a selected node after reload (the root)' });
		await chat('text').filter({ hasText: 'Three workers are on it.' }).waitFor({ timeout: T });
		await chat('commits').waitFor({ timeout: T });
		assert.equal(await page.evaluate(() => document.documentElement.classList.contains('dark')), true, 'dark theme remembered');
	});

	await step('a second browser (same user, own cookie) sees a new message live', async () => {
		const login = await userLogin(dataDir, server.base);
		assert.match(login, /\/login\?token=/);
		b = await run.launch({ width: 1280, height: 800 });
		const pb = b.page;
		await pb.goto(login);
		await pb.waitForURL(server.base + '/', { timeout: T });
		await pb.locator(`[data-session-id="${sessionId}"] a.name`).click();
		// The page keeps the shown agent in the address (?node=ID): match the path only.
		await pb.waitForURL((u) => u.pathname === `/session/${sessionId}`, { timeout: T });
		await pb.locator('[data-testid=chat-scroll] .item[data-kind=text]', { hasText: 'Three workers are on it.' }).waitFor({ timeout: T });
		const before = await pb.evaluate(() => performance.getEntriesByType('navigation').length + ':' + performance.timeOrigin);
		await send('echo live from browser A');
		await pb.locator('[data-testid=chat-scroll] .item[data-kind=user]', { hasText: 'echo live from browser A' }).waitFor({ timeout: T });
		await pb.locator('[data-testid=chat-scroll] .item[data-kind=text]', { hasText: /^\s*live from browser A\s*$/ }).waitFor({ timeout: T });
		const after = await pb.evaluate(() => performance.getEntriesByType('navigation').length + ':' + performance.timeOrigin);
		assert.equal(after, before, 'browser B did not reload');
	});

	await step('the Files tab shows a file written to the session filesystem, live', async () => {
		const tab = page.getByRole('tab', { name: 'Files' });
		await tab.click();
		const entry = (name) => page.locator('.entries .nm', { hasText: new RegExp(`^${name.replace('.', '\\.')}$`) });
		await page.locator('.entries, .rows').first().waitFor({ timeout: T });
		// written after the tab is open: it must appear without a refresh (file records on the stream)
		await run.api('POST', `/sessions/${sessionId}/fs/notes/e2e.txt`, { content: 'written by the e2e test\n', encoding: 'text' });
		await entry('notes/').waitFor({ timeout: T });
		await entry('notes/').click();
		await entry('e2e.txt').waitFor({ timeout: T });
		await entry('e2e.txt').click();
		const body = page.getByRole('textbox', { name: 'Contents of e2e.txt' });
		await poll(async () => (await body.inputValue()) === 'written by the e2e test\n', { timeout: T, what: 'the file content in the viewer' });
		await page.getByRole('tab', { name: 'Chat' }).click();
		await chat('text').first().waitFor({ timeout: T });
	});

	await step('rename, move and copy a file in the Files tab; the listing follows', async () => {
		await page.getByRole('tab', { name: 'Files' }).click();
		const entry = (name) => page.locator('.entries .nm', { hasText: new RegExp(`^${name.replace('.', '\\.')}$`) });
		const crumbs = page.getByRole('navigation', { name: 'Folder path' });
		await entry('e2e.txt').waitFor({ timeout: T }); // still in /notes from the step before
		const transfer = async (name, to, button) => {
			await page.getByRole('button', { name: `Rename, move or copy ${name}` }).click();
			const dlg = page.getByRole('dialog', { name: `Rename, move or copy ${name}` });
			await dlg.getByLabel('New path').fill(to);
			await dlg.getByRole('button', { name: button, exact: true }).click();
			await dlg.waitFor({ state: 'detached', timeout: T });
		};
		await transfer('e2e.txt', '/notes/renamed.txt', 'Rename');
		await entry('renamed.txt').waitFor({ timeout: T });
		await entry('e2e.txt').waitFor({ state: 'detached', timeout: T });
		// the open file followed the rename
		await page.getByRole('textbox', { name: 'Contents of renamed.txt' }).waitFor({ timeout: T });

		await transfer('renamed.txt', '/archive/renamed.txt', 'Move');
		await entry('renamed.txt').waitFor({ state: 'detached', timeout: T });
		await crumbs.getByRole('button', { name: /workspace/ }).click();
		await entry('archive/').click();
		await entry('renamed.txt').waitFor({ timeout: T });

		await transfer('renamed.txt', '/notes/copy.txt', 'Copy');
		await entry('renamed.txt').waitFor({ timeout: T }); // a copy leaves the original
		await crumbs.getByRole('button', { name: /workspace/ }).click();
		await entry('notes/').click();
		await entry('copy.txt').waitFor({ timeout: T });
		const copy = await run.api('GET', `/sessions/${sessionId}/fs/notes/copy.txt`);
		assert.equal(copy.content, 'written by the e2e test\n');
		await page.getByRole('tab', { name: 'Chat' }).click();
		await chat('text').first().waitFor({ timeout: T });
	});

	await step('pause an agent from its header: it shows paused, its container is frozen; resume', async () => {
		await treeRow('lead').locator('button.select').click();
		await poll(async () => (await header().textContent()) === 'lead', { timeout: T, what: 'lead in the panel header' });
		const label = page.getByTestId('status-label');
		const lead = (await run.api('GET', `/sessions/${sessionId}/tree`)).data.find((n) => n.name === 'lead');
		await page.getByRole('button', { name: 'Pause', exact: true }).click();
		await poll(async () => (await label.textContent()) === 'Paused', { timeout: T, what: 'the header to say Paused' });
		await treeRow('lead').locator('.dot[data-status=paused]').waitFor({ timeout: T });
		assert.equal(await containerPaused(lead.container_id), true, "the lead's container is paused");

		await page.reload(); // the paused state comes from the log, so it survives a reload
		await poll(async () => (await label.textContent()) === 'Paused', { timeout: T, what: 'Paused after a reload' });

		await page.getByRole('button', { name: 'Resume', exact: true }).click();
		await poll(async () => (await label.textContent()) !== 'Paused', { timeout: T, what: 'the header to leave Paused' });
		await page.getByRole('button', { name: 'Pause', exact: true }).waitFor({ timeout: T });
		assert.equal(await containerPaused(lead.container_id), false, "the lead's container runs again");
		await send('echo awake after resume');
		await chat('text').filter({ hasText: /^\s*awake after resume\s*$/ }).waitFor({ timeout: T });
	});

	await step('drag a node onto another in the tree: it moves there and stays after a reload', async () => {
		const item = (name) => page.locator('li[role=treeitem]').filter({ has: page.locator(':scope > .row .name', { hasText: new RegExp(`^${name}$`) }) });
		await treeRow('child-3').dragTo(treeRow('child-1'));
		await item('child-1').locator('ul[role=group] .name', { hasText: /^child-3$/ }).waitFor({ timeout: T });
		const parentOf = async (name) => {
			const nodes = (await run.api('GET', `/sessions/${sessionId}/tree`)).data;
			return nodes.find((n) => n.id === nodes.find((m) => m.name === name).parent_id)?.name;
		};
		assert.equal(await parentOf('child-3'), 'child-1');
		await page.reload();
		await item('child-1').locator('ul[role=group] .name', { hasText: /^child-3$/ }).waitFor({ timeout: T });
		await poll(async () => (await treeRow('lead').locator('.count').textContent())?.trim() === '2/2', { timeout: T, what: 'the lead to count 2 leaves' });
	});

	await step('the Move dialog: a move into its own subtree shows the API error; a valid move moves', async () => {
		await treeRow('child-1').locator('button.select').click();
		await poll(async () => (await header().textContent()) === 'child-1', { timeout: T, what: 'child-1 in the header' });
		await page.getByRole('button', { name: 'Move', exact: true }).click();
		const dlg = page.getByRole('dialog', { name: 'Move child-1' });
		await dlg.getByRole('radio', { name: 'child-3' }).check();
		await dlg.getByRole('button', { name: 'Move', exact: true }).click();
		const alert = dlg.getByRole('alert');
		await alert.waitFor({ timeout: T });
		assert.match(await alert.textContent(), /^Could not move child-1: .*cycle/);
		await dlg.getByRole('button', { name: 'Cancel' }).click();

		await treeRow('child-3').locator('button.select').click();
		await poll(async () => (await header().textContent()) === 'child-3', { timeout: T, what: 'child-3 in the header' });
		await page.getByRole('button', { name: 'Move', exact: true }).click();
		const dlg3 = page.getByRole('dialog', { name: 'Move child-3' });
		await dlg3.getByRole('radio', { name: 'lead' }).check();
		await dlg3.getByLabel('Position').selectOption({ label: 'First' });
		await dlg3.getByRole('button', { name: 'Move', exact: true }).click();
		await dlg3.waitFor({ state: 'detached', timeout: T });
		const lead = page.locator('li[role=treeitem]').filter({ has: page.locator(':scope > .row .name', { hasText: /^lead$/ }) });
		await poll(async () => (await lead.locator(':scope > ul[role=group] > li > .row .name').allTextContents()).join(',') === 'child-3,child-1,child-2', { timeout: T, what: 'child-3 first under lead' });
	});

	await step('byo-echo: /workers shows worker pills for the children it spawned', async () => {
		await treeRow('lead').locator('button.select').click();
		await poll(async () => (await header().textContent()) === 'lead', { timeout: T, what: 'lead selected' });
		await page.locator('aside.tree').getByRole('button', { name: 'spawn' }).click();
		await spawnCustom(page, 'echo', BYO_ECHO, T);
		await poll(async () => (await header().textContent()) === 'echo', { timeout: T, what: 'echo in the header' });
		await send('/spawn helper-a');
		await treeRow('helper-a').waitFor({ timeout: T });
		await send('/workers');
		const pill = chat('workers').getByRole('button', { name: 'helper-a' });
		await pill.waitFor({ timeout: T });
		await pill.click();
		await poll(async () => (await header().textContent()) === 'helper-a', { timeout: T, what: 'the pill to select helper-a' });
	});

	await step('amp: the spawn dialog asks for AMP_API_KEY, keeps it with the session (never answered), and the header says usage is not metered', async () => {
		const key = 'sgamp_e2e-key-never-shown';
		await treeRow('lead').locator('button.select').click();
		await poll(async () => (await header().textContent()) === 'lead', { timeout: T, what: 'lead selected' });
		await page.locator('aside.tree').getByRole('button', { name: 'spawn' }).click();
		const dlg = page.getByRole('dialog', { name: 'Spawn agent' });
		await dlg.locator('#spawn-name').fill('ampy');
		await dlg.getByRole('group', { name: 'Agent type' }).getByRole('button', { name: 'amp', exact: true }).click();
		assert.match(await dlg.getByTestId('unmetered').textContent(), /usage not metered by filepath/);
		const spawnBtn = dlg.getByRole('button', { name: 'Spawn', exact: true });
		assert.equal(await spawnBtn.isDisabled(), true, 'Spawn waits for the key');
		await dlg.getByLabel('AMP_API_KEY').fill(key);
		await spawnBtn.click();
		await dlg.waitFor({ state: 'detached', timeout: T });
		await poll(async () => (await header().textContent()) === 'ampy', { timeout: T, what: 'ampy in the header' });
		assert.equal((await page.getByTestId('tokens').textContent()).trim(), 'usage not metered by filepath');
		const secrets = await run.api('GET', `/sessions/${sessionId}/secrets`);
		assert.deepEqual(secrets.data.map((x) => x.name), ['AMP_API_KEY']);
		assert.ok(!JSON.stringify(secrets).includes(key), 'the list never holds the key');
		const tree = await run.api('GET', `/sessions/${sessionId}/tree`);
		assert.ok(tree.data.some((n) => n.name === 'ampy' && n.agent_type === 'amp'));
		assert.ok(!JSON.stringify(tree).includes(key), 'the tree never holds the key');
	});

	await step('narrow viewport: the tree is a drawer; selecting a node closes it', async () => {
		await page.setViewportSize({ width: 390, height: 844 });
		const tree = page.locator('aside.tree');
		const box = async () => (await tree.boundingBox()) ?? { x: -1e9, width: 0 };
		await poll(async () => {
			const r = await box();
			return r.x + r.width <= 0;
		}, { timeout: T, what: 'the tree to be off-screen' });
		await page.getByRole('button', { name: 'Show agents' }).click();
		await poll(async () => (await box()).x >= 0, { timeout: T, what: 'the drawer to open' });
		await settle(page);
		await page.screenshot({ path: path.join(SHOTS, 'session-mobile.png') });
		await treeRow('child-1').locator('button.select').click();
		await poll(async () => {
			const r = await box();
			return r.x + r.width <= 0;
		}, { timeout: T, what: 'the drawer to close after selecting' });
		await poll(async () => (await header().textContent()) === 'child-1', { timeout: T, what: 'child-1 in the panel header' });
		// the agent panel on the phone: one row of name and actions menu, one of tabs, the chat
		await page.getByRole('button', { name: 'Show agents' }).click();
		await treeRow('lead').locator('button.select').click();
		await poll(async () => (await header().textContent()) === 'lead', { timeout: T, what: 'lead in the panel header' });
		await chat('text').filter({ hasText: /^\s*awake after resume\s*$/ }).waitFor({ timeout: T });
		await settle(page);
		await page.screenshot({ path: path.join(SHOTS, 'session-mobile-chat.png') });
	});

	await step('no uncaught page errors', async () => {
		const errs = [...(a?.errors ?? []), ...(b?.errors ?? [])].filter((e) => e.startsWith('pageerror'));
		assert.deepEqual(errs, []);
	});
});

// chatTop scrolls the chat to its first message: the screenshots show the user's messages, a
// text, the open tool block, the command, the commit log, the spawns and the worker pills.
async function chatTop(page) {
	await page.locator('[data-testid=chat-scroll]').evaluate((el) => (el.scrollTop = 0));
}

// settle waits until CSS transitions/animations that end are done and two frames have painted.
async function settle(page) {
	await page.evaluate(async () => {
		const finite = document.getAnimations().filter((an) => an.effect?.getTiming().iterations !== Infinity);
		await Promise.all(finite.map((an) => an.finished.catch(() => {})));
		await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
	});
}
