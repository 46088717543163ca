package containers

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// timeFormat is Docker's RFC3339NanoFixed: fixed width, so text order is time order.
const timeFormat = "2006-01-02T15:04:05.000000000Z07:00"

// maxTimestamp bounds the timestamp prefix of a frame.
const maxTimestamp = 64

// LogReader turns a multiplexed, timestamped log stream (Docker's
// stdcopy framing: an 8-byte header {stream, 0, 0, 0, size uint32 BE} then
// "<RFC3339Nano time> <bytes>") into whole lines. A frame without a trailing
// newline is a fragment (Docker's json-file driver splits lines at 16 KiB);
// fragments of one stream are joined until a newline. Memory per stream is
// bounded by MaxLine: the rest of a longer line is discarded as it is read.
// A LogReader is not safe for concurrent use.
type LogReader struct {
	rc      io.ReadCloser
	br      *bufio.Reader // from readBufs while a frame's bytes are buffered; nil between
	since   time.Time
	want    [3]bool
	maxLine int
	parts   [3]*part
	lastT   [3]time.Time
	lastOrd [3]int
	ready   []LogLine
	err     error
}

type part struct {
	t     time.Time
	buf   []byte
	size  int
	trunc bool
}

// NewLogReader reads frames from rc (which Close closes) with the stream
// selection, Since filter and MaxLine of opts. Follow is up to rc.
func NewLogReader(rc io.ReadCloser, opts LogOptions) *LogReader {
	r := &LogReader{rc: rc, since: opts.Since, maxLine: opts.MaxLine}
	if r.maxLine <= 0 {
		r.maxLine = DefaultMaxLine
	}
	r.want[Stdout] = opts.Stdout || !opts.Stderr
	r.want[Stderr] = opts.Stderr || !opts.Stdout
	return r
}

// Close releases the underlying stream; a blocked Next returns an error.
func (r *LogReader) Close() error { return r.rc.Close() }

// Next returns the next line, io.EOF at the end of the log, or another error
// (the stream broke; lines already returned stay valid).
func (r *LogReader) Next() (LogLine, error) {
	for {
		if len(r.ready) > 0 {
			l := r.ready[0]
			r.ready = r.ready[1:]
			return l, nil
		}
		if r.err != nil {
			return LogLine{}, r.err
		}
		err := r.frame()
		if errors.Is(err, io.EOF) {
			// The log ended mid-line: hand out the fragments, oldest first.
			first, second := Stdout, Stderr
			if r.parts[Stderr] != nil && r.parts[Stdout] != nil && r.parts[Stderr].t.Before(r.parts[Stdout].t) {
				first, second = Stderr, Stdout
			}
			for _, s := range []Stream{first, second} {
				if r.parts[s] != nil {
					r.finish(s, true)
				}
			}
			r.err = io.EOF
			continue
		}
		if err != nil {
			r.err = err
			r.releaseBuf()
		}
	}
}

// readBufs are the read buffers of the LogReaders that have bytes buffered.
// A reader waiting for its next frame holds none: a relay following an
// agent that prints nothing (most of a wide tree, most of the time) costs
// no 64 KiB buffer (issue 23).
var readBufs = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, readBufSize) }}

const readBufSize = 64 << 10

// releaseBuf returns the read buffer, which must hold no unread byte.
func (r *LogReader) releaseBuf() {
	if r.br != nil {
		r.br.Reset(nil)
		readBufs.Put(r.br)
		r.br = nil
	}
}

// frame reads one frame.
func (r *LogReader) frame() error {
	var hdr [8]byte
	if r.br != nil && r.br.Buffered() == 0 {
		r.releaseBuf() // the next header may be long in coming
	}
	var err error
	if r.br == nil {
		// Straight from the stream (this is where a quiet log waits), then
		// a buffer for the frame and whatever came with it.
		if _, err = io.ReadFull(r.rc, hdr[:]); err == nil {
			r.br = readBufs.Get().(*bufio.Reader)
			r.br.Reset(r.rc)
		}
	} else {
		_, err = io.ReadFull(r.br, hdr[:])
	}
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("read log: stream ended inside a frame header")
		}
		return err
	}
	s, size := Stream(hdr[0]), int(binary.BigEndian.Uint32(hdr[4:]))
	if s == 3 { // Docker's in-band error
		msg := make([]byte, min(size, 4096))
		_, err := io.ReadFull(r.br, msg)
		r.discard(size - len(msg))
		if err != nil {
			return fmt.Errorf("read log: %w", err)
		}
		return fmt.Errorf("docker log error: %s", msg)
	}
	if s != Stdout && s != Stderr {
		return r.discard(size)
	}
	t, n, err := r.timestamp(size)
	if err != nil {
		return err
	}
	size -= n
	if !r.want[s] || t.Before(r.since) || size == 0 {
		return r.discard(size)
	}
	p := r.parts[s]
	if p != nil && !p.t.Equal(t) {
		// Fragments of one line share its time; a new time means the old line's end never came.
		r.finish(s, true)
		p = nil
	}
	if p == nil {
		p = &part{t: t}
		r.parts[s] = p
	}
	if err := r.consume(p, size-1); err != nil {
		return err
	}
	last, err := r.br.ReadByte()
	if err != nil {
		return fmt.Errorf("read log: stream ended inside a frame (%v)", err)
	}
	if last == '\n' {
		r.finish(s, false)
		return nil
	}
	r.add(p, []byte{last})
	return nil
}

