import { fireEvent, render, screen, waitFor, within } from '@testing-library/svelte';
import { afterEach, describe, expect, it, vi } from 'vitest';
import FilesPanel from './FilesPanel.svelte';
import { CONFLICT_MESSAGE } from './FileViewer.svelte';
import { FakeFS } from './fakefs';
import { createFileFeed, fsURL, formatSize, sortEntries, validateName, type FsEntry } from '$lib/files';
import type { LogRecord } from '$lib/types';

let seq = 0;
function fileRec(op: 'created' | 'modified' | 'deleted', path: string, size = 1): LogRecord {
	return { seq: ++seq, kind: 'file', node_id: 'n1', at: '2026-01-01T00:00:01Z', data: { op, path, size } };
}

function setup(fs: FakeFS, extra: Record<string, unknown> = {}) {
	fs.install();
	const feed = createFileFeed();
	const r = render(FilesPanel, { sessionId: 's1', feed, debounceMs: 0, ...extra });
	return { ...r, feed, fs };
}

const rows = () => within(screen.getByRole('list', { name: /^Contents of/ })).getAllByRole('listitem');
const names = () => rows().map((li) => li.querySelector('.nm')!.textContent);

async function openFile(name: string) {
	await fireEvent.click(await screen.findByRole('button', { name: new RegExp(`^${name}`) }));
	return (await screen.findByLabelText(`Contents of ${name}`)) as HTMLTextAreaElement;
}

describe('files helpers', () => {
	it.each([
		{ name: 'empty', in: '', dir: '/', bad: true },
		{ name: 'slash', in: 'a/b', dir: '/', bad: true },
		{ name: 'dot dot', in: '..', dir: '/x', bad: true },
		{ name: 'reserved at root', in: '_tmp', dir: '/', bad: true },
		{ name: 'underscore below root', in: '_tmp', dir: '/src', bad: false },
		{ name: 'plain', in: 'notes.md', dir: '/', bad: false }
	])('validateName $name', (c) => {
		expect(validateName(c.in, c.dir) !== null).toBe(c.bad);
	});

	it('encodes each path segment and sorts directories first', () => {
		expect(fsURL('s 1', '/a b/c#d.txt')).toBe('/sessions/s%201/fs/a%20b/c%23d.txt');
		expect(fsURL('s1', '/')).toBe('/sessions/s1/fs');
		const e = (name: string, dir = false) => ({ name, is_directory: dir }) as FsEntry;
		expect(sortEntries([e('b.txt'), e('Zed', true), e('a10'), e('a2'), e('src', true)]).map((x) => x.name)).toEqual([
			'src',
			'Zed',
			'a2',
			'a10',
			'b.txt'
		]);
		expect(formatSize(0)).toBe('0 B');
		expect(formatSize(1536)).toBe('1.5 KB');
		expect(formatSize(50 * 1024 * 1024)).toBe('50 MB');
	});
});

