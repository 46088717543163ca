package containers

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
)

// bigText is more than the kernel's 128 KiB limit on one argument.
const bigText = 200_000

// runScript runs the agent script from this checkout (bind-mounted over the
// image's, so the test checks the script here, not a shared image's) with
// the inputs on stdin, and returns its events.
func runScript(t *testing.T, script string, inputs ...string) []map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdin bytes.Buffer
	for _, in := range inputs {
		stdin.Write(message(in))
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "docker", "run", "-i", "--rm", "--network", "none",
		"-v", script+":/usr/local/bin/agent.sh:ro", byoEchoImage)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = &stdin, &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("docker run: %v\n%s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), "Argument list too long") {
		t.Fatalf("the agent failed on a large message:\n%s", stderr.String())
	}
	var evs []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(stdout.Bytes()), []byte("\n")) {
		var e map[string]any
		if err := json.Unmarshal(l, &e); err != nil {
			t.Fatalf("not a JSON event: %.200q", l)
		}
		evs = append(evs, e)
	}
	return evs
}

func textOfLen(evs []map[string]any, n int) bool {
	for _, e := range evs {
		if c, _ := e["content"].(string); e["type"] == "text" && len(c) == n && strings.Trim(c, "a") == "" {
			return true
		}
	}
	return false
}

// byo-echo echoes a 200 KB message and reports a command's 200 KB output:
// it passes text to jq on stdin or in a file, not as an argument.
func TestBYOEchoLargeMessages(t *testing.T) {
	testkit.RequireImage(t, byoEchoImage)
	script, err := filepath.Abs("../images/byo-echo/agent.sh")
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("a", bigText)
	evs := runScript(t, script, big, "/cmd head -c 200000 /dev/zero | tr '\\0' b", "/done")
	if !textOfLen(evs, bigText) {
		t.Fatalf("no echo of the %d-byte message in %d events", bigText, len(evs))
	}
	var cmdOut bool
	for _, e := range evs {
		if o, _ := e["stdout"].(string); e["type"] == "command" && e["status"] == "done" && len(o) == bigText {
			cmdOut = true
		}
	}
	if !cmdOut || evs[len(evs)-1]["type"] != "done" {
		t.Fatalf("no command event with the 200 KB output, or no done (%d events)", len(evs))
	}
}

// The tutorial's agent (step 1, with step 3's handle) echoes a 200 KB
// message too.
func TestTutorialAgentLargeMessage(t *testing.T) {
	testkit.RequireImage(t, byoEchoImage)
	doc, err := os.ReadFile("../docs/tutorial.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	var step1, step3 string
	for _, b := range blocks {
		switch {
		case strings.HasPrefix(b[1], "#!/bin/sh\n# my-agent"):
			step1 = b[1]
		case strings.HasPrefix(b[1], "handle() {") && strings.Contains(b[1], "/cmd"):
			step3 = b[1]
		}
	}
	if step1 == "" || step3 == "" {
		t.Fatal("docs/tutorial.md: step 1's agent.sh or step 3's handle not found")
	}
	for name, src := range map[string]string{"step 1": step1,
		"step 3": strings.Replace(step1, "echo \"my-agent: agent", step3+"\necho \"my-agent: agent", 1)} {
		t.Run(name, func(t *testing.T) {
			script := filepath.Join(t.TempDir(), "agent.sh")
			if err := os.WriteFile(script, []byte(src), 0o755); err != nil {
				t.Fatal(err)
			}
			if evs := runScript(t, script, strings.Repeat("a", bigText)); !textOfLen(evs, bigText) {
				t.Fatalf("no echo of the %d-byte message in %d events", bigText, len(evs))
			}
		})
	}
}
