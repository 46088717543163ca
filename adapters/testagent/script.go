package main

import (
	"fmt"
	"strconv"
	"strings"
)

// Step is one parsed script command.
type Step struct {
	Op   string   // a command name from the table in main.go's doc, or "echo" for plain text
	Args []string // the command's arguments; for echo, stderr, done and handoff: one string (the rest of the line)
	N    int      // the numeric argument of flood, huge, crash, sleep, spawn, rate (count), tree (depth)
	W    int      // the width of tree; the events per second of rate
}

// commands lists each command with how its arguments parse.
var commands = map[string]struct {
	rest    bool // the rest of the line is one free-text argument
	numbers int  // how many leading integer arguments are required
	maxArgs int  // total arguments allowed (numbers + extra words); -1: any
}{
	"echo":        {rest: true},
	"stderr":      {rest: true},
	"done":        {rest: true},
	"handoff":     {rest: true},
	"flood":       {numbers: 1, maxArgs: 1},
	"huge":        {numbers: 1, maxArgs: 1},
	"crash":       {numbers: 1, maxArgs: 1},
	"sleep":       {numbers: 1, maxArgs: 1},
	"spawn":       {numbers: 1, maxArgs: 2},
	"tree":        {numbers: 2, maxArgs: 2},
	"rate":        {numbers: 2, maxArgs: 2},
	"status":      {maxArgs: 2},
	"bad":         {maxArgs: 0},
	"utf8":        {maxArgs: 0},
	"ignore-stop": {maxArgs: 0},
	"tool":        {maxArgs: 0},
	"command":     {maxArgs: 0},
	"commit":      {maxArgs: 0},
	"workers":     {maxArgs: 0},
}

// Parse splits a script into steps. Commands are separated by newlines or
// ';'. A line whose first word is not a command is plain text to echo, so a
// chat message like "hello there" comes back as a text event.
func Parse(script string) ([]Step, error) {
	var steps []Step
	for _, line := range strings.FieldsFunc(script, func(r rune) bool { return r == '\n' || r == ';' }) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		step, err := parseLine(line)
		if err != nil {
			return nil, err
		}
		steps = append(steps, step)
	}
	return steps, nil
}

func parseLine(line string) (Step, error) {
	name, rest, _ := strings.Cut(line, " ")
	rest = strings.TrimSpace(rest)
	spec, ok := commands[name]
	if !ok {
		return Step{Op: "echo", Args: []string{line}}, nil
	}
	if spec.rest {
		return Step{Op: name, Args: []string{rest}}, nil
	}
	args := strings.Fields(rest)
	if len(args) < spec.numbers {
		return Step{}, fmt.Errorf("%s: want %d number argument(s), got %q", name, spec.numbers, rest)
	}
	if spec.maxArgs >= 0 && len(args) > spec.maxArgs {
		return Step{}, fmt.Errorf("%s: too many arguments in %q", name, rest)
	}
	step := Step{Op: name, Args: args}
	for i := 0; i < spec.numbers; i++ {
		n, err := strconv.Atoi(args[i])
		if err != nil || n < 0 {
			return Step{}, fmt.Errorf("%s: argument %d must be a non-negative integer, got %q", name, i+1, args[i])
		}
		if i == 0 {
			step.N = n
		} else {
			step.W = n
		}
	}
	if name == "status" {
		if len(args) == 0 {
			return Step{}, fmt.Errorf("status: want a state (idle, thinking, running, done, error)")
		}
		if len(args) == 2 {
			if _, err := strconv.ParseFloat(args[1], 64); err != nil {
				return Step{}, fmt.Errorf("status: context_pct must be a number, got %q", args[1])
			}
		}
	}
	return step, nil
}
