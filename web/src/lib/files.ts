// Session VFS calls (session-vfs.md, orchestrator/vfs/http.go), built on the one fetch wrapper in
// api.ts, plus the small path helpers and the file-record feed the Files tab uses.
import { request } from './api';
import { sendWithProgress } from './upload';
import type { FileRecord, LogRecord } from './protocol';
import type { FileDetail, FileInfo, FileInfoList, FsFile as FileAnswer } from './openapi/generated';

export type { FileDetail };

export type { FileRecord };

/** FsType is what an entry is; only a file has content. FIFOs, sockets and devices are made by
 * programs through an agent's /workspace (a mount), and are listed as what they are. */
export type FsType = FileInfo['type'];

/** FsEntry is a file or directory as the VFS API describes it (FileInfo). */
export type FsEntry = FileInfo;

/** FsFile is a file with its content, as a read or a create answers it: text as is, anything else
 * base64. */
export type FsFile = FileAnswer & Required<Pick<FileAnswer, 'content' | 'encoding'>>;

const enc = encodeURIComponent;

/** fsURL is the API path (below /api/v1) of `path` in a session's file system, or with nodeId in
 * that node's workspace (its fork, when it has one). */
export function fsURL(sessionId: string, path: string, nodeId?: string): string {
	const segs = splitPath(path).map(enc);
	const base = nodeId ? `/sessions/${enc(sessionId)}/nodes/${enc(nodeId)}/fs` : `/sessions/${enc(sessionId)}/fs`;
	return `${base}${segs.length ? '/' + segs.join('/') : ''}`;
}

/** downloadURL is a same-origin address that downloads the raw bytes (cookie auth). */
export function downloadURL(sessionId: string, path: string, nodeId?: string): string {
	return `/api/v1${fsURL(sessionId, path, nodeId)}?download=true`;
}

/** thumbnailURL is a same-origin address of an image file's thumbnail (at most size pixels a side). */
export function thumbnailURL(sessionId: string, path: string, nodeId?: string, size = 256): string {
	const ws = nodeId ? `/sessions/${enc(sessionId)}/nodes/${enc(nodeId)}` : `/sessions/${enc(sessionId)}`;
	return `/api/v1${ws}/fs/_/thumbnail?${new URLSearchParams({ path, size: String(size) })}`;
}

/** isImageName: a name an image viewer would open (the thumbnail route decides from the content). */
export function isImageName(name: string): boolean {
	return /\.(png|jpe?g|gif|webp|bmp)$/i.test(name);
}

export function splitPath(path: string): string[] {
	return path.split('/').filter((s) => s !== '');
}

/** joinPath joins a directory and a name: joinPath('/', 'a') is '/a'. */
export function joinPath(dir: string, name: string): string {
	return dir === '/' || dir === '' ? `/${name}` : `${dir}/${name}`;
}

/** parentOf is the directory holding path ('/' for '/' and top-level names). */
export function parentOf(path: string): string {
	const segs = splitPath(path);
	segs.pop();
	return '/' + segs.join('/');
}

/** validateName returns why `name` cannot be created in `dir`, or null when it is fine. */
export function validateName(name: string, dir: string): string | null {
	if (name === '') return 'Enter a name.';
	if (name.includes('/')) return 'A name cannot contain "/".';
	if (name.includes('\0')) return 'A name cannot contain a NUL character.';
	if (name === '.' || name === '..') return `"${name}" is not a valid name.`;
	if (new TextEncoder().encode(name).length > 255) return 'A name can be at most 255 bytes long.';
	if ((dir === '/' || dir === '') && name.startsWith('_'))
		return 'Names starting with "_" are reserved at the top level.';
	return null;
}

/** validateDest returns why `dst` cannot be where `src` is moved or copied to, or null when it is fine. */
export function validateDest(dst: string, src: string): string | null {
	if (!dst.startsWith('/')) return 'Enter a path that starts with "/".';
	const segs = splitPath(dst);
	if (segs.length === 0) return 'Enter a path below the workspace root.';
	const clean = '/' + segs.join('/');
	if (clean === src) return 'That is where it is now.';
	if (clean.startsWith(src + '/')) return 'A folder cannot go inside itself.';
	for (let i = 0; i < segs.length; i++) {
		const bad = validateName(segs[i], '/' + segs.slice(0, i).join('/'));
		if (bad) return bad;
	}
	return null;
}

