// An in-memory stand-in for the session VFS REST API (orchestrator/vfs/http.go), installed as the
// global fetch by the Files tab tests. Imported only by *.test.ts files.
import { vi } from 'vitest';

type Node = { dir: boolean; content: string; encoding: 'text' | 'base64'; readonly: boolean; rev: number; at: string; special?: string; device?: string };
export type Call = { method: string; path: string; query: string; headers: Record<string, string>; body: unknown };

const PREFIX = '/api/v1/sessions/s1/fs';

export class FakeFS {
	nodes = new Map<string, Node>([['/', node(true)]]);
	calls: Call[] = [];
	/** fail makes the next matching request answer an error instead. */
	failures: { method: string; path: string; status: number; code: string; message: string }[] = [];
	/** mimes are the detected types file_info answers (by path; text/plain otherwise). */
	mimes = new Map<string, string>();
	/** tools answer POST /_/{route} (the format tier) with the body given the arguments. */
	tools = new Map<string, (args: Record<string, unknown>) => unknown>();

	constructor(
		files: Record<string, string | { content?: string; dir?: boolean; readonly?: boolean; base64?: boolean; special?: string; device?: string }> = {}
	) {
		for (const [p, v] of Object.entries(files)) {
			if (typeof v === 'string') this.put(p, v);
			else if (v.dir) this.mkdirAll(p);
			else if (v.special) {
				this.mkdirAll(parent(p));
				this.nodes.set(p, { ...node(false), special: v.special, device: v.device });
			}
			else this.put(p, v.content ?? '', { readonly: v.readonly, base64: v.base64 });
		}
	}

	mkdirAll(p: string) {
		const segs = p.split('/').filter(Boolean);
		for (let i = 1; i <= segs.length; i++) {
			const q = '/' + segs.slice(0, i).join('/');
			if (!this.nodes.has(q)) this.nodes.set(q, node(true));
		}
	}

	/** put writes a file as another writer would (bumps its hash). */
	put(p: string, content: string, o: { readonly?: boolean; base64?: boolean } = {}) {
		this.mkdirAll(parent(p));
		const prev = this.nodes.get(p);
		this.nodes.set(p, {
			...node(false),
			content,
			encoding: o.base64 ? 'base64' : 'text',
			readonly: o.readonly ?? prev?.readonly ?? false,
			rev: (prev?.rev ?? 0) + 1
		});
	}

	hash(p: string) {
		const n = this.nodes.get(p)!;
		return `h${n.rev}-${n.content.length}`;
	}

	info(p: string) {
		const n = this.nodes.get(p)!;
		return {
			path: p,
			name: p === '/' ? '' : p.slice(p.lastIndexOf('/') + 1),
			is_directory: n.dir,
			type: n.special ?? (n.dir ? 'directory' : 'file'),
			device: n.device,
			is_readonly: n.readonly,
			size_bytes: n.dir ? 0 : n.encoding === 'base64' ? Math.floor((n.content.length * 3) / 4) : n.content.length,
			hash: n.dir ? undefined : this.hash(p),
			created_at: n.at,
			updated_at: n.at
		};
	}

	callsOf(method: string, path?: string) {
		return this.calls.filter((c) => c.method === method && (path === undefined || c.path === path));
	}

	install() {
		const fn = vi.fn(async (input: string, init: RequestInit = {}) => this.handle(input, init));
		vi.stubGlobal('fetch', fn);
		// Uploads go through XMLHttpRequest (for their progress): the same handler answers them,
		// after reporting the whole body as sent in two steps.
		const fake = this;
		class FakeXHR {
			method = 'GET';
			url = '';
			headers: Record<string, string> = {};
			status = 0;
			statusText = '';
			responseText = '';
			withCredentials = false;
			upload: { onprogress: ((e: { lengthComputable: boolean; loaded: number; total: number }) => void) | null } = { onprogress: null };
			onload: (() => void) | null = null;
			onerror: (() => void) | null = null;
			onabort: (() => void) | null = null;
			open(method: string, url: string) {
				this.method = method;
				this.url = url;
			}
			setRequestHeader(k: string, v: string) {
				if (k !== 'Accept') this.headers[k] = v;
			}
			abort() {
				this.onabort?.();
			}
			send(body: unknown) {
				const total = body instanceof Blob ? body.size : 0;
				void (async () => {
					this.upload.onprogress?.({ lengthComputable: true, loaded: Math.floor(total / 2), total });
					this.upload.onprogress?.({ lengthComputable: true, loaded: total, total });
					const res = await fake.handle(this.url, { method: this.method, headers: this.headers, body: body as BodyInit });
					this.status = res.status;
					this.statusText = res.statusText;
					this.responseText = await res.text();
					this.onload?.();
				})();
			}
		}
		vi.stubGlobal('XMLHttpRequest', FakeXHR);
		return fn;
	}

