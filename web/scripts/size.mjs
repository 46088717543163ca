// Sums the gzip sizes of the built JS and CSS (build/_app/**/*.js, *.css).
//   npm run build && node scripts/size.mjs
import { readdir, readFile } from 'node:fs/promises';
import { gzipSync } from 'node:zlib';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const dir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../build/_app');
const totals = { js: { raw: 0, gz: 0, n: 0 }, css: { raw: 0, gz: 0, n: 0 } };
async function walk(d) {
	for (const e of await readdir(d, { withFileTypes: true })) {
		const p = path.join(d, e.name);
		if (e.isDirectory()) await walk(p);
		else {
			const ext = path.extname(e.name).slice(1);
			if (ext !== 'js' && ext !== 'css') continue;
			const buf = await readFile(p);
			const t = totals[ext];
			t.raw += buf.length;
			t.gz += gzipSync(buf, { level: 9 }).length;
			t.n++;
		}
	}
}
try {
	await walk(dir);
} catch {
	console.error(`size: ${dir} not found; run npm run build first`);
	process.exit(1);
}
const kb = (n) => (n / 1024).toFixed(1) + ' KiB';
for (const [k, t] of Object.entries(totals)) console.log(`${k.padEnd(4)} ${String(t.n).padStart(3)} files  ${kb(t.raw).padStart(10)} raw  ${kb(t.gz).padStart(10)} gzip`);
const gz = totals.js.gz + totals.css.gz;
console.log(`total gzip JS+CSS: ${kb(gz)} (${gz} bytes)`);
