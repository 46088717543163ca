// injectStyles puts a component's <style> block into the jsdom document, unscoped, so a test can
// read getComputedStyle (vitest does not load component CSS; jsdom ignores @media and does no
// layout, so these tests check the declarations that make a layout work, and a browser
// screenshot checks the result). Imported only by *.test.ts files.
import { readFileSync } from 'node:fs';

/** file: the component's path from web/ (where vitest runs), e.g. 'src/routes/+page.svelte'. */
export function injectStyles(file: string): () => void {
	const src = readFileSync(file, 'utf8');
	const css = /<style>([\s\S]*?)<\/style>/.exec(src)?.[1] ?? '';
	const el = document.createElement('style');
	el.textContent = css.replace(/:global\(([^)]*)\)/g, '$1');
	document.head.appendChild(el);
	return () => el.remove();
}
