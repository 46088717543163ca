package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/filepath-dev/filepath/protocol"
)

// runCLI calls Main and returns its exit code, stdout and stderr.
func runCLI(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(context.Background(), args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

func ndjsonLines(ls ...string) string { return strings.Join(ls, "\n") + "\n" }

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.ndjson")
	if err := os.WriteFile(good, []byte(ndjsonLines(`{"type":"done"}`, ``, `{"type":"text","content":"x"}`)), 0o644); err != nil {
		t.Fatal(err)
	}
	long := `{"type":"text","content":"` + strings.Repeat("a", 100) + `"}`
	tests := []struct {
		name   string
		args   []string
		stdin  string
		code   int
		stdout string // exact, when set
		stderr string // substring of stderr
	}{
		{
			name:   "one valid one invalid",
			args:   []string{"validate"},
			stdin:  ndjsonLines(`{"type":"text","content":"hi"}`, `{"type":"status","state":"sleeping"}`),
			code:   1,
			stdout: "2: field \"state\" must be one of idle|thinking|running|done|error, got \"sleeping\"\n1 valid, 1 invalid\n",
		},
		{
			// A file saved as "UTF-8 with BOM": the error names the BOM, not "invalid character 'ï'".
			name:   "byte order mark",
			args:   []string{"validate"},
			stdin:  "\xEF\xBB\xBF" + ndjsonLines(`{"type":"text","content":"hi"}`, `{"type":"done"}`),
			code:   1,
			stdout: "1: starts with a UTF-8 byte order mark (BOM, bytes EF BB BF); write JSON without one (an editor's \"UTF-8 with BOM\" adds it)\n1 valid, 1 invalid\n",
		},
		{
			name:   "all valid",
			args:   []string{"validate", "-"},
			stdin:  ndjsonLines(`{"type":"text","content":"hi"}`, `{"type":"done"}`),
			code:   0,
			stdout: "2 valid, 0 invalid\n",
		},
		{
			name:   "empty input",
			args:   []string{"validate"},
			code:   0,
			stdout: "0 valid, 0 invalid\n",
		},
		{
			name:  "blank lines are skipped but keep line numbers",
			args:  []string{"validate"},
			stdin: "\n  \r\n{\"type\":\"done\"}\r\n\nnot json\n{\"type\":\"x\"}",
			code:  1,
			stdout: "5: not JSON: invalid character 'o' in literal null (expecting 'u') (column 2)\n" +
				"6: unknown type \"x\" (known types: text, tool, command, commit, spawn, workers, status, handoff, done)\n" +
				"1 valid, 2 invalid\n",
		},
		{
			name:   "over-long line is invalid and names the limit",
			args:   []string{"validate", "--max-line", "64"},
			stdin:  ndjsonLines(long, `{"type":"done"}`),
			code:   1,
			stdout: "1: the line is 128 bytes, over the limit of 64 bytes per line (see --max-line)\n1 valid, 1 invalid\n",
		},
		{
			name:   "max-line with a suffix",
			args:   []string{"validate", "--max-line=1KiB"},
			stdin:  ndjsonLines(long),
			code:   0,
			stdout: "1 valid, 0 invalid\n",
		},
		{
			name:   "inputs",
			args:   []string{"validate", "--inputs"},
			stdin:  ndjsonLines(`{"type":"message","from":"user","content":"hi"}`, `{"type":"signal","action":"kill"}`, `{"type":"text","content":"hi"}`),
			code:   1,
			stdout: "2: field \"action\" must be one of stop|pause|resume, got \"kill\"\n3: unknown type \"text\" (known types: message, signal; \"text\" is an event (stdout), not an input)\n1 valid, 2 invalid\n",
		},
		{
			name:   "file argument, flags after it",
			args:   []string{"validate", good, "--max-line", "100"},
			code:   0,
			stdout: "2 valid, 0 invalid\n",
		},
		{
			name:   "file after --",
			args:   []string{"validate", "--", good},
			code:   0,
			stdout: "2 valid, 0 invalid\n",
		},
		{
			name:   "missing file",
			args:   []string{"validate", filepath.Join(dir, "nope.ndjson")},
			code:   2,
			stderr: "open " + filepath.Join(dir, "nope.ndjson") + ": no such file",
		},
		{
			name:   "two files",
			args:   []string{"validate", good, good},
			code:   2,
			stderr: "one FILE at most",
		},
		{
			name:   "unknown flag",
			args:   []string{"validate", "--strict"},
			code:   2,
			stderr: "flag provided but not defined: -strict",
		},
		{
			name:   "bad max-line",
			args:   []string{"validate", "--max-line", "lots"},
			code:   2,
			stderr: `invalid --max-line "lots"`,
		},
		{
			name:   "zero max-line",
			args:   []string{"validate", "--max-line", "0"},
			code:   2,
			stderr: "must be between 1 byte and 1GiB",
		},
		{
			name:   "help",
			args:   []string{"validate", "-h"},
			code:   0,
			stderr: "usage: filepath validate",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tt.stdin, tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, stdout, stderr)
			}
			if tt.stdout != "" && stdout != tt.stdout {
				t.Errorf("stdout:\n%s\nwant:\n%s", stdout, tt.stdout)
			}
			if !strings.Contains(stderr, tt.stderr) {
				t.Errorf("stderr %q does not contain %q", stderr, tt.stderr)
			}
		})
	}
}

