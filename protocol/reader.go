package protocol

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// DefaultMaxLine is the default bound on one NDJSON line: 1 MiB, not
// counting its line ending.
const DefaultMaxLine = 1 << 20

// headSize bounds LineTooLongError.Head.
const headSize = 4 << 10

// LineTooLongError reports a line longer than the reader's limit. The line
// was skipped; the stream goes on with the next line.
type LineTooLongError struct {
	Line  int    // 1-based line number
	Limit int    // the limit in bytes
	Size  int64  // the line's length in bytes (without its line ending)
	Head  []byte // the line's first bytes (at most min(Limit, 4 KiB)), to show what it was
}

func (e *LineTooLongError) Error() string {
	return fmt.Sprintf("line %d is %d bytes, over the limit of %d bytes per line", e.Line, e.Size, e.Limit)
}

// Reader splits an NDJSON stream into lines. It holds at most one line of at
// most the limit in memory: a longer line is read through and dropped, and
// reported as a *LineTooLongError. Blank lines (only spaces, tabs and "\r")
// are skipped; "\r\n" endings and a last line without an ending are accepted.
type Reader struct {
	br    *bufio.Reader
	max   int
	buf   []byte
	line  int
	atEOF bool
}

// NewReader returns a Reader of r with lines of at most maxLine bytes
// (maxLine <= 0 means DefaultMaxLine).
func NewReader(r io.Reader, maxLine int) *Reader {
	if maxLine <= 0 {
		maxLine = DefaultMaxLine
	}
	size := 64 << 10
	if maxLine+2 < size {
		size = max(maxLine+2, 16)
	}
	return &Reader{br: bufio.NewReaderSize(r, size), max: maxLine}
}

// Limit returns the maximum line length in bytes.
func (r *Reader) Limit() int { return r.max }

// Line returns the 1-based number of the line last returned by Next (or
// reported by its *LineTooLongError), counting blank lines.
func (r *Reader) Line() int { return r.line }

// Next returns the next non-blank line without its line ending. The slice is
// valid only until the next call. At the end of the stream it returns io.EOF.
// A line over the limit gives a *LineTooLongError and Next may be called
// again; any other error ends the stream.
func (r *Reader) Next() ([]byte, error) {
	for {
		if r.atEOF {
			return nil, io.EOF
		}
		line, size, err := r.readLine()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return nil, err
			}
			r.atEOF = true
			if line == nil {
				return nil, io.EOF
			}
		}
		r.line++
		if size > int64(r.max) {
			head := line[:min(len(line), headSize, r.max)]
			return nil, &LineTooLongError{Line: r.line, Limit: r.max, Size: size, Head: head}
		}
		if isBlank(line) {
			continue
		}
		return line, nil
	}
}

// readLine reads one line and returns it without its ending, with its size.
// A line longer than the limit comes back cut to at most max+2 bytes (its
// size is still the full one) and is never held whole. At the end of input it
// returns io.EOF along with a last unterminated line, or with a nil line when
// there was none.
func (r *Reader) readLine() ([]byte, int64, error) {
	frag, err := r.br.ReadSlice('\n')
	if err == nil && len(frag) <= r.max+2 {
		// Fast path: the whole line is in bufio's buffer; no copy.
		line := trimEOL(frag)
		return line, int64(len(line)), nil
	}
	r.buf = r.buf[:0]
	var total int64
	var prev, last byte // the last two bytes read
	for {
		total += int64(len(frag))
		if room := r.max + 2 - len(r.buf); room > 0 {
			r.buf = append(r.buf, frag[:min(room, len(frag))]...)
		}
		switch n := len(frag); n {
		case 0:
		case 1:
			prev, last = last, frag[0]
		default:
			prev, last = frag[n-2], frag[n-1]
		}
		switch {
		case err == nil || errors.Is(err, io.EOF):
			if total == 0 {
				return nil, 0, io.EOF
			}
			ending := 0
			switch {
			case err == nil && total >= 2 && prev == '\r': // "\r\n"
				ending = 2
			case err == nil: // "\n"
				ending = 1
			case last == '\r': // a last line cut after "\r"
				ending = 1
			}
			size := total - int64(ending)
			if size <= int64(r.max) {
				return r.buf[:size], size, err
			}
			return r.buf, size, err
		case errors.Is(err, bufio.ErrBufferFull):
			frag, err = r.br.ReadSlice('\n')
		default:
			return nil, 0, err
		}
	}
}

func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
		if n := len(b); n > 0 && b[n-1] == '\r' {
			b = b[:n-1]
		}
	}
	return b
}

func isBlank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' {
			return false
		}
	}
	return true
}