// timestamp reads "<time> " from a frame of size bytes.
func (r *LogReader) timestamp(size int) (time.Time, int, error) {
	b, err := r.br.Peek(min(size, maxTimestamp))
	sp := bytes.IndexByte(b, ' ')
	if sp < 0 {
		if err != nil {
			return time.Time{}, 0, fmt.Errorf("read log: stream ended inside a frame (%v)", err)
		}
		return time.Time{}, 0, fmt.Errorf("read log: frame without a timestamp prefix (Logs needs timestamps on)")
	}
	t, ok := parseFixedUTC(b[:sp])
	if !ok {
		var perr error
		if t, perr = time.Parse(time.RFC3339Nano, string(b[:sp])); perr != nil {
			return time.Time{}, 0, fmt.Errorf("read log: bad timestamp %q (Logs needs timestamps on): %w", b[:sp], perr)
		}
	}
	r.br.Discard(sp + 1)
	return t, sp + 1, nil
}

// parseFixedUTC parses Docker's usual "2006-01-02T15:04:05.000000000Z"
// without allocating; ok is false for any other shape.
func parseFixedUTC(b []byte) (time.Time, bool) {
	if len(b) != 30 || b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' || b[19] != '.' || b[29] != 'Z' {
		return time.Time{}, false
	}
	num := func(s []byte) (int, bool) {
		n := 0
		for _, c := range s {
			if c < '0' || c > '9' {
				return 0, false
			}
			n = n*10 + int(c-'0')
		}
		return n, true
	}
	var v [7]int
	for i, f := range [7][2]int{{0, 4}, {5, 7}, {8, 10}, {11, 13}, {14, 16}, {17, 19}, {20, 29}} {
		n, ok := num(b[f[0]:f[1]])
		if !ok {
			return time.Time{}, false
		}
		v[i] = n
	}
	if v[1] < 1 || v[1] > 12 || v[2] < 1 || v[2] > 31 || v[3] > 23 || v[4] > 59 || v[5] > 60 {
		return time.Time{}, false
	}
	return time.Date(v[0], time.Month(v[1]), v[2], v[3], v[4], v[5], v[6], time.UTC), true
}

// consume appends n bytes of the stream to p, within MaxLine.
func (r *LogReader) consume(p *part, n int) error {
	for n > 0 {
		k := min(n, r.br.Size())
		b, err := r.br.Peek(k)
		if len(b) > 0 {
			r.add(p, b)
			r.br.Discard(len(b))
			n -= len(b)
		}
		if err != nil && n > 0 {
			return fmt.Errorf("read log: stream ended inside a frame (%v)", err)
		}
	}
	return nil
}

func (r *LogReader) add(p *part, b []byte) {
	p.size += len(b)
	if room := r.maxLine - len(p.buf); room < len(b) {
		b = b[:max(room, 0)]
		p.trunc = true
	}
	p.buf = append(p.buf, b...)
}

func (r *LogReader) discard(n int) error {
	if n <= 0 {
		return nil
	}
	if _, err := r.br.Discard(n); err != nil {
		return fmt.Errorf("read log: stream ended inside a frame (%v)", err)
	}
	return nil
}

// finish turns stream s's pending fragments into a ready line.
func (r *LogReader) finish(s Stream, unterminated bool) {
	p := r.parts[s]
	r.parts[s] = nil
	ord := 0
	if !r.lastT[s].IsZero() && r.lastT[s].Equal(p.t) {
		ord = r.lastOrd[s] + 1
	}
	r.lastT[s], r.lastOrd[s] = p.t, ord
	r.ready = append(r.ready, LogLine{
		Stream: s, Time: p.t, Ordinal: ord, Line: p.buf, Size: p.size,
		Truncated: p.trunc, Unterminated: unterminated,
	})
}

// appendFrame appends one frame in the format LogReader reads.
func appendFrame(dst []byte, s Stream, t time.Time, content []byte) []byte {
	ts := t.UTC().Format(timeFormat)
	var hdr [8]byte
	hdr[0] = byte(s)
	binary.BigEndian.PutUint32(hdr[4:], uint32(len(ts)+1+len(content)))
	dst = append(dst, hdr[:]...)
	dst = append(dst, ts...)
	dst = append(dst, ' ')
	return append(dst, content...)
}

// sinceParam formats t for Docker's `since` (seconds.nanoseconds).
func sinceParam(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return fmt.Sprintf("%d.%09d", t.Unix(), t.Nanosecond())
}