// TestValidateCorpus checks the protocol corpus through the command: the
// output for the invalid lines is the golden file, line for line.
func TestValidateCorpus(t *testing.T) {
	for _, tt := range []struct {
		name string
		flag []string
	}{{"events", nil}, {"inputs", []string{"--inputs"}}} {
		t.Run(tt.name, func(t *testing.T) {
			corpus := filepath.Join("..", "..", "protocol", "testdata", "corpus")
			code, stdout, _ := runCLI(t, "", append(append([]string{"validate"}, tt.flag...), filepath.Join(corpus, tt.name+"_valid.ndjson"))...)
			if code != 0 || !strings.HasSuffix(stdout, " valid, 0 invalid\n") {
				t.Errorf("valid corpus: exit %d\n%s", code, stdout)
			}
			golden, err := os.ReadFile(filepath.Join(corpus, tt.name+"_invalid.golden"))
			if err != nil {
				t.Fatal(err)
			}
			code, stdout, _ = runCLI(t, "", append(append([]string{"validate"}, tt.flag...), filepath.Join(corpus, tt.name+"_invalid.ndjson"))...)
			n := strings.Count(string(golden), "\n")
			want := string(golden) + "0 valid, " + strconv.Itoa(n) + " invalid\n"
			if code != 1 || stdout != want {
				t.Errorf("invalid corpus: exit %d\n%s\nwant\n%s", code, stdout, want)
			}
		})
	}
}

func TestSchema(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		want  []byte
		code  int
		error string
	}{
		{name: "events", args: []string{"schema"}, want: protocol.EventSchema()},
		{name: "inputs", args: []string{"schema", "--inputs"}, want: protocol.InputSchema()},
		{name: "extra argument", args: []string{"schema", "x"}, code: 2, error: `unexpected argument "x"`},
		{name: "unknown flag", args: []string{"schema", "--yaml"}, code: 2, error: "flag provided but not defined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "", tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.error) {
				t.Fatalf("exit %d (want %d), stderr %q (want %q)", code, tt.code, stderr, tt.error)
			}
			if tt.want == nil {
				return
			}
			if stdout != string(tt.want) {
				t.Fatalf("printed schema differs from the protocol package's")
			}
			// It is a schema a draft 2020-12 validator compiles.
			doc, err := jsonschema.UnmarshalJSON(strings.NewReader(stdout))
			if err != nil {
				t.Fatal(err)
			}
			c := jsonschema.NewCompiler()
			if err := c.AddResource("s.json", doc); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Compile("s.json"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	code, stdout, _ := runCLI(t, "", "version")
	if code != 0 || !strings.HasPrefix(stdout, "filepath dev") || !strings.Contains(stdout, " go1.") {
		t.Fatalf("exit %d, %q", code, stdout)
	}
	if code, _, _ := runCLI(t, "", "version", "x"); code != 2 {
		t.Fatalf("version x: exit %d, want 2", code)
	}
}

func TestMainDispatch(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{name: "no command", args: nil, code: 2, stderr: "usage: filepath COMMAND"},
		{name: "unknown command", args: []string{"frobnicate"}, code: 2, stderr: `unknown command "frobnicate"`},
		{name: "help", args: []string{"help"}, code: 0, stdout: "usage: filepath COMMAND"},
		{name: "-h", args: []string{"-h"}, code: 0, stdout: "validate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "", tt.args...)
			if code != tt.code || !strings.Contains(stdout, tt.stdout) || !strings.Contains(stderr, tt.stderr) {
				t.Fatalf("exit %d (want %d)\nstdout %q (want %q)\nstderr %q (want %q)", code, tt.code, stdout, tt.stdout, stderr, tt.stderr)
			}
		})
	}
}
