// End-to-end, files in the chat (issue 25): a spreadsheet attached in the chat of a real native
// agent (shelley, in its container) whose model is a scripted fake provider on loopback: the agent
// reads column B with the format tier's spreadsheet tools and writes the sum into B5; the chat
// shows the attachment and a download card for the changed file, which serves the new bytes; the
// Files tab previews the workbook as a grid. The real binary, Docker, headless Chromium.
//   cd web && npm run e2e
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { e2eRun, newSession, poll, requirements } from './lib.mjs';
import { startFakeLLM } from './fakellm.mjs';

const T = 30_000;
const IMAGE = 'filepath/agent-shelley:latest';
const SHEET = path.join(path.dirname(fileURLToPath(import.meta.url)), 'testdata', 'sales.xlsx');
const req = await requirements({ image: IMAGE });

// The fake model: read B2:B4, then write their sum into B5, then say it. Each step follows the
// tool results the agent sent back, so the sum is what the agent read.
function script(messages) {
	const tools = messages.filter((m) => m.role === 'tool');
	const user = messages.filter((m) => m.role === 'user').map((m) => (typeof m.content === 'string' ? m.content : JSON.stringify(m.content))).join('\n');
	const at = user.match(/\/workspace(\/uploads\/[^\s)]+\.xlsx)/);
	if (!at) return { text: 'I see no spreadsheet attached.' };
	const id = at[1];
	if (tools.length === 0) return { tool: { name: 'spreadsheet_read_range', args: { id, range: 'B2:B4' } } };
	if (tools.length === 1) {
		const read = JSON.parse(tools[0].content);
		const sum = read.values.flat().reduce((a, v) => a + Number(v), 0);
		return { tool: { name: 'spreadsheet_write_cell', args: { id, cell: 'B5', value: sum } } };
	}
	const wrote = tools[1].content;
	const sum = JSON.parse(messages.findLast((m) => m.role === 'assistant' && m.tool_calls)?.tool_calls[0].function.arguments ?? '{}').value;
	return { text: wrote.includes('"error"') ? `Writing failed: ${wrote}` : `The sum of column B is ${sum}; I wrote it to B5.` };
}

test('a spreadsheet attached in the chat, summed by a native agent, downloaded from its card', { skip: req.skip, timeout: 300_000 }, async (t) => {
	if (req.__fail) assert.fail(`CI=true and the end-to-end test cannot run: ${req.__fail}`);
	const llm = await startFakeLLM(script);
	t.after(() => llm.close());
	const run = await e2eRun(t, 'fp-e2e-files-');
	const server = await run.start({ env: { FILEPATH_OPENROUTER_BASE_URL: llm.url, FILEPATH_OPENROUTER_API_KEY: 'sk-or-e2e-test' } });
	const a = await run.launch({ width: 1280, height: 860 });
	const page = a.page;
	const chat = (kind) => page.locator(`[data-testid=chat-scroll] .item[data-kind=${kind}]`);

	await page.goto(server.loginURL);
	await page.getByRole('heading', { name: 'Sessions' }).waitFor({ timeout: T });
	const sessionId = (run.sessionId = await newSession(page, 'e2e-files', { timeout: T }));
	const dlg = page.getByRole('dialog', { name: 'Spawn agent' });
	await dlg.locator('#spawn-name').fill('analyst');
	await dlg.getByRole('group', { name: 'Agent type' }).getByRole('button', { name: 'shelley', exact: true }).click();
	await dlg.getByRole('button', { name: 'Spawn', exact: true }).click();
	await dlg.waitFor({ state: 'detached', timeout: T });

	// Attach: the file uploads at once (its chip shows the size when done), then the message goes.
	await page.getByTestId('attach-input').setInputFiles(SHEET);
	const chip = page.getByTestId('attachment').filter({ hasText: 'sales.xlsx' });
	await chip.waitFor({ timeout: T });
	await poll(async () => !(await chip.textContent()).includes('%'), { timeout: T, what: 'the upload to finish' });
	assert.ok(!(await chip.textContent()).includes('failed'), `the upload failed: ${await page.locator('.chat-input .error-text').allTextContents()}`);
	const box = page.getByRole('textbox', { name: 'Message' });
	await box.fill('Sum column B into B5');
	await box.press('Enter');
	await poll(async () => (await page.getByTestId('attachment').count()) === 0, { timeout: T, what: 'the message to be sent' });

	// The user's message shows the file; the agent reads the column, writes the sum, and says it.
	await chat('user').getByTestId('attached-file').filter({ hasText: 'sales.xlsx' }).waitFor({ timeout: T });
	const answer = chat('text').filter({ hasText: 'The sum of column B is' });
	await answer.waitFor({ timeout: 120_000 });
	assert.match(await answer.textContent(), /The sum of column B is 600; I wrote it to B5\./);
	const first = llm.requests[0].messages.map((m) => (typeof m.content === 'string' ? m.content : '')).join('\n');
	assert.match(first, /Sum column B into B5\n\nAttached file \(in your workspace\):\n- \/workspace\/uploads\/sales\.xlsx \([\d.]+ KB, application\/vnd\.openxmlformats-officedocument\.spreadsheetml\.sheet\)/);

	// The changed file's card downloads the new bytes: a second reader (the server's own
	// spreadsheet tool) finds the sum in B5 of the same file.
	const card = chat('files').getByTestId('file-card').filter({ hasText: 'sales.xlsx' });
	await card.waitFor({ timeout: T });
	assert.match(await card.textContent(), /changed · Excel workbook · [\d.]+ KB/);
	assert.match(await card.textContent(), /in \/uploads/);
	const href = await card.getByRole('link', { name: 'Download sales.xlsx' }).getAttribute('href');
	const dl = await page.request.get(new URL(href, server.base).href);
	assert.equal(dl.status(), 200);
	const bytes = await dl.body();
	const tree = await run.api('GET', `/sessions/${sessionId}/tree`);
	const node = tree.data.find((n) => n.name === 'analyst');
	const info = await run.api('POST', `/sessions/${sessionId}/nodes/${node.id}/fs/_/info`, { id: '/uploads/sales.xlsx' });
	assert.equal(bytes.length, info.size_bytes, 'the card serves the file as it is now');
	const cell = await run.api('POST', `/sessions/${sessionId}/nodes/${node.id}/fs/_/spreadsheet_read_cell`, { id: '/uploads/sales.xlsx', cell: 'B5' });
	assert.equal(String(cell.value), '600');
	await page.screenshot({ path: new URL('../../docs/screenshots/files-chat.png', import.meta.url).pathname });

	// The Files tab previews the workbook as a grid, with the type detected from its content.
	await page.getByRole('tab', { name: 'Files' }).click();
	await page.getByRole('button', { name: /^uploads/ }).click();
	await page.getByRole('button', { name: /^sales\.xlsx/ }).click();
	const grid = page.getByRole('table', { name: /^Sheet / });
	await grid.waitFor({ timeout: T });
	assert.match(await page.getByTestId('mime').textContent(), /spreadsheetml/);
	assert.match(await grid.textContent(), /north/);
	await page.screenshot({ path: new URL('../../docs/screenshots/files-preview.png', import.meta.url).pathname });
	const errs = a.errors.filter((e) => e.startsWith('pageerror'));
	assert.deepEqual(errs, []);
});
