package pgsql

import "testing"

func TestRebind(t *testing.T) {
	for _, tt := range []struct{ name, in, want string }{
		{"none", `SELECT 1`, `SELECT 1`},
		{"plain", `SELECT a FROM t WHERE b = ? AND c = ?`, `SELECT a FROM t WHERE b = $1 AND c = $2`},
		{"numbered", `SELECT ?2, ?1 WHERE x = ?1`, `SELECT $2, $1 WHERE x = $1`},
		// SQLite: a plain ? after ?N is the number after the largest so far
		{"mixed", `UPDATE t SET a = ?1, b = ? WHERE c = ?3 AND d = ?`, `UPDATE t SET a = $1, b = $2 WHERE c = $3 AND d = $4`},
		{"quoted", `SELECT '?', "a?b" FROM t WHERE x = ?`, `SELECT '?', "a?b" FROM t WHERE x = $1`},
		{"comment", "SELECT 1 -- why?\nWHERE x = ?", "SELECT 1 -- why?\nWHERE x = $1"},
		{"unterminated quote", `SELECT 'a?`, `SELECT 'a?`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := rebind(tt.in); got != tt.want {
				t.Errorf("rebind(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
