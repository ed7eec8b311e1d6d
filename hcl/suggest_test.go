package hcl

import "testing"

func TestClosest(t *testing.T) {
	t.Parallel()
	cases := []struct {
		given      string
		candidates []string
		want       string
	}{
		{"shard", []string{"shards", "files"}, "shards"},
		{"shrads", []string{"shards"}, "shards"},
		{"locl", []string{"local", "ray", "kubernetes"}, "local"},
		{"docker", []string{"local", "ray", "kubernetes"}, ""},
		{"x", []string{"y"}, ""},                   // one edit is the whole name
		{"ab", []string{"ac", "ab2", "zz"}, "ab2"}, // ties go to the first in sort order
		{"same", []string{"same"}, ""},
		{"anything", nil, ""},
	}
	for _, c := range cases {
		if got := closest(c.given, c.candidates); got != c.want {
			t.Errorf("closest(%q, %q) = %q, want %q", c.given, c.candidates, got, c.want)
		}
	}
}