	async handle(input: string, init: RequestInit): Promise<Response> {
		const url = new URL(input, 'http://x');
		const method = init.method ?? 'GET';
		const headers = { ...(init.headers as Record<string, string>) };
		let body: unknown = init.body;
		if (typeof body === 'string' && headers['Content-Type'] === 'application/json') body = JSON.parse(body);
		if (!url.pathname.startsWith(PREFIX)) return err(404, 'not_found', 'no route');
		let p = url.pathname.slice(PREFIX.length) || '/';
		p = decodeURIComponent(p);
		this.calls.push({ method, path: p, query: url.search, headers, body });
		const f = this.failures.findIndex((x) => x.method === method && x.path === p);
		if (f >= 0) {
			const x = this.failures.splice(f, 1)[0];
			return err(x.status, x.code, x.message);
		}
		if (method === 'POST' && p === '/_/stat') {
			const q = (body as { path: string }).path;
			if (!this.nodes.has(q)) return err(404, 'not_found', `${q} not found`);
			return json(200, this.info(q));
		}
		if (method === 'POST' && p === '/_/info') {
			const q = (body as { id: string }).id;
			if (!this.nodes.has(q)) return err(404, 'not_found', `${q} not found`);
			const n = this.nodes.get(q)!;
			return json(200, { id: q, ...this.info(q), mime_type: n.dir ? undefined : (this.mimes.get(q) ?? 'text/plain; charset=utf-8'), source: 'upload' });
		}
		if (method === 'POST' && p.startsWith('/_/') && this.tools.has(p.slice(3))) {
			return json(200, this.tools.get(p.slice(3))!(body as Record<string, unknown>));
		}
		if (method === 'POST' && p.startsWith('/_/') && !['/_/move', '/_/copy', '/_/stat'].includes(p)) return err(404, 'not_found', `no tool ${p.slice(3)}`);
		if (method === 'POST' && (p === '/_/move' || p === '/_/copy')) {
			const { src_path: src, dst_path: dst } = body as { src_path: string; dst_path: string };
			if (!this.nodes.has(src)) return err(404, 'not_found', `${src} not found`);
			if (this.nodes.has(dst)) return err(409, 'conflict', `${dst} already exists`);
			if (dst.startsWith(src + '/')) return err(400, 'invalid', `cannot move ${src} into itself`);
			this.mkdirAll(parent(dst));
			for (const k of [...this.nodes.keys()].filter((k) => k === src || k.startsWith(src + '/'))) {
				this.nodes.set(dst + k.slice(src.length), { ...this.nodes.get(k)! });
				if (p === '/_/move') this.nodes.delete(k);
			}
			return json(200, this.info(dst));
		}
		const n = this.nodes.get(p);
		switch (method) {
			case 'GET': {
				if (!n) return err(404, 'not_found', `${p} not found`);
				if (n.dir) {
					const pre = p === '/' ? '/' : p + '/';
					const kids = [...this.nodes.keys()].filter(
						(k) => k !== p && k.startsWith(pre) && !k.slice(pre.length).includes('/')
					);
					return json(200, { data: kids.map((k) => this.info(k)) });
				}
				if (n.special) return err(409, 'conflict', `${p} is a ${n.special}, not a regular file: it has no content to read or write`);
				return json(200, { ...this.info(p), content: n.content, encoding: n.encoding });
			}
			case 'POST': {
				if (n) return err(409, 'conflict', `${p} already exists`);
				// as the server: missing parents are created
				if (this.nodes.has(parent(p)) && !this.nodes.get(parent(p))?.dir) return err(409, 'conflict', `${parent(p)} is not a directory`);
				this.mkdirAll(parent(p));
				if (headers['Content-Type'] === 'application/octet-stream') {
					const b = body as Blob;
					this.put(p, await b.text());
				} else if ((body as { is_directory?: boolean }).is_directory) {
					this.nodes.set(p, node(true));
					return json(201, this.info(p));
				} else {
					this.put(p, (body as { content?: string }).content ?? '');
				}
				return json(201, { ...this.info(p), content: this.nodes.get(p)!.content, encoding: 'text' });
			}
			case 'PUT': {
				if (!n) return err(404, 'not_found', `${p} not found`);
				if (n.readonly) return err(403, 'forbidden', `${p} is read-only`);
				const want = (headers['If-Match'] ?? '').replace(/"/g, '');
				if (want && want !== this.hash(p)) return err(412, 'precondition_failed', `${p} changed`);
				this.put(p, (body as { content: string }).content);
				return json(200, this.info(p));
			}
			case 'DELETE': {
				if (!n) return err(404, 'not_found', `${p} not found`);
				const kids = [...this.nodes.keys()].filter((k) => k.startsWith(p + '/'));
				if (kids.length && url.searchParams.get('recursive') !== 'true')
					return err(409, 'conflict', `${p} is not empty`);
				for (const k of [p, ...kids]) this.nodes.delete(k);
				return new Response(null, { status: 204 });
			}
		}
		return err(405, 'invalid', 'method not allowed');
	}
}

function node(dir: boolean): Node {
	return { dir, content: '', encoding: 'text', readonly: false, rev: 0, at: '2026-01-01T00:00:00Z' };
}
function parent(p: string) {
	const i = p.lastIndexOf('/');
	return i <= 0 ? '/' : p.slice(0, i);
}
function json(status: number, v: unknown) {
	return new Response(JSON.stringify(v), { status, headers: { 'Content-Type': 'application/json' } });
}
function err(status: number, code: string, message: string) {
	return json(status, { error: { code, message } });
}
