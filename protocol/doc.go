// Package protocol is the filepath Agent Protocol (FAP): the events an agent
// writes to stdout and the inputs it reads from stdin, one JSON object per
// line.
package protocol
