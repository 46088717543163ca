// Command fakellm serves the scripted fake LLM upstream of internal/fakellm
// on a loopback port, for trying agents and for end-to-end tests without a
// provider: `fakellm --addr 127.0.0.1:9999 --script turns.json`. With no
// script (or when it runs out) every request gets a short answer quoting the
// last user message.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/filepath-dev/filepath/internal/fakellm"
)

// tryModels is the model list (OpenRouter's shape) served to the spawn
// dialog: the models the README's offline example uses, all with tools.
var tryModels = []byte(`{"data":[
{"id":"anthropic/claude-sonnet-4","name":"Anthropic: Claude Sonnet 4","context_length":200000,"pricing":{"prompt":"0","completion":"0"},"supported_parameters":["tools","tool_choice","max_tokens"]},
{"id":"openai/gpt-4.1","name":"OpenAI: GPT-4.1","context_length":1047576,"pricing":{"prompt":"0","completion":"0"},"supported_parameters":["tools","tool_choice"]}
]}`)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "loopback address to listen on")
	script := flag.String("script", "", "a JSON array of turns (fakellm.Turn) answered in order")
	flag.Parse()
	if !strings.HasPrefix(*addr, "127.0.0.1:") && !strings.HasPrefix(*addr, "localhost:") {
		fmt.Fprintln(os.Stderr, "fakellm: --addr must be a loopback address")
		os.Exit(2)
	}
	s := fakellm.NewAt(*addr)
	defer s.Close()
	// The tests' default list has a test entry (fake/no-tools); a person
	// trying agents offline is offered real models only.
	s.SetModels(tryModels)
	if *script != "" {
		b, err := os.ReadFile(*script)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fakellm:", err)
			os.Exit(1)
		}
		var turns []fakellm.Turn
		if err := json.Unmarshal(b, &turns); err != nil {
			fmt.Fprintf(os.Stderr, "fakellm: %s: %v\n", *script, err)
			os.Exit(1)
		}
		s.Script(turns...)
	}
	s.Fallback(func(r fakellm.Request) fakellm.Turn {
		return fakellm.Turn{Text: "fakellm heard: " + fakellm.LastUserText(r), Usage: fakellm.Usage{Input: 12, Output: 6}}
	})
	fmt.Println(s.URL)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
}
