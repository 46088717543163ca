// A stand-in for SvelteKit's router in component tests (imported only by *.test.ts files): `page`
// is reactive like $app/state's, and `navigate` changes its address as goto (or the browser's
// back button) does, then runs the afterNavigate callbacks.
export const page = $state({ params: { id: 's1' } as Record<string, string>, url: new URL('http://x/session/s1') });

const after: (() => void)[] = [];

/** afterNavigate registers cb and runs it once, as the first navigation does. */
export function afterNavigate(cb: () => void) {
	after.push(cb);
	queueMicrotask(cb);
}

/** navigate goes to u (relative to the current address). */
export function navigate(u: URL | string) {
	page.url = new URL(String(u), page.url);
	for (const cb of after) queueMicrotask(cb);
}

/** reset forgets the callbacks and sets the address (before each test). */
export function reset(href: string) {
	after.length = 0;
	page.url = new URL(href);
}