/** sortEntries orders directories first, then by name (natural, case-insensitive). */
export function sortEntries(list: readonly FsEntry[]): FsEntry[] {
	return [...list].sort(
		(a, b) =>
			Number(b.is_directory) - Number(a.is_directory) ||
			a.name.localeCompare(b.name, undefined, { numeric: true, sensitivity: 'base' })
	);
}

/** formatSize prints bytes as "0 B", "12 B", "3.4 KB", "12 MB" (1024-based). */
export function formatSize(n: number): string {
	if (!Number.isFinite(n) || n < 0) return '—';
	if (n < 1024) return `${n} B`;
	const units = ['KB', 'MB', 'GB', 'TB'];
	let v = n / 1024;
	let i = 0;
	while (v >= 1024 && i < units.length - 1) {
		v /= 1024;
		i++;
	}
	return `${v >= 10 ? Math.round(v) : v.toFixed(1)} ${units[i]}`;
}

const TYPES: Record<string, string> = {
	png: 'PNG image', jpg: 'JPEG image', jpeg: 'JPEG image', gif: 'GIF image', webp: 'WebP image',
	svg: 'SVG image', ico: 'icon', bmp: 'BMP image', pdf: 'PDF document', zip: 'ZIP archive',
	gz: 'gzip archive', tgz: 'gzip archive', tar: 'tar archive', xz: 'xz archive', bz2: 'bzip2 archive',
	'7z': '7-Zip archive', wasm: 'WebAssembly module', exe: 'executable', so: 'shared library',
	dylib: 'shared library', bin: 'binary data', o: 'object file', a: 'static library',
	class: 'Java class', jar: 'Java archive', pyc: 'Python bytecode', db: 'database',
	sqlite: 'SQLite database', mp3: 'MP3 audio', wav: 'WAV audio', ogg: 'Ogg audio',
	mp4: 'MP4 video', webm: 'WebM video', mov: 'QuickTime video', ttf: 'TrueType font',
	otf: 'OpenType font', woff: 'WOFF font', woff2: 'WOFF2 font', xlsx: 'Excel workbook', xls: 'Excel workbook',
	ods: 'spreadsheet', csv: 'CSV table', tsv: 'TSV table', docx: 'Word document', pptx: 'PowerPoint deck',
	md: 'Markdown', txt: 'text', json: 'JSON', html: 'HTML page'
};

/** fileType names a binary file's type from its extension ("binary file" when unknown). */
export function fileType(name: string): string {
	const dot = name.lastIndexOf('.');
	const ext = dot > 0 ? name.slice(dot + 1).toLowerCase() : '';
	return TYPES[ext] ?? (ext ? `.${ext} file` : 'binary file');
}

/** isSpecial reports whether e is a FIFO, a socket or a device: it has no content to show. */
export function isSpecial(e: FsEntry): boolean {
	return e.type === 'fifo' || e.type === 'socket' || e.type === 'char-device' || e.type === 'block-device';
}

/** specialLabel names a special file's type as a reader would ("named pipe (FIFO)", "device 1:3"). */
export function specialLabel(e: FsEntry): string {
	switch (e.type) {
		case 'fifo':
			return 'named pipe (FIFO)';
		case 'socket':
			return 'Unix socket';
		case 'char-device':
			return `character device ${e.device ?? ''}`.trim();
		case 'block-device':
			return `block device ${e.device ?? ''}`.trim();
	}
	return '';
}