describe('FilesPanel', () => {
	afterEach(() => vi.unstubAllGlobals());

	it('lists the root with folders first and navigates with rows and breadcrumbs', async () => {
		setup(new FakeFS({ '/zeta.txt': 'z', '/src/main.go': 'package main', '/alpha.md': '# a', '/docs': { dir: true } }));
		await waitFor(() => expect(names()).toEqual(['docs/', 'src/', 'alpha.md', 'zeta.txt']));
		expect(rows()[2].textContent).toContain('3 B');

		await fireEvent.click(screen.getByRole('button', { name: /^src/ }));
		await waitFor(() => expect(names()).toEqual(['main.go']));
		const crumbs = screen.getByRole('navigation', { name: 'Folder path' });
		expect(within(crumbs).getByRole('button', { name: 'src' }).getAttribute('aria-current')).toBe('page');

		await fireEvent.click(within(crumbs).getByRole('button', { name: /workspace/ }));
		await waitFor(() => expect(names()).toContain('alpha.md'));
	});

	it('opens a text file, edits it and saves with If-Match', async () => {
		const { fs } = setup(new FakeFS({ '/notes.md': 'hello' }));
		const ta = await openFile('notes.md');
		expect(ta.value).toBe('hello');
		const before = fs.hash('/notes.md');

		await fireEvent.input(ta, { target: { value: 'hello world' } });
		expect(screen.getByText('● unsaved')).toBeTruthy();
		await fireEvent.click(screen.getByRole('button', { name: /^Save/ }));

		await waitFor(() => expect(fs.callsOf('PUT')).toHaveLength(1));
		const put = fs.callsOf('PUT')[0];
		expect(put.path).toBe('/notes.md');
		expect(put.headers['If-Match']).toBe(`"${before}"`);
		expect(put.body).toEqual({ content: 'hello world', encoding: 'text' });
		await waitFor(() => expect(screen.queryByText('● unsaved')).toBeNull());
		expect(fs.nodes.get('/notes.md')!.content).toBe('hello world');

		// a second save is based on the new hash
		const saved = fs.hash('/notes.md');
		await fireEvent.input(ta, { target: { value: 'v3' } });
		await fireEvent.keyDown(ta, { key: 's', ctrlKey: true });
		await waitFor(() => expect(fs.callsOf('PUT')).toHaveLength(2));
		expect(fs.callsOf('PUT')[1].headers['If-Match']).toBe(`"${saved}"`);
		await waitFor(() => expect(fs.nodes.get('/notes.md')!.content).toBe('v3'));
	});

	it('shows the conflict message on 412, keeps the text, and keeps it again after a reload', async () => {
		const { fs } = setup(new FakeFS({ '/a.txt': 'one' }));
		const ta = await openFile('a.txt');
		await fireEvent.input(ta, { target: { value: 'my edits' } });
		fs.put('/a.txt', 'theirs'); // someone else writes meanwhile

		await fireEvent.click(screen.getByRole('button', { name: /^Save/ }));
		expect((await screen.findByRole('alert')).textContent).toContain(CONFLICT_MESSAGE);
		expect(ta.value).toBe('my edits');
		expect(fs.nodes.get('/a.txt')!.content).toBe('theirs');

		await fireEvent.click(screen.getByRole('button', { name: /Reload/ }));
		await waitFor(() => expect((screen.getByLabelText('Contents of a.txt') as HTMLTextAreaElement).value).toBe('theirs'));
		expect((screen.getByLabelText('Your unsaved edits') as HTMLTextAreaElement).value).toBe('my edits');
		expect(screen.queryByText(CONFLICT_MESSAGE)).toBeNull();

		await fireEvent.click(screen.getByRole('button', { name: 'Use my edits' }));
		expect((screen.getByLabelText('Contents of a.txt') as HTMLTextAreaElement).value).toBe('my edits');
		await fireEvent.click(screen.getByRole('button', { name: /^Save/ }));
		await waitFor(() => expect(fs.nodes.get('/a.txt')!.content).toBe('my edits'));
	});

	it('shows read-only files view-only with a badge', async () => {
		setup(new FakeFS({ '/LOCK': { content: 'fixed', readonly: true } }));
		const ta = await openFile('LOCK');
		expect(ta.readOnly).toBe(true);
		expect(screen.getByRole('region', { name: 'File LOCK' }).textContent).toContain('read-only');
		expect(screen.queryByRole('button', { name: /^Save/ })).toBeNull();
	});

	it('shows binary files as size, the type detected from the content and a download link', async () => {
		const fs = new FakeFS({ '/logo.dat': { content: 'AAECAwQFBgcICQoL', base64: true } });
		fs.mimes.set('/logo.dat', 'application/octet-stream');
		setup(fs);
		await fireEvent.click(await screen.findByRole('button', { name: /^logo.dat/ }));
		const info = await screen.findByTestId('binary-info');
		await waitFor(() => expect(info.textContent).toContain('application/octet-stream'));
		expect(info.textContent).toContain('12 B');
		expect(screen.getByTestId('mime').textContent).toBe('application/octet-stream');
		const a = within(info).getByRole('link', { name: /Download/ });
		expect(a.getAttribute('href')).toBe('/api/v1/sessions/s1/fs/logo.dat?download=true');
		expect(screen.queryByLabelText('Contents of logo.dat')).toBeNull();
	});

	it('previews by the detected type, not the name: an image, a PDF, a spreadsheet', async () => {
		const fs = new FakeFS({
			'/shot.txt': { content: 'iVBORw0KGgoAAAA=', base64: true },
			'/report.pdf': { content: 'JVBERi0=', base64: true },
			'/sales.xlsx': { content: 'UEsDBA==', base64: true }
		});
		fs.mimes.set('/shot.txt', 'image/png');
		fs.mimes.set('/report.pdf', 'application/pdf');
		fs.mimes.set('/sales.xlsx', 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet');
		fs.tools.set('pdf_info', () => ({ id: '/report.pdf', pages: 3, title: 'Q3 report', page_sizes: [] }));
		fs.tools.set('pdf_extract_text', (a) => ({ id: a.id, total_pages: 3, pages: [{ page: 1, text: 'Revenue grew 12%' }] }));
		fs.tools.set('spreadsheet_get_sheet_summary', (a) => ({
			id: a.id,
			sheet: (a.sheet as string) ?? 'Sales',
			sheets: ['Sales', 'Costs'],
			rows: 40,
			cols: 2,
			headers: ['region', 'total'],
			first_rows: a.sheet === 'Costs' ? [['rent', '900']] : [['north', '120'], ['south', '80']]
		}));
		setup(fs);

		await fireEvent.click(await screen.findByRole('button', { name: /^shot.txt/ }));
		const img = (await screen.findByRole('img', { name: 'shot.txt' })) as HTMLImageElement;
		expect(img.getAttribute('src')).toBe('/api/v1/sessions/s1/fs/_/thumbnail?path=%2Fshot.txt&size=1024');

		await fireEvent.click(screen.getByRole('button', { name: /^report.pdf/ }));
		await waitFor(() => expect(screen.getByTestId('file-preview').textContent).toContain('3 pages'));
		expect(screen.getByTestId('file-preview').textContent).toContain('Q3 report');
		expect(screen.getByTestId('pdf-text').textContent).toBe('Revenue grew 12%');

		await fireEvent.click(screen.getByRole('button', { name: /^sales.xlsx/ }));
		const table = await screen.findByRole('table', { name: 'Sheet Sales' });
		const cells = () => Array.from(screen.getByRole('table').querySelectorAll('tbody tr')).map((tr) => Array.from(tr.children).map((c) => c.textContent));
		expect(Array.from(table.querySelectorAll('thead th')).map((th) => th.textContent)).toEqual(['', 'region', 'total']);
		expect(cells()).toEqual([['2', 'north', '120'], ['3', 'south', '80']]);
		expect(screen.getByTestId('file-preview').textContent).toContain('40 rows × 2 columns');
		await fireEvent.click(screen.getByRole('tab', { name: 'Costs' }));
		await screen.findByRole('table', { name: 'Sheet Costs' });
		expect(cells()).toEqual([['2', 'rent', '900']]);
		expect(fs.callsOf('POST', '/_/spreadsheet_get_sheet_summary').at(-1)!.body).toMatchObject({ id: '/sales.xlsx', sheet: 'Costs' });
	});

	it('says why there is no preview when the server cannot read the file', async () => {
		const fs = new FakeFS({ '/bad.pdf': { content: 'AAAA', base64: true } });
		fs.mimes.set('/bad.pdf', 'application/pdf');
		fs.failures.push({ method: 'POST', path: '/_/pdf_info', status: 422, code: 'invalid', message: 'bad.pdf is not a readable PDF: no xref table' });
		setup(fs);
		await fireEvent.click(await screen.findByRole('button', { name: /^bad.pdf/ }));
		await waitFor(() => expect(screen.getByRole('alert').textContent).toContain('No preview of bad.pdf: bad.pdf is not a readable PDF: no xref table'));
		expect(within(screen.getByTestId('file-preview')).getByRole('link', { name: /Download/ })).toBeTruthy();
	});

	it('creates a folder and a file, validating names and showing API errors', async () => {
		const { fs } = setup(new FakeFS({ '/taken.txt': 'x' }));
		await screen.findByRole('button', { name: /^taken.txt/ });

		await fireEvent.click(screen.getByRole('button', { name: 'New folder' }));
		const input = screen.getByLabelText('Name') as HTMLInputElement;
		expect(document.activeElement).toBe(input);
		await fireEvent.input(input, { target: { value: 'a/b' } });
		expect(screen.getByText('A name cannot contain "/".')).toBeTruthy();
		expect((screen.getByRole('button', { name: 'Create folder' }) as HTMLButtonElement).disabled).toBe(true);
		await fireEvent.input(input, { target: { value: '_tmp' } });
		expect(screen.getByText(/reserved at the top level/)).toBeTruthy();
		await fireEvent.input(input, { target: { value: 'src' } });
		await fireEvent.click(screen.getByRole('button', { name: 'Create folder' }));
		await waitFor(() => expect(screen.queryByRole('dialog')).toBeNull());
		expect(fs.callsOf('POST', '/src')[0].body).toEqual({ is_directory: true });
		await waitFor(() => expect(names()).toEqual(['src/', 'taken.txt']));

		await fireEvent.click(screen.getByRole('button', { name: 'New file' }));
		await fireEvent.input(screen.getByLabelText('Name'), { target: { value: 'taken.txt' } });
		await fireEvent.click(screen.getByRole('button', { name: 'Create file' }));
		expect((await screen.findByRole('alert')).textContent).toBe('Could not create taken.txt: /taken.txt already exists');
		expect(screen.getByRole('dialog')).toBeTruthy();

		await fireEvent.input(screen.getByLabelText('Name'), { target: { value: 'new.md' } });
		await fireEvent.click(screen.getByRole('button', { name: 'Create file' }));
		await waitFor(() => expect(screen.queryByRole('dialog')).toBeNull());
		expect(fs.callsOf('POST', '/new.md')[0].body).toEqual({ content: '', encoding: 'text' });
		expect(await screen.findByLabelText('Contents of new.md')).toBeTruthy();
		expect(names()).toEqual(['src/', 'new.md', 'taken.txt']);
	});

	it('confirms before deleting; folders are deleted recursively', async () => {
		const { fs } = setup(new FakeFS({ '/src/a.go': 'a', '/b.txt': 'b' }));
		await fireEvent.click(await screen.findByRole('button', { name: 'Delete src' }));
		const dlg = screen.getByRole('dialog', { name: 'Delete folder' });
		expect(dlg.textContent).toContain('Delete folder src and everything in it?');
		await fireEvent.click(within(dlg).getByRole('button', { name: 'Cancel' }));
		expect(fs.callsOf('DELETE')).toHaveLength(0);

		await fireEvent.click(screen.getByRole('button', { name: 'Delete src' }));
		await fireEvent.click(within(screen.getByRole('dialog')).getByRole('button', { name: 'Delete' }));
		await waitFor(() => expect(names()).toEqual(['b.txt']));
		expect(fs.callsOf('DELETE')[0]).toMatchObject({ path: '/src', query: '?recursive=true' });

		await fireEvent.click(screen.getByRole('button', { name: 'Delete b.txt' }));
		expect(screen.getByRole('dialog', { name: 'Delete file' }).textContent).toContain('Delete b.txt?');
		await fireEvent.click(within(screen.getByRole('dialog')).getByRole('button', { name: 'Delete' }));
		await waitFor(() => expect(screen.getByText('The workspace is empty.')).toBeTruthy());
		expect(fs.callsOf('DELETE')[1]).toMatchObject({ path: '/b.txt', query: '' });
	});

	it('uploads chosen files as raw octet-stream bytes and shows each failure', async () => {
		const fs = new FakeFS({ '/dir': { dir: true } });
		fs.failures.push({ method: 'POST', path: '/dir/big.bin', status: 413, code: 'too_large', message: 'file exceeds the 50 MiB per-file limit' });
		setup(fs, { path: '/dir' });
		await screen.findByText('This folder is empty.');

		const input = screen.getByTestId('upload-input') as HTMLInputElement;
		const files = [new File(['hi there'], 'hello.txt'), new File(['x'], 'big.bin')];
		Object.defineProperty(input, 'files', { value: files, configurable: true });
		await fireEvent.change(input);

		await waitFor(() => expect(names()).toEqual(['hello.txt']));
		const post = fs.callsOf('POST', '/dir/hello.txt')[0];
		expect(post.headers['Content-Type']).toBe('application/octet-stream');
		expect(post.body).toBe(files[0]);
		expect(fs.nodes.get('/dir/hello.txt')!.content).toBe('hi there');
		expect(screen.getByRole('alert').textContent!.trim()).toBe('Could not upload big.bin: file exceeds the 50 MiB per-file limit');
		await fireEvent.click(screen.getByRole('button', { name: 'Dismiss' }));
		expect(screen.queryByRole('alert')).toBeNull();
	});

	it('uploads a folder with everything in it, with one progress row for the batch', async () => {
		const fs = new FakeFS({});
		let release!: () => void;
		const gate = new Promise<void>((r) => (release = r));
		const handle = fs.handle.bind(fs);
		fs.handle = async (input, init) => {
			if (init.method === 'POST') await gate; // the uploads wait; the listing does not
			return handle(input, init);
		};
		setup(fs);
		await screen.findByText('The workspace is empty.');
		const input = screen.getByTestId('upload-folder-input') as HTMLInputElement;
		const mk = (body: string, rel: string) => {
			const f = new File([body], rel.split('/').pop()!);
			Object.defineProperty(f, 'webkitRelativePath', { value: rel });
			return f;
		};
		const files = [mk('a', 'site/index.html'), mk('bb', 'site/css/main.css'), mk('ccc', 'site/img/x.svg')];
		Object.defineProperty(input, 'files', { value: files, configurable: true });
		await fireEvent.change(input);
		const row = await screen.findByRole('status');
		// every byte sent, no answer yet: the bar is full, no file is done
		await waitFor(() => expect(row.textContent).toMatch(/Uploading 0 of 3 files · 6 B of 6 B/));
		expect(screen.getByRole('progressbar', { name: 'Upload progress' }).getAttribute('aria-valuenow')).toBe('100');
		release();
		await waitFor(() => expect(names()).toEqual(['site/']));
		expect(screen.queryByRole('status')).toBeNull();
		expect(fs.nodes.get('/site/css/main.css')!.content).toBe('bb');
		expect(fs.nodes.get('/site/img/x.svg')!.content).toBe('ccc');
	});

	it('uploads files dropped onto the panel', async () => {
		const { fs } = setup(new FakeFS({}));
		await screen.findByText('The workspace is empty.');
		const panel = screen.getByRole('region', { name: 'Files' });
		const file = new File(['dropped'], 'drop.txt');
		const dataTransfer = { types: ['Files'], files: [file], dropEffect: 'none' };
		await fireEvent.dragEnter(panel, { dataTransfer });
		expect(screen.getByText('Drop to upload to /')).toBeTruthy();
		await fireEvent.drop(panel, { dataTransfer });
		await waitFor(() => expect(names()).toEqual(['drop.txt']));
		expect(screen.queryByText('Drop to upload to /')).toBeNull();
		expect(fs.callsOf('POST', '/drop.txt')[0].headers['Content-Type']).toBe('application/octet-stream');
	});

	it('refreshes the listing when a file record touches the current folder', async () => {
		const { fs, feed } = setup(new FakeFS({ '/a.txt': 'a', '/other/x': 'x' }));
		await waitFor(() => expect(names()).toEqual(['other/', 'a.txt']));
		await fireEvent.click(screen.getByRole('button', { name: /^other/ }));
		await waitFor(() => expect(names()).toEqual(['x']));
		const lists = () => fs.callsOf('GET').length;

		const n = lists();
		fs.put('/b.txt', 'b');
		feed.push(fileRec('created', '/b.txt')); // another folder: no refresh
		feed.push({ seq: ++seq, kind: 'event', node_id: 'n1', at: '', data: { type: 'text', content: 'hi' } } as LogRecord);
		fs.put('/other/y', 'yy');
		feed.push(fileRec('created', '/other/y'));
		feed.push(fileRec('modified', '/other/y')); // a burst: one refresh
		await waitFor(() => expect(names()).toEqual(['x', 'y']));
		expect(lists()).toBe(n + 1);
		expect(fs.callsOf('GET').at(-1)!.path).toBe('/other');
	});

	it('follows changes to the open file: reloads a clean buffer, warns over unsaved edits', async () => {
		const { fs, feed } = setup(new FakeFS({ '/f.txt': 'v1' }));
		const ta = await openFile('f.txt');

		fs.put('/f.txt', 'v2');
		feed.push(fileRec('modified', '/f.txt'));
		await waitFor(() => expect(ta.value).toBe('v2'));
		expect(screen.getByRole('status').textContent).toContain('changed on disk');

		await fireEvent.input(ta, { target: { value: 'mine' } });
		fs.put('/f.txt', 'v3');
		feed.push(fileRec('modified', '/f.txt'));
		expect((await screen.findByRole('alert')).textContent).toContain('Changed on disk — reload');
		expect(ta.value).toBe('mine');

		// our own save does not count as someone else's change
		await fireEvent.click(screen.getByRole('button', { name: /Reload/ }));
		const ed = screen.getByLabelText('Contents of f.txt') as HTMLTextAreaElement;
		await waitFor(() => expect(ed.value).toBe('v3'));
		await fireEvent.input(ed, { target: { value: 'v4' } });
		await fireEvent.click(screen.getByRole('button', { name: /^Save/ }));
		await waitFor(() => expect(fs.nodes.get('/f.txt')!.content).toBe('v4'));
		const stats = fs.callsOf('POST', '/_/stat').length;
		feed.push(fileRec('modified', '/f.txt'));
		await waitFor(() => expect(fs.callsOf('POST', '/_/stat').length).toBe(stats + 1));
		expect(screen.queryByText(/Changed on disk/)).toBeNull();

		feed.push(fileRec('deleted', '/f.txt'));
		expect((await screen.findByRole('alert')).textContent).toContain('deleted on disk');
	});

	it('asks before dropping unsaved edits when another file is opened or the file is closed', async () => {
		const confirmDiscard = vi.fn().mockReturnValue(false);
		setup(new FakeFS({ '/a.txt': 'a', '/b.txt': 'b' }), { confirmDiscard });
		const ta = await openFile('a.txt');
		await fireEvent.click(screen.getByRole('button', { name: /^b.txt/ })); // clean: no question
		expect(confirmDiscard).not.toHaveBeenCalled();
		const tb = await screen.findByLabelText('Contents of b.txt');
		expect(ta.isConnected).toBe(false);

		await fireEvent.input(tb, { target: { value: 'draft' } });
		await fireEvent.click(screen.getByRole('button', { name: /^a.txt/ }));
		expect(confirmDiscard).toHaveBeenCalledWith('Discard your unsaved changes to b.txt?');
		expect((screen.getByLabelText('Contents of b.txt') as HTMLTextAreaElement).value).toBe('draft');
		await fireEvent.click(screen.getByRole('button', { name: 'Close file' }));
		expect(screen.getByLabelText('Contents of b.txt')).toBeTruthy();

		confirmDiscard.mockReturnValue(true);
		await fireEvent.click(screen.getByRole('button', { name: 'Close file' }));
		expect(screen.queryByLabelText('Contents of b.txt')).toBeNull();
	});

	it('moves between rows with the keyboard and goes up with Backspace', async () => {
		setup(new FakeFS({ '/d/x': 'x', '/d/y': 'y' }), { path: '/d' });
		const x = await screen.findByRole('button', { name: /^x/ });
		x.focus();
		await fireEvent.keyDown(x, { key: 'ArrowDown' });
		expect(document.activeElement).toBe(screen.getByRole('button', { name: /^y/ }));
		await fireEvent.keyDown(document.activeElement!, { key: 'Home' });
		expect(document.activeElement).toBe(x);
		await fireEvent.keyDown(x, { key: 'Delete' });
		expect(screen.getByRole('dialog', { name: 'Delete file' }).textContent).toContain('Delete x?');
		await fireEvent.click(screen.getByRole('button', { name: 'Cancel' }));
		await fireEvent.keyDown(screen.getByRole('button', { name: /^y/ }), { key: 'Backspace' });
		await waitFor(() => expect(names()).toEqual(['d/']));
	});

	it('renames, moves and copies an entry through one dialog; the open file follows', async () => {
		const { fs } = setup(new FakeFS({ '/notes.md': 'hi', '/taken.md': 't', '/src/a.go': 'a' }));
		await openFile('notes.md');
		await fireEvent.click(screen.getByRole('button', { name: 'Rename, move or copy notes.md' }));
		const dlg = screen.getByRole('dialog', { name: 'Rename, move or copy notes.md' });
		const input = within(dlg).getByLabelText('New path') as HTMLInputElement;
		expect(document.activeElement).toBe(input);
		expect(input.value.slice(input.selectionStart!, input.selectionEnd!)).toBe('notes');
		expect(within(dlg).getByRole('button', { name: 'Rename' })).toBeTruthy();

		await fireEvent.input(input, { target: { value: '/a/../b.md' } });
		expect(within(dlg).getByText('".." is not a valid name.')).toBeTruthy();
		await fireEvent.input(input, { target: { value: '/taken.md' } });
		await fireEvent.click(within(dlg).getByRole('button', { name: 'Rename' }));
		expect((await within(dlg).findByRole('alert')).textContent).toBe('Could not rename notes.md: /taken.md already exists');

		await fireEvent.input(input, { target: { value: '/ideas.md' } });
		await fireEvent.click(within(dlg).getByRole('button', { name: 'Rename' }));
		await waitFor(() => expect(screen.queryByRole('dialog')).toBeNull());
		expect(fs.callsOf('POST', '/_/move')[1].body).toEqual({ src_path: '/notes.md', dst_path: '/ideas.md' });
		await waitFor(() => expect(names()).toEqual(['src/', 'ideas.md', 'taken.md']));
		expect(((await screen.findByLabelText('Contents of ideas.md')) as HTMLTextAreaElement).value).toBe('hi');

		// Move into a folder that does not exist yet (the API creates it); the label says Move.
		await fireEvent.keyDown(screen.getByRole('button', { name: /^ideas.md/ }), { key: 'F2' });
		const dlg2 = screen.getByRole('dialog');
		await fireEvent.input(within(dlg2).getByLabelText('New path'), { target: { value: '/archive/ideas.md' } });
		await fireEvent.click(within(dlg2).getByRole('button', { name: 'Move' }));
		await waitFor(() => expect(names()).toEqual(['archive/', 'src/', 'taken.md']));
		expect(fs.nodes.get('/archive/ideas.md')?.content).toBe('hi');

		// Copy a folder with what it holds.
		await fireEvent.click(screen.getByRole('button', { name: 'Rename, move or copy src' }));
		const dlg3 = screen.getByRole('dialog');
		await fireEvent.input(within(dlg3).getByLabelText('New path'), { target: { value: '/src/inner' } });
		expect(within(dlg3).getByText('A folder cannot go inside itself.')).toBeTruthy();
		await fireEvent.input(within(dlg3).getByLabelText('New path'), { target: { value: '/src2' } });
		await fireEvent.click(within(dlg3).getByRole('button', { name: 'Copy' }));
		await waitFor(() => expect(names()).toEqual(['archive/', 'src/', 'src2/', 'taken.md']));
		expect(fs.callsOf('POST', '/_/copy')[0].body).toEqual({ src_path: '/src', dst_path: '/src2' });
		expect(fs.nodes.get('/src2/a.go')?.content).toBe('a');
		expect(fs.nodes.get('/src/a.go')?.content).toBe('a');
	});

	it('lists FIFOs, sockets and devices as what they are and opens none as a file', async () => {
		const fs = new FakeFS({
			'/run/fifo': { special: 'fifo' },
			'/run/app.sock': { special: 'socket' },
			'/run/null': { special: 'char-device', device: '1:3' },
			'/run/notes.txt': 'n'
		});
		setup(fs);
		await fireEvent.click(await screen.findByRole('button', { name: /^run/ }));
		await waitFor(() => expect(names()).toEqual(['app.sock', 'fifo', 'notes.txt', 'null']));
		const row = (name: string) => rows().find((li) => li.querySelector('.nm')!.textContent === name)!;
		expect(row('fifo').querySelector('.size')!.textContent).toBe('FIFO');
		expect(row('app.sock').querySelector('.size')!.textContent).toBe('socket');
		expect(row('null').querySelector('.size')!.getAttribute('title')).toBe('character device 1:3');
		expect(within(row('fifo')).queryByRole('link', { name: /Download/ })).toBeNull();
		expect(within(row('notes.txt')).getByRole('link', { name: /Download/ })).toBeTruthy();
		await fireEvent.click(screen.getByRole('button', { name: /^null/ }));
		const info = await screen.findByTestId('special-info');
		expect(info.textContent).toContain('null is a character device 1:3.');
		expect(screen.queryByLabelText('Contents of null')).toBeNull();
		expect(fs.callsOf('GET', '/run/null')).toHaveLength(0);
	});

	it('does not load files too large to show; offers a download', async () => {
		const fs = new FakeFS({ '/big.log': 'x' });
		const info = fs.info.bind(fs);
		fs.info = (p: string) => (p === '/big.log' ? { ...info(p), size_bytes: 3 * 1024 * 1024 } : info(p));
		setup(fs);
		await fireEvent.click(await screen.findByRole('button', { name: /^big.log/ }));
		expect(await screen.findByText('big.log is 3.0 MB — too large to show here.')).toBeTruthy();
		expect(fs.callsOf('GET', '/big.log')).toHaveLength(0);
	});

	it('shows API errors readably', async () => {
		const fs = new FakeFS({});
		fs.failures.push({ method: 'GET', path: '/', status: 500, code: 'internal', message: 'database is locked' });
		setup(fs);
		expect((await screen.findByRole('alert')).textContent).toBe('Could not list /: database is locked');
		await fireEvent.click(screen.getByRole('button', { name: 'Try again' }));
		await screen.findByText('The workspace is empty.');

		vi.stubGlobal('fetch', vi.fn().mockRejectedValue(new TypeError('Failed to fetch')));
		await fireEvent.click(screen.getByRole('button', { name: 'Refresh' }));
		expect((await screen.findByRole('alert')).textContent).toBe(
			'Could not list /: cannot reach the filepath server; check that it is running'
		);
	});
});
