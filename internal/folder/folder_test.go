package folder

import "testing"

func TestHolds(t *testing.T) {
	tests := []struct {
		dir, path string
		want      bool
	}{
		{"/a", "/a", true},
		{"/a", "/a/b/c", true},
		{"/a/", "/a/b", true},
		{"/", "/a", true},
		{"/a", "/ab", false},
		{"/a/b", "/a", false},
		{"/a", "/b/../a/x", true},
		{"/a", "/a/../b", false},
		{"a", "a/b", true},
		{"/a", "b", false},
	}
	for _, tt := range tests {
		if got := Holds(tt.dir, tt.path); got != tt.want {
			t.Errorf("Holds(%q, %q) = %v, want %v", tt.dir, tt.path, got, tt.want)
		}
	}
}
