// Theme: light by default, `.dark` on <html>; the choice is remembered in localStorage and applied
// before first paint by the inline script in app.html.
export const THEME_KEY = 'filepath:theme';

export function isDark(): boolean {
	return document.documentElement.classList.contains('dark');
}

export function setDark(dark: boolean): void {
	document.documentElement.classList.toggle('dark', dark);
	try {
		localStorage.setItem(THEME_KEY, dark ? 'dark' : 'light');
	} catch {
		/* private mode: the toggle still works for this page */
	}
}
