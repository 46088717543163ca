// Uploads with progress: multipart POSTs to a workspace's .../fs/_/upload (streamed into the
// session filesystem by the server), through XMLHttpRequest because fetch reports no upload
// progress.
import { ApiError, base, errorFromBody } from './api';
import type { Uploaded } from './openapi/generated';

/** UploadPart is one file of an upload and its path below the target directory. */
export type UploadPart = { file: Blob; name: string };

export type UploadOptions = {
	/** overwrite replaces files that exist (else the server answers 409 for the first). */
	overwrite?: boolean;
	/** onprogress gets the bytes sent so far and the request's total. */
	onprogress?: (sent: number, total: number) => void;
	signal?: AbortSignal;
};

/** uploadURL is the upload route of the session's workspace, or of a node's. */
export function uploadURL(sessionId: string, dir: string, nodeId?: string, overwrite = false): string {
	const ws = nodeId ? `/sessions/${sessionId}/nodes/${nodeId}` : `/sessions/${sessionId}`;
	const q = new URLSearchParams({ dir });
	if (overwrite) q.set('overwrite', 'true');
	return `${base}${ws}/fs/_/upload?${q}`;
}

/**
 * sendWithProgress POSTs body to an API path (below /api/v1) and resolves with the decoded JSON
 * answer, reporting the bytes sent; errors are ApiErrors as request's are.
 */
export function sendWithProgress<T>(path: string, body: XMLHttpRequestBodyInit, headers: Record<string, string>, opts: UploadOptions = {}): Promise<T> {
	return new Promise((resolve, reject) => {
		const xhr = new XMLHttpRequest();
		xhr.open('POST', base + path);
		xhr.withCredentials = true;
		xhr.setRequestHeader('Accept', 'application/json');
		for (const [k, v] of Object.entries(headers)) xhr.setRequestHeader(k, v);
		xhr.upload.onprogress = (e) => {
			if (e.lengthComputable) opts.onprogress?.(e.loaded, e.total);
		};
		xhr.onload = () => {
			if (xhr.status >= 200 && xhr.status < 300) {
				try {
					resolve((xhr.responseText ? JSON.parse(xhr.responseText) : undefined) as T);
				} catch {
					reject(new ApiError(xhr.status, 'bad_response', `the server sent a response that is not JSON (${path})`));
				}
				return;
			}
			reject(errorFromBody(xhr.status, xhr.statusText, xhr.responseText));
		};
		xhr.onerror = () => reject(new ApiError(0, 'network', 'cannot reach the filepath server; check that it is running'));
		xhr.onabort = () => reject(new DOMException('upload canceled', 'AbortError'));
		opts.signal?.addEventListener('abort', () => xhr.abort());
		xhr.send(body);
	});
}

/** uploadFiles sends parts into dir in one request and resolves with what the server wrote. */
export function uploadFiles(sessionId: string, nodeId: string | undefined, dir: string, parts: UploadPart[], opts: UploadOptions = {}): Promise<Uploaded> {
	const form = new FormData();
	for (const p of parts) form.append('file', p.file, p.name);
	return sendWithProgress<Uploaded>(uploadURL(sessionId, dir, nodeId, opts.overwrite).slice(base.length), form, {}, opts);
}

/** numbered is name with " (n)" before its extension: report.xlsx → report (2).xlsx. */
export function numbered(name: string, n: number): string {
	const dot = name.lastIndexOf('.');
	if (dot <= 0) return `${name} (${n})`;
	return `${name.slice(0, dot)} (${n})${name.slice(dot)}`;
}

/**
 * uploadUnique uploads one file into dir under its name, or, when a file of that name exists
 * there, under "name (2).ext", "name (3).ext", …; it resolves with the path written.
 */
export async function uploadUnique(sessionId: string, nodeId: string | undefined, dir: string, file: File, opts: UploadOptions = {}): Promise<string> {
	for (let n = 1; n <= 50; n++) {
		const name = n === 1 ? file.name : numbered(file.name, n);
		try {
			const up = await uploadFiles(sessionId, nodeId, dir, [{ file, name }], opts);
			return up.data[0]?.id ?? `${dir.replace(/\/$/, '')}/${name}`;
		} catch (err) {
			if (err instanceof ApiError && err.status === 409) continue;
			throw err;
		}
	}
	throw new ApiError(409, 'conflict', `${file.name}: 50 files of that name are in ${dir} already; rename it first`);
}
