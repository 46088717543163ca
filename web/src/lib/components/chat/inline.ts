// splitInline turns `code` spans into parts; an unmatched backtick stays literal text.
export type Part = { code: boolean; text: string };

export function splitInline(s: string): Part[] {
	const parts: Part[] = [];
	let i = 0;
	while (i < s.length) {
		const open = s.indexOf('`', i);
		if (open < 0) break;
		const close = s.indexOf('`', open + 1);
		if (close < 0) break;
		if (open > i) parts.push({ code: false, text: s.slice(i, open) });
		if (close > open + 1) parts.push({ code: true, text: s.slice(open + 1, close) });
		else parts.push({ code: false, text: '``' });
		i = close + 1;
	}
	if (i < s.length) parts.push({ code: false, text: s.slice(i) });
	return parts;
}
