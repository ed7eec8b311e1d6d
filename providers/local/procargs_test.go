package local

import (
	"encoding/binary"
	"slices"
	"testing"
)

func TestProcArgs(t *testing.T) {
	t.Parallel()
	buf := func(argc uint32, rest string) []byte {
		b := binary.LittleEndian.AppendUint32(nil, argc)
		return append(b, rest...)
	}
	cases := []struct {
		name string
		in   []byte
		want []string
	}{
		{"agent", buf(4, "/usr/local/bin/wdc\x00\x00\x00wdc\x00agent\x00--server\x00http://127.0.0.1:1\x00HOME=/x\x00"),
			[]string{"wdc", "agent", "--server", "http://127.0.0.1:1"}},
		{"other program", buf(2, "/bin/sleep\x00sleep\x0030\x00PATH=/bin\x00"), []string{"sleep", "30"}},
		{"too short", []byte{1, 0}, nil},
		{"no path end", buf(1, "/bin/sh"), nil},
		{"argc beyond the buffer", buf(5, "/bin/sh\x00sh\x00-c\x00"), nil},
	}
	for _, c := range cases {
		got := procArgs(c.in)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: procArgs = %q, want %q", c.name, got, c.want)
		}
	}
}