/** FsClient is the session VFS API of one session. */
export interface FsClient {
	readonly sessionId: string;
	list(path: string): Promise<FsEntry[]>;
	read(path: string): Promise<FsFile>;
	stat(path: string): Promise<FsEntry>;
	createFile(path: string, content?: string): Promise<FsFile>;
	mkdir(path: string): Promise<FsEntry>;
	/** save replaces a file's text; ifMatch is the hash it was read at (412 if it changed). */
	save(path: string, content: string, ifMatch?: string): Promise<FsEntry>;
	/** upload creates path (and its parents) with data's bytes, reporting the bytes sent. */
	upload(path: string, data: Blob | ArrayBuffer | Uint8Array, onprogress?: (sent: number, total: number) => void): Promise<FsFile>;
	/** info is a file's metadata with its detected MIME type, source and writer. */
	info(path: string): Promise<FileDetail>;
	/** tool calls a file tool's route (POST .../fs/_/{route}) with its JSON arguments. */
	tool<T>(route: string, args: Record<string, unknown>): Promise<T>;
	thumbnailURL(path: string, size?: number): string;
	remove(path: string, recursive?: boolean): Promise<void>;
	/** move renames or moves src to dst (dst must not exist; its parents are created). */
	move(src: string, dst: string): Promise<FsEntry>;
	/** copy copies a file, or a folder with everything in it, to dst (which must not exist). */
	copy(src: string, dst: string): Promise<FsEntry>;
	downloadURL(path: string): string;
}

/** fsClient returns the VFS API of a session, or with nodeId of that node's workspace. */
export function fsClient(sessionId: string, nodeId?: string): FsClient {
	const u = (p: string) => fsURL(sessionId, p, nodeId);
	return {
		sessionId,
		list: async (path) => (await request<FileInfoList>(u(path))).data ?? [],
		read: (path) => request<FsFile>(u(path)),
		stat: (path) => request<FsEntry>(`${u('/')}/_/stat`, { method: 'POST', body: { path } }),
		createFile: (path, content = '') =>
			request<FsFile>(u(path), { method: 'POST', body: { content, encoding: 'text' } }),
		mkdir: (path) => request<FsEntry>(u(path), { method: 'POST', body: { is_directory: true } }),
		save: (path, content, ifMatch) =>
			request<FsEntry>(u(path), {
				method: 'PUT',
				body: { content, encoding: 'text' },
				headers: ifMatch ? { 'If-Match': `"${ifMatch}"` } : undefined
			}),
		upload: (path, data, onprogress) =>
			sendWithProgress<FsFile>(u(path), data as XMLHttpRequestBodyInit, { 'Content-Type': 'application/octet-stream' }, { onprogress }),
		info: (path) => request<FileDetail>(`${u('/')}/_/info`, { method: 'POST', body: { id: path } }),
		tool: <T>(route: string, args: Record<string, unknown>) => request<T>(`${u('/')}/_/${route}`, { method: 'POST', body: args }),
		thumbnailURL: (path, size = 256) => thumbnailURL(sessionId, path, nodeId, size),
		remove: (path, recursive = false) =>
			request<void>(u(path) + (recursive ? '?recursive=true' : ''), { method: 'DELETE' }),
		move: (src, dst) =>
			request<FsEntry>(`${u('/')}/_/move`, { method: 'POST', body: { src_path: src, dst_path: dst } }),
		copy: (src, dst) =>
			request<FsEntry>(`${u('/')}/_/copy`, { method: 'POST', body: { src_path: src, dst_path: dst } }),
		downloadURL: (path) => downloadURL(sessionId, path, nodeId)
	};
}

/** FileFeed carries `file` records from the live connection to whoever shows files. */
export interface FileFeed {
	/** push forwards one record; records of other kinds are ignored. */
	push(rec: LogRecord): void;
	/** subscribe registers fn and returns the function that removes it. */
	subscribe(fn: (rec: FileRecord) => void): () => void;
}

export function createFileFeed(): FileFeed {
	const subs = new Set<(rec: FileRecord) => void>();
	return {
		push(rec) {
			if (rec.kind !== 'file') return;
			for (const fn of subs) fn(rec);
		},
		subscribe(fn) {
			subs.add(fn);
			return () => subs.delete(fn);
		}
	};
}
