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

func TestClosestBlockType(t *testing.T) {
	t.Parallel()
	cases := []struct {
		given      string
		candidates []string
		want       string
	}{
		{"retries", []string{"lease", "retry", "input"}, "retry"},
		{"retyr", []string{"lease", "retry", "input"}, "retry"},
		{"heartbeating", []string{"heartbeat", "local"}, "heartbeat"},
		{"inputs", []string{"lease", "retry", "input"}, "input"},
		{"leasing", []string{"lease"}, "lease"},
		{"docker", []string{"local", "ray", "kubernetes"}, ""},
		{"rays", []string{"ray"}, "ray"},      // one edit
		{"wdcx", []string{"wdc"}, "wdc"},      // one edit
		{"task", []string{"tasks"}, "tasks"},  // one edit
		{"re", []string{"retry"}, ""},         // too short to be its stem
		{"retro", []string{"retry"}, "retry"}, // one edit
		{"lea", []string{"lease"}, "lease"},   // two edits
	}
	for _, c := range cases {
		if got := closestBlockType(c.given, c.candidates); got != c.want {
			t.Errorf("closestBlockType(%q, %q) = %q, want %q", c.given, c.candidates, got, c.want)
		}
	}
}

func TestClosestArgument(t *testing.T) {
	t.Parallel()
	task := []string{"command", "env", "dir", "placement", "timeout", "depends_on", "count", "inputs", "outputs"}
	cases := []struct {
		given      string
		candidates []string
		want       string
	}{
		{"cmd", task, "command"},                  // a short form
		{"comand", task, "command"},               // one edit
		{"deps", task, "depends_on"},              // a short form
		{"timout", task, "timeout"},               // one edit
		{"plcmnt", task, "placement"},             // a short form
		{"o", task, ""},                           // too short
		{"ot", task, "outputs"},                   // the only one beginning so
		{"in", []string{"input", "interval"}, ""}, // ambiguous
		{"image", task, ""},
		{"labls", []string{"provider", "labels", "max"}, "labels"},
	}
	for _, c := range cases {
		if got := closestArgument(c.given, c.candidates); got != c.want {
			t.Errorf("closestArgument(%q, %q) = %q, want %q", c.given, c.candidates, got, c.want)
		}
	}
}
