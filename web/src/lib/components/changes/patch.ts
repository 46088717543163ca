// The rows of a unified diff's hunks (a FileDiff's patch, as git prints it from the first "@@"),
// with each line's numbers in the old and the new file.

export type Row =
	| { kind: 'hunk'; text: string }
	| { kind: 'ctx' | 'add' | 'del'; text: string; old?: number; new?: number; noNewline?: boolean };

const header = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$/;

/** parsePatch turns hunks into rows; "\ No newline at end of file" marks the row before it. */
export function parsePatch(patch: string): Row[] {
	const rows: Row[] = [];
	let o = 0;
	let n = 0;
	const lines = patch.endsWith('\n') ? patch.slice(0, -1).split('\n') : patch.split('\n');
	for (const l of lines) {
		const h = header.exec(l);
		if (h) {
			o = Number(h[1]);
			n = Number(h[3]);
			rows.push({ kind: 'hunk', text: l });
			continue;
		}
		const c = l[0];
		const text = l.slice(1);
		if (c === '\\') {
			const last = rows[rows.length - 1];
			if (last && last.kind !== 'hunk') last.noNewline = true;
		} else if (c === '+') rows.push({ kind: 'add', text, new: n++ });
		else if (c === '-') rows.push({ kind: 'del', text, old: o++ });
		else rows.push({ kind: 'ctx', text, old: o++, new: n++ });
	}
	return rows;
}

/** Selection is a run of rows picked for a comment. */
export interface Selection {
	from: number; // row indexes, from <= to
	to: number;
}

/** commentRange says which lines a selection covers: the new file's numbers when it holds a line
 * of the new file (added or kept), else the old file's (only deleted lines); and the rows as shown
 * (each led by ' ', '+' or '-'). */
export function commentRange(rows: Row[], sel: Selection): { side: 'old' | 'new'; start: number; end: number; lines: string[] } | null {
	const picked = rows.slice(sel.from, sel.to + 1).filter((r) => r.kind !== 'hunk') as Exclude<Row, { kind: 'hunk' }>[];
	if (!picked.length) return null;
	const lines = picked.map((r) => (r.kind === 'add' ? '+' : r.kind === 'del' ? '-' : ' ') + r.text);
	const news = picked.filter((r) => r.new !== undefined).map((r) => r.new as number);
	if (news.length) return { side: 'new', start: Math.min(...news), end: Math.max(...news), lines };
	const olds = picked.map((r) => r.old as number);
	return { side: 'old', start: Math.min(...olds), end: Math.max(...olds), lines };
}

/** DiffComment is a comment on lines of a file's diff, as DiffView sends it. */
export interface DiffComment {
	path: string;
	start_line: number;
	end_line: number;
	side: 'old' | 'new';
	lines: string[];
	body: string;
}

/** Section is a part of a node's changes. */
export type Section = 'uncommitted' | 'committed';

/** Focus opens a file of the changes at the lines a comment was about. */
export interface Focus {
	path: string;
	section?: Section;
	side: 'old' | 'new';
	start: number;
	end: number;
	base?: string;
}
