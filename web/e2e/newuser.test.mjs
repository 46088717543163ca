// End-to-end: what a new user tripped over (issue 27), each item checked the way they met it: the
// real binary, real agent containers (filepath/testagent, filepath/byo-echo) and headless
// Chromium, on a desktop and on a 390×844 phone.
//   cd web && npm run e2e
// With CI=true a missing Chromium, Docker engine, binary or image fails the run; otherwise the
// test is skipped with the reason.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { AGENT_IMAGE, agentContainersOf, e2eRun, poll, requirements, sendMessage } from './lib.mjs';

const T = 30_000; // the deadline of one wait (container start-up included)
const BYO_ECHO = process.env.E2E_BYO_IMAGE ?? 'filepath/byo-echo:latest';
const run = promisify(execFile);

const a = await requirements();
const b = await requirements({ image: BYO_ECHO });
const fail = [a.__fail, b.__fail].filter(Boolean).join('; ');
const skip = [a.skip, b.skip].filter(Boolean).join('; ');

async function containerPaused(id) {
	const { stdout } = await run('docker', ['inspect', '-f', '{{.State.Paused}}', id]);
	return stdout.trim() === 'true';
}

test('issue 27: what a new user trips over, on a desktop and a phone', { skip: skip || undefined, timeout: 900_000 }, async (t) => {
	if (fail) assert.fail(`CI=true and the end-to-end test cannot run: ${fail}`);

	const e = await e2eRun(t, 'fp-e2e-newuser-');
	const serverEnv = {
		FILEPATH_ANTHROPIC_API_KEY: 'e2e-not-a-key',
		FILEPATH_OPENROUTER_API_KEY: 'e2e-not-a-key',
		FILEPATH_OPENROUTER_BASE_URL: 'http://127.0.0.1:9/v1',
		FILEPATH_OPENAI_API_KEY: ''
	};
	let br;
	const nativeDialogs = [];

	const step = (name, fn) =>
		t.test(name, e.failed ? { skip: `an earlier step failed: ${e.failed}` } : {}, async () => {
			try {
				await fn();
			} catch (err) {
				e.failed = name;
				throw err;
			}
		});

	let page;
	const header = () => page.locator('section.panel h1.name');
	const label = () => page.getByTestId('status-label');
	const chat = (kind) => page.locator(`[data-testid=chat-scroll] .item[data-kind=${kind}]`);
	const treeRow = (name) => page.locator('[role=treeitem] > .row').filter({ has: page.locator('.name', { hasText: new RegExp(`^${name}$`) }) });
	const call = (method, p, body) => e.api(method, p, body);
	const tree = async () => (await call('GET', `/sessions/${e.sessionId}/tree`)).data;
	const nodeNamed = async (name) => (await tree()).find((n) => n.name === name);
	async function select(name) {
		if (page.viewportSize().width < 700) await page.getByRole('button', { name: 'Show agents' }).click();
		await treeRow(name).locator('button.select').click();
		await poll(async () => (await header().textContent()) === name, { timeout: T, what: `${name} in the panel header` });
	}
	const send = (text) => sendMessage(page, text, T);
	async function spawnChild(name, image, parent, task) {
		const body = { agent_type: 'custom', image, name, parent_id: (await nodeNamed(parent)).id };
		if (task) body.task = task;
		return call('POST', `/sessions/${e.sessionId}/nodes`, body);
	}

	await step('server starts (an Anthropic key, an OpenRouter key that reaches nothing, no OpenAI key)', async () => {
		await e.start({ env: serverEnv });
		br = await e.launch({ width: 1280, height: 800 });
		page = br.page;
		page.on('dialog', (d) => {
			nativeDialogs.push(d.message());
			d.dismiss().catch(() => {});
		});
		await page.goto(e.server.loginURL);
		await page.waitForURL(e.server.base + '/', { timeout: T });
	});

	await step('8: the used login link names the server\'s --data in the command it suggests', async () => {
		const p2 = await br.context.newPage();
		await p2.goto(e.server.loginURL);
		const text = await p2.locator('body').textContent();
		assert.match(text, /cannot be used/);
		assert.ok(text.includes(`filepath user login NAME --data ${e.dataDir}`), `the page says: ${text}`);
		await p2.close();
	});

	await step('4: the spawn picker disables the agents that cannot run here, with the reason and the fix', async () => {
		await page.getByRole('button', { name: 'New session' }).first().click();
		await page.locator('#ns-name').fill('e2e-newuser');
		await page.getByRole('button', { name: 'Create and spawn agent' }).click();
		await page.waitForURL(/\/session\/[^/?]+/, { timeout: T });
		e.sessionId = decodeURIComponent(new URL(page.url()).pathname.split('/')[2]);
		const dlg = page.getByRole('dialog', { name: 'Spawn agent' });
		await dlg.waitFor({ timeout: T });
		const pill = (n) => dlg.getByRole('group', { name: 'Agent type' }).getByRole('button', { name: n, exact: true });
		await pill('custom').waitFor({ timeout: T });
		assert.equal(await pill('codex').isDisabled(), true, 'codex without an OpenAI key');
		assert.equal(await pill('cursor').isDisabled(), true, 'cursor without its image');
		assert.equal(await pill('claude-code').isDisabled(), false, 'claude-code with its key and image');
		const off = await dlg.getByTestId('unavailable').textContent();
		assert.match(off, /codex cannot run here: this server has no openai key/);
		assert.match(off, /FILEPATH_OPENAI_API_KEY/);
		assert.match(off, /cursor cannot run here: its image filepath\/agent-cursor:latest is not on this machine/);
		assert.equal(await dlg.getByLabel('Parent').inputValue(), '', 'a new session: a top-level agent');
	});

	await step('8: Escape in the model list closes the list, not the spawn dialog', async () => {
		const dlg = page.getByRole('dialog', { name: 'Spawn agent' });
		await dlg.getByRole('group', { name: 'Agent type' }).getByRole('button', { name: 'shelley', exact: true }).click();
		await dlg.locator('#spawn-model').click();
		const search = dlg.getByLabel('Search models');
		await search.waitFor({ timeout: T });
		assert.equal(await dlg.getByRole('option', { name: /fake\/no-tools/ }).count(), 0);
		await search.press('Escape');
		await search.waitFor({ state: 'detached', timeout: T });
		assert.equal(await dlg.isVisible(), true, 'the dialog stays open');
	});

	await step('spawn the lead (custom, the test agent); no model pill for a custom agent', async () => {
		const dlg = page.getByRole('dialog', { name: 'Spawn agent' });
		await dlg.locator('#spawn-name').fill('lead');
		await dlg.getByRole('group', { name: 'Agent type' }).getByRole('button', { name: 'custom', exact: true }).click();
		await dlg.locator('#spawn-image').fill(AGENT_IMAGE);
		assert.equal(await dlg.locator('#spawn-model').inputValue(), '', 'a custom agent has no model unless given one');
		await dlg.getByRole('button', { name: 'Spawn', exact: true }).click();
		await dlg.waitFor({ state: 'detached', timeout: T });
		await poll(async () => (await header().textContent()) === 'lead', { timeout: T, what: 'lead in the header' });
		assert.equal(await page.getByTestId('model-tag').count(), 0, 'no model pill for a custom agent');
		await poll(async () => (await agentContainersOf(e.sessionId)).length === 1, { timeout: T, what: "the lead's container" });
	});

	await step('1: pausing an agent that said done shows Paused and Resume (also after a reload); a message waits and is answered on resume', async () => {
		await send('echo ready; status done');
		await chat('text').filter({ hasText: /^\s*ready\s*$/ }).waitFor({ timeout: T });
		await poll(async () => (await label().textContent()) === 'Done', { timeout: T, what: 'the header to say Done' });
		const lead = await nodeNamed('lead');
		await page.getByRole('button', { name: 'Pause', exact: true }).click();
		await poll(async () => (await label().textContent()) === 'Paused', { timeout: T, what: 'Paused in the header' });
		await page.getByRole('button', { name: 'Resume', exact: true }).waitFor({ timeout: T });
		assert.equal(await page.getByRole('button', { name: 'Pause', exact: true }).count(), 0);
		await treeRow('lead').locator('.dot[data-status=paused]').waitFor({ timeout: T });
		assert.equal(await containerPaused(lead.container_id), true, 'the container is frozen');
		assert.equal((await nodeNamed('lead')).status, 'paused', 'the API says paused');

		await page.reload();
		await poll(async () => (await label().textContent()) === 'Paused', { timeout: T, what: 'Paused after a reload' });
		await page.getByRole('button', { name: 'Resume', exact: true }).waitFor({ timeout: T });

		await send('echo are you there?');
		await page.getByTestId('paused-note').waitFor({ timeout: T });
		await chat('user').filter({ hasText: 'echo are you there?' }).waitFor({ timeout: T });
		assert.equal(await containerPaused(lead.container_id), true, 'the message did not thaw the agent');
		await page.getByRole('button', { name: 'Resume', exact: true }).click();
		await chat('text').filter({ hasText: /^\s*are you there\?\s*$/ }).waitFor({ timeout: T });
		await poll(async () => (await label().textContent()) !== 'Paused', { timeout: T, what: 'the header to leave Paused' });
		assert.equal(await containerPaused(lead.container_id), false);
	});

	await step('3: stopped, done and lost each have their own look in the tree, the header and the counts', async () => {
		await spawnChild('finisher', AGENT_IMAGE, 'lead', 'done ' + 'finished: wrote the notes, ran the tests, committed, and left the workspace clean for the next agent');
		await spawnChild('stopper', BYO_ECHO, 'lead');
		await treeRow('stopper').waitFor({ timeout: T });
		await treeRow('finisher').locator('.dot[data-status=done]').waitFor({ timeout: T });
		await poll(async () => (await nodeNamed('stopper'))?.status === 'idle', { timeout: T, what: 'stopper started and waiting' });
		await select('stopper');
		await page.getByRole('button', { name: 'Stop', exact: true }).click();
		await poll(async () => (await label().textContent()) === 'Stopped', { timeout: T, what: 'Stopped in the header (byo-echo answers a stop with done)' });
		await treeRow('stopper').locator('.dot[data-status=stopped]').waitFor({ timeout: T });
		const count = treeRow('lead').locator('.count');
		await poll(async () => (await count.textContent())?.trim() === '1/2', { timeout: T, what: 'the lead to count 1/2 done (a stopped child is not done)' });
		assert.match(await count.getAttribute('title'), /1 done, 1 stopped/);

		// lost: the container goes while the server is down; the server finds it gone at its start
		await spawnChild('ghost', AGENT_IMAGE, 'lead', 'echo boo');
		const ghost = await poll(async () => (await nodeNamed('ghost'))?.status === 'running' && (await nodeNamed('ghost')), { timeout: T, what: 'ghost running' });
		const url = new URL(page.url());
		await e.server.stop();
		await run('docker', ['rm', '-f', ghost.container_id]);
		await e.start({ env: serverEnv, login: false });
		await page.goto(e.server.base + url.pathname + url.search);
		await treeRow('ghost').locator('.dot[data-status=lost]').waitFor({ timeout: T });
		await select('ghost');
		await poll(async () => (await label().textContent()) === 'Lost', { timeout: T, what: 'Lost in the header' });
		await poll(async () => (await count.textContent())?.trim() === '1/3', { timeout: T, what: 'the lead to count 1/3' });
		assert.match(await count.getAttribute('title'), /1 done, 1 stopped, 1 failed/);

		const look = (name) =>
			treeRow(name)
				.locator('.dot')
				.evaluate((el) => {
					const s = getComputedStyle(el);
					return [s.color, s.borderRadius, s.backgroundColor, s.borderStyle, el.getAttribute('aria-label')].join('|');
				});
		const looks = await Promise.all(['finisher', 'stopper', 'ghost'].map(look));
		assert.equal(new Set(looks).size, 3, `looks: ${looks.join(' / ')}`);
	});

	await step('8: deleting an agent asks with the app\'s dialog, not the browser\'s', async () => {
		await page.getByRole('button', { name: 'Delete', exact: true }).click();
		const dlg = page.getByRole('dialog', { name: 'Delete ghost' });
		await dlg.waitFor({ timeout: T });
		await dlg.getByRole('button', { name: 'Delete', exact: true }).click();
		await treeRow('ghost').waitFor({ state: 'detached', timeout: T });
		assert.deepEqual(nativeDialogs, []);
	});

	await step('2: the Files tab of a forked agent shows its fork; Merge asks first', async () => {
		await select('lead');
		await page.locator('aside.tree').getByRole('button', { name: 'spawn' }).click();
		const dlg = page.getByRole('dialog', { name: 'Spawn agent' });
		await dlg.locator('#spawn-name').fill('forky');
		await dlg.getByRole('group', { name: 'Agent type' }).getByRole('button', { name: 'custom', exact: true }).click();
		await dlg.locator('#spawn-image').fill(BYO_ECHO);
		assert.equal(await dlg.getByLabel('Parent').inputValue(), (await nodeNamed('lead')).id, 'the selected agent is the parent');
		await dlg.getByRole('radio', { name: 'Fork' }).click();
		await dlg.getByRole('button', { name: 'Spawn', exact: true }).click();
		await dlg.waitFor({ state: 'detached', timeout: T });
		await poll(async () => (await header().textContent()) === 'forky', { timeout: T, what: 'forky in the header' });
		await page.getByTestId('fork-tag').waitFor({ timeout: T });
		await send('/cmd echo from-the-fork > fork-only.txt');
		await chat('command').filter({ hasText: 'fork-only.txt' }).locator('[data-status=done]').waitFor({ timeout: T });

		const entry = (name) => page.locator('.entries .nm', { hasText: new RegExp(`^${name.replace('.', '\\.')}$`) });
		await page.getByRole('tab', { name: 'Files' }).click();
		await entry('fork-only.txt').waitFor({ timeout: T });
		await call('POST', `/sessions/${e.sessionId}/fs/shared-note.txt`, { content: 'on the shared workspace\n', encoding: 'text' });
		await select('lead');
		await page.getByRole('tab', { name: 'Files' }).click();
		await entry('shared-note.txt').waitFor({ timeout: T });
		assert.equal(await entry('fork-only.txt').count(), 0, "the fork's file is not in the session's workspace");

		await select('forky');
		await page.getByRole('tab', { name: 'Changes' }).click();
		await page.getByRole('button', { name: /Merge/ }).click();
		const confirm = page.getByRole('dialog', { name: 'Merge into the parent' });
		await confirm.waitFor({ timeout: T });
		await confirm.getByRole('button', { name: 'Merge', exact: true }).click();
		await page.getByTestId('merge-result').filter({ hasText: /Merged 1 change/ }).waitFor({ timeout: T });
		await page.getByRole('tab', { name: 'Chat' }).click();
	});

	await step('8: a long command reads whole when opened; a pipe into head shows stderr beside its exit 0; Audit reads as text', async () => {
		const long = 'echo ' + 'a-long-argument-'.repeat(14) + 'end';
		await send('/cmd ' + long);
		const block = chat('command').filter({ hasText: 'a-long-argument-' });
		await block.locator('[data-status=done]').waitFor({ timeout: T });
		await block.getByRole('button').first().click();
		assert.equal((await block.getByTestId('full-command').textContent()).trim(), '$ ' + long);

		await send('/cmd nosuchcmd-e2e | head -1');
		const piped = chat('command').filter({ hasText: 'nosuchcmd-e2e' });
		await piped.locator('[data-status=done]').waitFor({ timeout: T });
		assert.match(await piped.locator('.errline').textContent(), /not found/);
		assert.equal((await piped.locator('.exit').textContent()).trim(), 'exit 0');

		await page.getByRole('tab', { name: 'Audit' }).click();
		const row = page.getByTestId('audit-row').filter({ hasText: 'nosuchcmd-e2e' }).first();
		await row.waitFor({ timeout: T });
		const params = await row.locator('td.mono').first().textContent();
		assert.match(params, /^cmd: nosuchcmd-e2e \| head -1/);
		assert.ok(!params.includes('{"'), `raw JSON in the audit: ${params}`);
		await page.getByRole('tab', { name: 'Chat' }).click();
	});

	await step('8: "No health checks" shows once, not again at every restart', async () => {
		await select('stopper');
		await send('hello again');
		await chat('text').filter({ hasText: /^\s*hello again\s*$/ }).waitFor({ timeout: T });
		assert.equal(await chat('check').filter({ hasText: 'No health checks' }).count(), 1);
	});

	await step('4: claude-code gets its catalog model; a start error shows once', async () => {
		await select('lead');
		await page.locator('aside.tree').getByRole('button', { name: 'spawn' }).click();
		const dlg = page.getByRole('dialog', { name: 'Spawn agent' });
		await dlg.locator('#spawn-name').fill('claudy');
		await dlg.getByRole('group', { name: 'Agent type' }).getByRole('button', { name: 'claude-code', exact: true }).click();
		assert.equal(await dlg.locator('#spawn-model').inputValue(), 'claude-sonnet-4-5');
		await dlg.getByRole('button', { name: 'Spawn', exact: true }).click();
		await dlg.waitFor({ state: 'detached', timeout: T });
		await poll(async () => (await header().textContent()) === 'claudy', { timeout: T, what: 'claudy in the header' });
		assert.equal((await page.getByTestId('model-tag').textContent()).trim(), 'claude-sonnet-4-5');
		await page.getByRole('button', { name: 'Stop', exact: true }).click().catch(() => {});

		await spawnChild('broken', 'filepath/no-such-image:e2e', 'lead');
		await select('broken');
		await chat('error').first().waitFor({ timeout: T });
		const box = page.getByRole('textbox', { name: 'Message' });
		await box.fill('are you there?');
		await box.press('Enter');
		await page.getByRole('alert').filter({ hasText: /Not sent: .*no-such-image/ }).waitFor({ timeout: T });
		assert.equal(await chat('error').count(), 1, 'the start error is in the chat once');
	});

	await step('7: a second top-level agent (Parent: none)', async () => {
		await select('broken'); // an agent in error is selected: the dialog offers another parent
		await page.locator('aside.tree').getByRole('button', { name: 'spawn' }).click();
		const dlg = page.getByRole('dialog', { name: 'Spawn agent' });
		await dlg.locator('#spawn-name').fill('second-top');
		await dlg.getByRole('group', { name: 'Agent type' }).getByRole('button', { name: 'custom', exact: true }).click();
		await dlg.locator('#spawn-image').fill(AGENT_IMAGE);
		await dlg.getByTestId('parent-warning').waitFor({ timeout: T });
		await dlg.getByLabel('Parent').selectOption('');
		await dlg.getByRole('button', { name: 'Spawn', exact: true }).click();
		await dlg.waitFor({ state: 'detached', timeout: T });
		await poll(async () => (await header().textContent()) === 'second-top', { timeout: T, what: 'second-top in the header' });
		const tops = await page.locator('ul[role=tree] > li[role=treeitem] > .row .name').allTextContents();
		assert.deepEqual(tops, ['lead', 'second-top']);
		const lead = await nodeNamed('lead');
		const s = await call('GET', `/sessions/${e.sessionId}`);
		assert.equal(s.root_node_id, lead.id, 'root_node_id stays the first top-level agent');
		assert.equal((await nodeNamed('second-top')).parent_id, null);
	});

	await step('8: the final reply is printed once', async () => {
		await send('echo All set: notes written.; done All set: notes written.');
		await chat('done').waitFor({ timeout: T });
		assert.equal(await chat('text').filter({ hasText: 'All set: notes written.' }).count(), 1);
		assert.equal((await chat('done').textContent()).trim(), 'done');
	});

	await step('5: back from the Memory page shows the agent the address names', async () => {
		await select('lead');
		await page.reload(); // the page loads showing lead
		await poll(async () => (await header().textContent()) === 'lead', { timeout: T, what: 'lead after the reload' });
		await select('finisher');
		await poll(async () => new URL(page.url()).searchParams.get('node') === (await nodeNamed('finisher')).id, { timeout: T, what: '?node= to name finisher' });
		await page.getByRole('link', { name: 'Memory' }).click();
		await page.waitForURL(e.server.base + '/memories', { timeout: T });
		await page.goBack();
		await poll(async () => (await header().textContent()) === 'finisher', { timeout: T, what: 'finisher after going back' });
		assert.equal(new URL(page.url()).searchParams.get('node'), (await nodeNamed('finisher')).id);
	});

	await step('6: on a phone: the approvals list is on screen, the header is compact, Delete is named, the name is whole', async () => {
		await page.setViewportSize({ width: 390, height: 844 });
		await page.getByTestId('approvals-badge').click();
		const list = page.getByRole('dialog', { name: 'Approvals' });
		await list.waitFor({ timeout: T });
		const box = await list.boundingBox();
		assert.ok(box.x >= 0 && box.x + box.width <= 390, `the approvals list spans ${box.x}..${box.x + box.width}`);
		await page.getByTestId('approvals-badge').click();

		const name = page.locator('.topbar .session');
		assert.equal(await name.evaluate((el) => el.scrollWidth <= el.clientWidth), true, `the session name is cut: ${await name.evaluate((el) => `${el.scrollWidth} > ${el.clientWidth}`)}`);

		await select('lead');
		const head = await page.locator('section.panel header.head').boundingBox();
		assert.ok(head.height <= 844 / 6, `the header is ${head.height}px tall`);
		const tops = await page.locator('[data-testid=tools] button:visible').evaluateAll((els) => els.map((el) => Math.round(el.getBoundingClientRect().top)));
		assert.equal(new Set(tops).size, 1, `the tabs wrap: ${tops}`);
		assert.equal(await page.getByRole('button', { name: 'Delete', exact: true }).isVisible(), false, 'no bare Delete icon');
		await page.getByRole('button', { name: 'Actions' }).click();
		const del = page.getByRole('menuitem', { name: 'Delete…' });
		await del.waitFor({ timeout: T });
		assert.equal((await del.textContent()).trim(), 'Delete…');
		await page.getByRole('menuitem', { name: 'Stop' }).waitFor({ timeout: T });
		await page.getByRole('button', { name: 'Actions' }).click({ force: true });
		await del.waitFor({ state: 'detached', timeout: T });
	});

	await step('6: on a phone: a chat opens at its end, above the composer; the done line keeps its icon beside its text', async () => {
		const scroller = page.getByTestId('chat-scroll');
		await poll(() => scroller.evaluate((el) => el.scrollHeight - el.scrollTop - el.clientHeight <= 2), { timeout: T, what: 'the chat at its end' });
		const last = await page.locator('[data-testid=chat-scroll] .item').last().boundingBox();
		const composer = await page.getByRole('textbox', { name: 'Message' }).boundingBox();
		assert.ok(last.y + last.height <= composer.y, `the last message (bottom ${last.y + last.height}) is under the composer (top ${composer.y})`);

		await select('finisher');
		const done = chat('done').locator('.event');
		await done.waitFor({ timeout: T });
		const icon = await done.locator('svg').boundingBox();
		const text = await done.locator(':scope > span').boundingBox();
		assert.ok(Math.abs(icon.y - text.y) < 8 && icon.x < text.x, `icon at ${icon.x},${icon.y}; text at ${text.x},${text.y}`);
		assert.ok(text.height > 20, 'the summary wraps (the case that broke)');
	});

	await step('8: no agent selection asked for a diff it cannot have (no 404s in the console); no page errors', async () => {
		// \b: a 404 status, not those digits inside a session id or a port in a message
		const bad = br.errors.filter((m) => m.startsWith('pageerror') || /\b404\b/.test(m));
		assert.deepEqual(bad, []);
	});
});
