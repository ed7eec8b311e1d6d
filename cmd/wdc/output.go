package main

import (
	"encoding/json"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// writeJSON writes v as indented JSON followed by a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// newTable returns a tabwriter for column output; call Flush when done.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// formatTime renders t in UTC to the second, or "-" when t is zero.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// jsonTime returns a pointer to t in UTC, or nil when t is zero, so JSON
// output omits unset times.
func jsonTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// formatLabels renders labels as "k=v,k=v" sorted by key, or "-".
func formatLabels(labels map[string]string) string {
	if len(labels) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + labels[k]
	}
	return strings.Join(parts, ",")
}

// orDash returns s, or "-" when s is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// keepGoingWriter is one of apply's output streams: a write that fails (a
// reader that went away, as `wdc apply | head` does, a full disk) is
// remembered, every later write is dropped, and each reports success, so
// that no output error stops an apply half-way: its workers, leases and
// lock are in the middle of something only the apply can finish.
type keepGoingWriter struct {
	mu  sync.Mutex
	w   io.Writer
	err error // the first write error
}

// keepGoing wraps w (once).
func keepGoing(w io.Writer) *keepGoingWriter {
	if k, ok := w.(*keepGoingWriter); ok {
		return k
	}
	return &keepGoingWriter{w: w}
}

func (k *keepGoingWriter) Write(p []byte) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err == nil {
		if _, err := k.w.Write(p); err != nil {
			k.err = err
		}
	}
	return len(p), nil
}

// Err is the first write that failed, or nil.
func (k *keepGoingWriter) Err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.err
}

// fileOf returns the file under w (through a keepGoingWriter), for
// terminal checks.
func fileOf(w io.Writer) (*os.File, bool) {
	if k, ok := w.(*keepGoingWriter); ok {
		w = k.w
	}
	f, ok := w.(*os.File)
	return f, ok
}
